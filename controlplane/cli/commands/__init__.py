"""The commands, thin bodies over controlplane/workflow.py; importing this registers them.

:mod:`~controlplane.cli.commands.specs` (validate, schema),
:mod:`~controlplane.cli.commands.planning` (observe, plan, status, cost),
:mod:`~controlplane.cli.commands.explaining` (explain),
:mod:`~controlplane.cli.commands.applying` (apply, watch),
:mod:`~controlplane.cli.commands.records` (history, show),
:mod:`~controlplane.cli.commands.listing` (get, usage),
:mod:`~controlplane.cli.commands.store` (store init),
:mod:`~controlplane.cli.commands.shell` (completion).
"""

from controlplane.cli.commands import (
    applying,
    explaining,
    listing,
    planning,
    records,
    shell,
    specs,
    store,
)

__all__ = [
    "applying",
    "explaining",
    "listing",
    "planning",
    "records",
    "shell",
    "specs",
    "store",
]
