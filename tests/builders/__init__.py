"""Test builders with keyword defaults, one set for every test (kueue's MakeWorkload style,
as plain factories).

:mod:`~tests.builders.specs` builds spec documents as a user writes them (camelCase keys);
the defaults form one small, valid organisation: cluster ``sim`` (simulator; 4 x 8
``a100_80`` and 8 x 4 ``v100``), department ``science`` (16 GPUs), project ``chem``
(8 GPUs) and workload ``chem/md-run`` (one replica of 4 GPUs). A project joins a department only when told
(``department=``), so most solver tests need no tree; ``base_docs()`` is that
organisation with the cluster named ``rivanna`` and ``chem`` in ``science``. :mod:`~tests.builders.state` turns
documents into a DesiredState without the loader; :mod:`~tests.builders.files` writes them
as a spec repo and finds positions in it; :mod:`~tests.builders.cli` runs the CLI in-process.
"""

from tests.builders.specs import (
    base_docs,
    cluster,
    department,
    document,
    pool,
    project,
    workload,
)
from tests.builders.state import NOW, desired

__all__ = [
    "NOW",
    "base_docs",
    "cluster",
    "department",
    "desired",
    "document",
    "pool",
    "project",
    "workload",
]
