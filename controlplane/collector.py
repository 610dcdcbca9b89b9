"""Python's cyclic garbage collector, tuned while a plan is made.

A plan at thousands of nodes allocates millions of small, short-lived objects (trial
placements, sort keys, runs) while the loaded specs and snapshot hold millions of
long-lived ones. With the default thresholds a full collection, which walks every live
object, runs again and again and measured a third of a plan's time. While planning, the
objects alive before it are set aside (``gc.freeze``) and collections run less often;
both are undone afterwards, so a long-running ``cp watch`` frees what it no longer needs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# young objects before a collection; collections of the middle and oldest generations
PLANNING_THRESHOLDS = (50_000, 50, 1_000)


@contextmanager
def planning() -> Iterator[None]:
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*PLANNING_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
