"""Pausing Python's cyclic garbage collector while objects are made in bulk.

Loading specs, reading a snapshot or rendering a large plan allocates hundreds of
thousands of objects in bursts, none of them garbage in a cycle; every burst triggers
collections that walk everything still alive, which measured as costly as the work
itself. :func:`paused` holds collections off for the block and restores the collector's
state after it. The policy of a whole process (what is set aside, and when it is given
back) is controlplane/collector.py's.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """No collection inside the block; the collector as it was afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
