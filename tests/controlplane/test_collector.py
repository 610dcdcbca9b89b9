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
