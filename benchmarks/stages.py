"""Where a plan's time goes, stage by stage, without touching the planning code.

:class:`Stopwatch` wraps the functions the reconciler calls for each step (the names as
controlplane/reconcile.py and controlplane/converge.py imported them) while it is
active, and adds up wall time per stage over every round. Benchmark-only: the core stays
free of timers, and the wrappers come off when the ``with`` block ends.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import controlplane.converge as converge_module
import controlplane.reconcile as reconcile_module
import solvers.allocation as allocation_module
import solvers.cpsat as cpsat_module

# (module, name, stage): the calls a plan makes, in the order the table shows them
HOOKS: list[tuple[Any, str, str]] = [
    (reconcile_module, "planning_problem", "build problem"),
    (allocation_module, "allocate", "allocate (KAI greedy)"),
    # allocate_best imports CP-SAT when it first runs, so its solve is wrapped where it lives
    (cpsat_module, "solve", "allocate (CP-SAT)"),
    (reconcile_module, "consolidate", "consolidate"),
    (reconcile_module, "reclaim", "reclaim"),
    (reconcile_module, "preempt", "preempt"),
    (reconcile_module, "allocate", "allocate again"),
    (converge_module, "_apply", "converge: virtual applies"),
]
STAGES = [stage for _, _, stage in HOOKS]


class Stopwatch:
    """Seconds per stage, and how many rounds (KAI cycles) the plan ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.rounds = 0

    @contextmanager
    def active(self) -> Iterator[Stopwatch]:
        saved = [(module, name, getattr(module, name)) for module, name, _ in HOOKS]
        cycle = reconcile_module.cycle
        try:
            for module, name, stage in HOOKS:
                setattr(module, name, self._timed(getattr(module, name), stage))
            reconcile_module.cycle = self._counted(cycle)
            yield self
        finally:
            for module, name, fn in saved:
                setattr(module, name, fn)
            reconcile_module.cycle = cycle

    def _timed(self, fn: Callable[..., Any], stage: str) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[stage] += time.perf_counter() - started

        return wrapper

    def _counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.rounds += 1
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds["cycle"] += time.perf_counter() - started

        return wrapper

    def rest(self, total: float) -> float:
        """What the plan spent outside the named stages (actions, reasons, quota tables,
        fair shares, net actions)."""
        return max(0.0, total - sum(v for k, v in self.seconds.items() if k != "cycle"))
