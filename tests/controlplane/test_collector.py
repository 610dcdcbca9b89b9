"""The cyclic collector while specs and snapshots are built in bulk and while a plan is
made: paused while they are built, what was built set aside until the plan's end gives it
back, and the collector's own state as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from controlplane import collector


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_objects_built_in_bulk_are_set_aside_until_a_plan_ends(unfrozen: None) -> None:
    assert gc.isenabled()
    with collector.building():
        assert not gc.isenabled(), "no collection walks what is being built"
        built = [{"replica": i} for i in range(10_000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(built), "set aside: the next collection skips them"
    with collector.planning():
        assert gc.get_freeze_count() >= len(built)
    assert gc.get_freeze_count() == 0, "the plan's end gives them back to the collector"


def test_the_collector_stays_off_if_it_was_and_on_after_an_error(unfrozen: None) -> None:
    gc.disable()
    try:
        with collector.building():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(ValueError), collector.building():
        raise ValueError("a spec that does not load")
    assert gc.isenabled()


def test_a_plans_views_are_made_with_the_collector_paused() -> None:
    import io
    from pathlib import Path

    from rich.console import Console

    from adapters.simulator import nodes_from_spec
    from controlplane.cli.views.markdown import plan_markdown
    from controlplane.cli.views.plan import print_plan
    from controlplane.reconcile import plan
    from specs.loader import load_specs
    from specs.snapshot import ClusterState, Snapshot
    from tests.builders import NOW

    collecting: set[bool] = set()

    class Watching(io.StringIO):
        """A terminal that notes whether the collector ran while it was written to."""

        def write(self, text: str) -> int:
            collecting.add(gc.isenabled())
            return super().write(text)

    desired = load_specs(Path(__file__).resolve().parents[2] / "examples" / "quickstart").desired
    nodes = [ClusterState(name=n, nodes=nodes_from_spec(c)) for n, c in desired.clusters.items()]
    made = plan(desired, Snapshot(now=NOW, clusters=nodes), now=NOW)
    print_plan(Console(file=Watching(), width=80), made)
    assert collecting == {False}
    assert gc.isenabled(), "and on again afterwards"
    assert plan_markdown(made) and gc.isenabled()
