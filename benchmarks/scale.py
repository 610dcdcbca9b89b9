"""Plans at real scale: busy orgs, stage by stage, today's victim search against the new one.

For each size, a busy org (benchmarks/busy.py) is written as a spec repo and a snapshot,
then, in this process: the specs are loaded (cold cache, then warm), the snapshot read,
and ``reconcile.plan`` run as ``cp plan --observed`` runs it (default engine, the plan's
time limit on the real clock), once with the first victim search (``Policy(search=
"exhaustive", retry_twins=True)``: today's code path, capped in time) and once with the
new one; each plan is then rendered (JSON, text, Markdown). Stage times come from
benchmarks/stages.py. Peak memory is measured in a forked child per run (the child's peak
RSS, and tracemalloc's peak per stage). Quality: evictions and moves, and the GPUs held
within deserved quota and within fair share after each plan, on the same input.
"""

from __future__ import annotations

import io
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from benchmarks.busy import busy_org, write_org
from benchmarks.stages import STAGES, Stopwatch
from controlplane import collector, statefiles
from controlplane.cli.views.markdown import plan_markdown
from controlplane.cli.views.plan import print_plan
from controlplane.plan import Plan, shrinks
from controlplane.reconcile import plan
from solvers.policy import Policy
from specs.actions import Op
from specs.loader import load_specs

TODAY = "today"  # the first victim search, kept selectable for this comparison
NEW = "new"
POLICIES = {
    TODAY: lambda cap: Policy(search="exhaustive", retry_twins=True, time_limit=cap),
    NEW: lambda cap: Policy(time_limit=cap),
}


@dataclass
class Run:
    """One plan of one org with one search: seconds per stage and what the plan did."""

    seconds: dict[str, float] = field(default_factory=dict)
    cpu: float = 0.0
    rounds: int = 0
    cut_short: list[str] = field(default_factory=list)
    evictions: int = 0  # replicas taken away (preempt, shrink)
    moves: int = 0
    in_quota: float = 0.0  # GPUs held within deserved after the plan, over every queue
    within_fair: float = 0.0  # ... within fair share
    peak_rss_mb: float = 0.0
    repeats: int = 1  # plans run, the fastest kept
    stage_peaks_mb: dict[str, float] = field(default_factory=dict)


@dataclass
class Size:
    nodes: int
    pending: int
    gpus: int = 0
    running: int = 0
    projects: int = 0
    load_cold: float = 0.0
    load_warm: float = 0.0
    snapshot: float = 0.0
    runs: dict[str, Run] = field(default_factory=dict)


def measure(
    nodes: int, pending: int, searches: list[str], cap: float, memory: bool, repeat: int = 1
) -> Size:
    """``repeat``: plans of the new search, the fastest kept (the machine's speed drifts
    between minutes; the fastest run is the one least disturbed). Today's runs once."""
    size = Size(nodes, pending)
    org = busy_org(nodes, pending)
    size.gpus, size.running = org.gpus, org.running
    size.projects = sum(1 for d in org.docs if d["kind"] == "Project")
    with tempfile.TemporaryDirectory() as tmp:
        specs, observed = write_org(org, Path(tmp))
        cache = Path(tmp) / "cache"
        _, size.load_cold = _timed(lambda: _load(specs, cache))
        loaded, size.load_warm = _timed(lambda: _load(specs, cache))
        snap, size.snapshot = _timed(lambda: statefiles.read_snapshot(observed))
        for search in searches:
            runs = [
                _plan(loaded.desired, snap, POLICIES[search](cap))
                for _ in range(repeat if search == NEW else 1)
            ]
            run = min(runs, key=lambda r: r.seconds["plan"])
            run.repeats = len(runs)
            if memory:
                _memory(run, specs, cache, observed, search, cap)
            size.runs[search] = run
    return size


def _load(specs: Path, cache: Path) -> Any:
    """The specs loaded as cp does (controlplane/workflow.py ``load``): the collector
    paused while they are built, then what was built set aside."""
    with collector.building():
        return load_specs(specs, cache_dir=cache)


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    return fn(), time.perf_counter() - started


def _plan(desired: Any, snap: Any, policy: Policy) -> Run:
    run = Run()
    watch = Stopwatch()
    cpu = time.process_time()
    with watch.active(), collector.planning():  # as cp plan does (controlplane/workflow.py)
        made, wall = _timed(
            lambda: plan(desired, snap, now=snap.now, policy=policy, clock=time.monotonic)
        )
    _, run.seconds["render (JSON, text, Markdown)"] = _timed(lambda: _render(made))
    run.cpu = time.process_time() - cpu
    run.seconds.update({k: v for k, v in watch.seconds.items() if k != "cycle"})
    run.seconds["rest of the cycles"] = watch.rest(wall)
    run.seconds["plan"] = wall
    run.rounds = watch.rounds
    run.cut_short = made.solver.cut_short
    _quality(run, made)
    return run


def _render(made: Plan) -> None:
    made.to_json()
    print_plan(Console(file=io.StringIO(), width=160), made)
    plan_markdown(made)


def _quality(run: Run, made: Plan) -> None:
    for a in made.actions:
        if a.op == Op.PREEMPT:
            run.evictions += 1
        elif a.op == Op.MOVE:
            run.moves += 1
        elif shrinks(a):
            run.evictions += 1
    for q in [*made.projects.values(), *made.departments.values()]:
        run.in_quota += min(q.allocated, q.deserved)
        run.within_fair += min(q.allocated, q.fair_share)


def _memory(run: Run, specs: Path, cache: Path, observed: Path, search: str, cap: float) -> None:
    """Peak RSS and tracemalloc's peak per stage, in a fresh interpreter (this process's own
    peak, or a forked child's, would include what this one holds)."""
    args = [str(specs), str(cache), str(observed), search, str(cap)]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    run.peak_rss_mb = float(out[0])
    for pair in out[1:]:
        k, v = pair.split("=")
        run.stage_peaks_mb[k.replace("_", " ")] = float(v)


def _memory_child(specs: Path, cache: Path, observed: Path, search: str, cap: float) -> None:
    """Load, read, plan and render once, then print the peak RSS and the peaks per stage."""
    tracemalloc.start()
    peaks: dict[str, float] = {}
    loaded = _load(specs, cache)
    peaks["load specs"] = tracemalloc.get_traced_memory()[1] / 2**20
    snap = statefiles.read_snapshot(observed)
    with _PeakWatch(peaks).active(), collector.planning():
        made = plan(
            loaded.desired, snap, now=snap.now, policy=POLICIES[search](cap), clock=time.monotonic
        )
    _render(made)
    peaks["whole run"] = tracemalloc.get_traced_memory()[1] / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{rss:.1f}", " ".join(f"{k.replace(' ', '_')}={v:.1f}" for k, v in peaks.items()))


class _PeakWatch(Stopwatch):
    """A stopwatch that records tracemalloc's peak inside each stage instead of time."""

    def __init__(self, peaks: dict[str, float]) -> None:
        super().__init__()
        self.peaks = peaks

    def _timed(self, fn: Callable[..., Any], stage: str) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            tracemalloc.reset_peak()
            try:
                return fn(*args, **kwargs)
            finally:
                peak = tracemalloc.get_traced_memory()[1] / 2**20
                self.peaks[stage] = max(self.peaks.get(stage, 0.0), peak)

        return wrapper


# ------------------------------------------------------------------ tables


def _cell(run: Run | None, key: str, capped: bool) -> str:
    if run is None:
        return "-"
    value = run.seconds.get(key, 0.0)
    return f"> {value:.1f}" if capped and key == "plan" else f"{value:.2f}"


def print_size(size: Size, cap: float, out: Any = sys.stdout) -> None:
    today, new = size.runs.get(TODAY), size.runs.get(NEW)
    capped = today is not None and bool(today.cut_short)
    print(
        f"\n### {size.nodes:,} nodes ({size.gpus:,} GPUs), {size.projects} projects, "
        f"{size.running:,} running jobs, {size.pending:,} pending\n",
        file=out,
    )
    print("| stage | today s | new s | new / today |", file=out)
    print("|---|---:|---:|---:|", file=out)
    print(f"| load specs, cold cache | {size.load_cold:.2f} | {size.load_cold:.2f} | |", file=out)
    print(f"| load specs, warm cache | {size.load_warm:.2f} | {size.load_warm:.2f} | |", file=out)
    print(f"| read snapshot | {size.snapshot:.2f} | {size.snapshot:.2f} | |", file=out)
    keys = [*STAGES, "rest of the cycles", "render (JSON, text, Markdown)", "plan"]
    for key in keys:
        a = today.seconds.get(key, 0.0) if today else 0.0
        b = new.seconds.get(key, 0.0) if new else 0.0
        ratio = f"{b / a:.3f}x" if today and a >= 0.01 and not (capped and key == "plan") else ""
        name = "plan (wall)" if key == "plan" else key
        print(
            f"| {name} | {_cell(today, key, capped)} | {_cell(new, key, False)} | {ratio} |",
            file=out,
        )
    end_a = (size.load_warm + size.snapshot + today.seconds["plan"]) if today else 0.0
    end_b = (size.load_warm + size.snapshot + new.seconds["plan"]) if new else 0.0
    ratio = (
        f"{end_b / end_a:.3f}x"
        if today and not capped
        else ("< " + f"{end_b / end_a:.3f}x" if today else "")
    )
    mark = "> " if capped else ""
    cell_a = f"{mark}{end_a:.2f}" if today else "-"
    print(
        f"| **end to end** (warm load + snapshot + plan) | {cell_a} | {end_b:.2f} | {ratio} |",
        file=out,
    )
    rows: list[tuple[str, Callable[[Run], str]]] = [
        ("CPU seconds (plan + render)", lambda r: f"{r.cpu:.2f}"),
        ("rounds (KAI cycles)", lambda r: str(r.rounds)),
        ("plans run (the fastest shown)", lambda r: str(r.repeats)),
        ("peak RSS MB", lambda r: f"{r.peak_rss_mb:.0f}" if r.peak_rss_mb else "-"),
        ("evictions (preempt + shrink) / moves", lambda r: f"{r.evictions} / {r.moves}"),
        (
            "GPUs within deserved / within fair share",
            lambda r: f"{r.in_quota:.0f} / {r.within_fair:.0f}",
        ),
    ]
    for label, get in rows:
        a_cell = get(today) if today else "-"
        b_cell = get(new) if new else "-"
        print(f"| {label} | {a_cell} | {b_cell} | |", file=out)
    for name, run in size.runs.items():
        if run.cut_short:
            print(f"\n{name}: cut short: {'; '.join(run.cut_short)}", file=out)
        if run.stage_peaks_mb:
            peaks = ", ".join(f"{k} {v:.0f}" for k, v in run.stage_peaks_mb.items())
            print(f"\n{name}: tracemalloc peak MB per stage: {peaks}", file=out)
    del cap


def print_growth(sizes: list[Size], out: Any = sys.stdout) -> None:
    print("\n| nodes / pending | end to end s | CPU s | nodes x | time x |", file=out)
    print("|---|---:|---:|---:|---:|", file=out)
    prev: Size | None = None
    for size in sizes:
        run = size.runs[NEW]
        total = size.load_warm + size.snapshot + run.seconds["plan"]
        grow = ""
        if prev is not None:
            before = prev.load_warm + prev.snapshot + prev.runs[NEW].seconds["plan"]
            grow = f"| {size.nodes / prev.nodes:.1f} | {total / before:.2f}"
        else:
            grow = "| | "
        print(
            f"| {size.nodes:,} / {size.pending:,} | {total:.2f} | {run.cpu:.2f} {grow} |", file=out
        )
        prev = size


if __name__ == "__main__":  # the memory child: SPECS CACHE OBSERVED SEARCH CAP
    _memory_child(
        Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4], float(sys.argv[5])
    )
