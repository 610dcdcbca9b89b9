"""``cp watch``: the reconciliation loop people leave running.

A loop that runs unattended must not turn a moment's oddity into damage, and must not
stop on the first problem. So each cycle:

1. Waits until the spec files are quiet: a file written in the last ``quiet`` seconds
   (an editor saving, a ``git pull`` in progress, a file emptied and rewritten) defers
   the cycle until nothing has changed for that long, and so does a file a process holds
   open for writing (a slow copy that pauses longer than that; controlplane/writers.py).
2. Loads the specs; a cycle whose specs do not load applies nothing (the errors are
   printed, the next change or tick tries again).
3. Plans, and with ``auto_approve`` applies, under the apply lease (one actor at a time).
   A prune guard, like Argo CD's: when the plan would cancel more than
   ``max_prune_share`` of the running workloads because they left the specs (and more
   than one), it is shown but not applied without ``allow_mass_prune``. Nor is a plan
   whose spec files changed (or were opened for writing) while it was made: it may have
   read a file half-written, and the next cycle reads them again.
4. Reports what happened in one timestamped line. A broken state file or store, an
   unreachable cluster: reported the same way, and retried with backoff (the interval,
   doubled per failure in a row, at most ``MAX_BACKOFF``). A lease held elsewhere (a
   person applying by hand) is reported too, but retried at the interval: somebody else
   acting is not the loop failing. So is a checkout behind the specs another reconciler
   applied (controlplane/lineage.py): its pull is due, and it undoes nothing meanwhile.

SIGINT or SIGTERM (see :meth:`Watcher.stop`) lets the action in flight finish, leaves
the plan resumable and ends the loop; a second one ends it at once (the command line's
signal handling, which asks :attr:`Watcher.acting` what it interrupts). The spec
directory may be replaced under the loop (git-sync's symlink pointed at the next
checkout, a fresh copy renamed into place): :class:`~controlplane.following.Followed`
then watches the one the path names now.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from adapters.base import AdapterError
from controlplane import pruning, workflow
from controlplane.errors import CheckoutBehindError, ControlPlaneError, LeaseHeldError
from controlplane.following import REPLACED, Batch
from controlplane.plan import Plan
from controlplane.writers import Writer, writers
from solvers.policy import DEFAULT_POLICY, Policy
from specs.actions import Op, ReasonCode
from specs.diagnostics import SpecError
from specs.files import is_spec_path
from specs.snapshot import Snapshot

MAX_BACKOFF = 600.0
PRUNE_EVERY = 86_400.0  # seconds between two prunes of the history (--keep-history)


@dataclass(frozen=True)
class WatchOptions:
    interval: float = 30.0  # seconds between reconciles when nothing changes
    quiet: float = 2.0  # seconds the spec files must be unchanged before a cycle reads them
    auto_approve: bool = False
    allow_mass_prune: bool = False
    max_prune_share: float = 0.25
    db: str | None = None
    policy: Policy = DEFAULT_POLICY  # each cycle's plan: its time limit (--time-limit)
    keep_history: int | None = None  # seconds of history kept (--keep-history): once a day


@dataclass(frozen=True)
class Cycle:
    """One cycle's outcome: its line, and whether it failed (failures back off, but for
    one that still reconciled the clusters that answered: they are not made to wait)."""

    line: str
    failed: bool = False
    partial: bool = False  # failed for some clusters only: the interval stays as it is
    busy: bool = False  # another reconciler held the lease or is ahead: the interval stays
    held_back: bool = False  # the prune guard held the plan back: it needs a person


class Watcher:
    def __init__(self, spec_dir: Path, options: WatchOptions, log: Callable[[str], None]) -> None:
        self.spec_dir, self.options, self.log = spec_dir, options, log
        self.stopping = threading.Event()
        self.failures = 0  # cycles in a row that failed and reconciled nothing
        self.failed = False  # whether the latest cycle failed, even partly (--once)
        self.held_back = False  # whether the latest cycle's plan was held back (--once)
        self.cycles = 0
        self.acting = False  # a cycle's apply asked before its first action, and goes on
        self._blocked: str | None = None  # why the prune guard held the last plan back
        self._had_store = False  # whether a cycle saw the SQLite store there
        self._read_as: dict[str, float] | None = None  # the spec files' dates as settled
        self._pruned_at: float | None = None  # when the history was last pruned (monotonic)

    def stop(self) -> None:
        """Finish the action in flight, then end the loop (a signal handler calls this)."""
        self.stopping.set()

    def _asked(self) -> bool:
        """An apply's question before each action: stop now? The first one says it acts."""
        self.acting = True
        return self.stopping.is_set()

    # ------------------------------------------------------------------ the loop

    def run(self, changes: Iterator[Batch] | None = None, once: bool = False) -> None:
        """Cycle now, then on every file change ``changes`` reports (it yields an empty set
        on a tick) or when the delay is up, until stopped."""
        while not self.stopping.is_set():
            self.settle()
            if self.stopping.is_set():
                break
            outcome = self.cycle()
            # a plan sets the objects alive before it aside from the collector and gives
            # them back afterwards (collector.planning), which keeps Python's full
            # collection from coming round: without one per cycle, each cycle's garbage
            # stayed for as long as the loop ran
            gc.collect()
            self.failed, self.held_back = outcome.failed, outcome.held_back
            backs_off = outcome.failed and not (outcome.partial or outcome.busy)
            self.failures = self.failures + 1 if backs_off else 0
            delay = self.delay()
            retry = f"; retrying in {delay:g}s" if outcome.failed and not once else ""
            self.log(f"{_stamp()} {outcome.line}{retry}")
            self.prune()
            if once:
                return
            if changes is None:
                self.stopping.wait(delay)
            else:
                self._next(changes, delay)

    def prune(self) -> None:
        """With ``keep_history``: the history older than it removed, after the first cycle
        and a day after each prune (a prune the lease keeps waiting is tried next cycle)."""
        keep, now = self.options.keep_history, time.monotonic()
        if keep is None or (self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY):
            return
        try:
            _, pruned, _ = pruning.prune(self.spec_dir, self.options.db, keep)
        except LeaseHeldError:
            return
        except ControlPlaneError as exc:
            self.log(f"{_stamp()} history not pruned: {exc}")
        else:
            if pruned.plans:
                self.log(f"{_stamp()} history pruned: {pruning.told(pruned)}")
            elif pruned.stopped:  # older history it may not remove: said, once a day
                self.log(f"{_stamp()} history not pruned: {pruning.told(pruned)}")
        self._pruned_at = now

    def delay(self) -> float:
        """The interval, doubled per failure in a row (at most MAX_BACKOFF)."""
        if not self.failures:
            return self.options.interval
        return min(MAX_BACKOFF, self.options.interval * float(2 ** (self.failures - 1)))

    def _next(self, changes: Iterator[Batch], delay: float) -> None:
        """Until a spec file changes (reconcile at once: a fix should not wait out a
        backoff), the delay is up, or the loop is stopped. ``changes`` reports every
        change under the spec directory (an empty batch: a tick); the clock is looked at
        on each, so changes to other files never hold a cycle off."""
        deadline = time.monotonic() + delay
        for batch in changes:
            if any(
                kind == REPLACED or spec_change(str(path), self.spec_dir) for kind, path in batch
            ):
                return
            if self.stopping.is_set() or time.monotonic() >= deadline:
                return

    def settle(self) -> None:
        """Wait until no spec file changed for ``quiet`` seconds; held off for more than
        ten times that (an editor's autosave, a sync tool), say so, once: a stalled loop
        must not look like a quiet one."""
        started, told = time.monotonic(), False
        seen, same_since = None, started  # the files' dates, unchanged since when
        told_writers: list[Writer] = []
        while not self.stopping.is_set():
            dates = spec_dates(self.spec_dir)
            if dates != seen:
                seen, same_since = dates, time.monotonic()
            age = time.time() - max(dates.values(), default=0.0)
            if age < 0:  # dated ahead of this clock (skew on NFS, a tarball, touch -d): the
                age = time.monotonic() - same_since  # date says nothing; watch for changes
            if age >= self.options.quiet:
                busy = writers(dates)
                if not busy:
                    self._read_as = _files(dates)
                    return
                if told_writers != busy:
                    told_writers = busy
                    self.log(f"{_stamp()} cycle waits: {self._said(busy)}; it runs once closed")
                self.stopping.wait(min(1.0, max(0.1, self.options.quiet)))
                continue
            held = time.monotonic() - started
            if not told and held > 10 * self.options.quiet:
                told = True
                self.log(
                    f"{_stamp()} cycle held off: the spec files keep changing (for "
                    f"{held:.0f}s); it runs once they have been quiet for "
                    f"{self.options.quiet:g}s (--quiet)"
                )
            self.stopping.wait(self.options.quiet - age)

    # ------------------------------------------------------------------ one cycle

    def _store_gone(self) -> str | None:
        """Why not to go on, when the SQLite store a cycle saw is gone (deleted by hand, a
        clean checkout): its history went with it, and the loop does not start a new,
        empty one behind people's backs. A loop started anew does."""
        from controlplane.store import default_url, sqlite_file  # sqlalchemy, only here

        file = sqlite_file(self.options.db or default_url(self.spec_dir))
        if file is None:  # not SQLite: the database server keeps it
            return None
        if file.exists():
            self._had_store = True
            return None
        if not self._had_store:
            return None
        return (
            f"the store {file} is gone since the last cycle (and its history with it): "
            "nothing done; restore it, or restart cp watch to begin a new history"
        )

    def cycle(self) -> Cycle:
        self.cycles += 1
        head = f"cycle {self.cycles}:"  # stamped when it is told: after the apply
        if (gone := self._store_gone()) is not None:
            return Cycle(f"{head} {gone}", failed=True)
        try:
            return self._cycle(head)
        finally:
            self.acting = False
            self._store_gone()  # the store the cycle left (started, maybe) is the one to keep

    def _cycle(self, head: str) -> Cycle:
        try:
            loaded = workflow.load(self.spec_dir)
            if not loaded.desired.clusters:  # a wrong directory, or one emptied by mistake
                return Cycle(f"{head} no clusters in the specs; nothing planned", failed=True)
            if self.options.auto_approve:
                plan, report = workflow.apply_specs(
                    self.spec_dir,
                    loaded,
                    db=self.options.db,
                    approve=self._guard,
                    policy=self.options.policy,
                    stop=self._asked,
                    loop=True,
                )
            else:
                plan = workflow.build_plan(
                    self.spec_dir,
                    loaded,
                    db=self.options.db,
                    forecast=True,
                    policy=self.options.policy,
                    keep=False,
                    record=True,  # it observes: the store learns what it sees
                )
                plan = workflow.named_once(self.spec_dir, plan, db=self.options.db)
                report = None
        except SpecError as exc:
            first = exc.diagnostics[0] if exc.diagnostics else "?"
            return Cycle(
                f"{head} specs do not load ({len(exc.diagnostics)} problem(s), first: "
                f"{first}); nothing applied",
                failed=True,
            )
        except (LeaseHeldError, CheckoutBehindError) as exc:  # retried, never backed off
            return Cycle(f"{head} {exc}", failed=True, busy=True)
        except (ControlPlaneError, AdapterError) as exc:
            return Cycle(f"{head} {exc}", failed=True)
        summary = _summary(plan)
        # a cluster that did not answer was not reconciled: the cycle says so and fails
        # (--once exits 1); the clusters that answered were, and unless none did, the
        # loop keeps its interval for them
        partial = len(plan.unreachable) < len(loaded.desired.clusters)
        down = "".join(
            f"; unreachable: {name} ({error})" for name, error in sorted(plan.unreachable.items())
        )
        if report is None:
            blocked, self._blocked = self._blocked, None
            if blocked:
                return Cycle(
                    f"{head} plan {plan.id}: {summary}; NOT applied: {blocked}{down}",
                    failed=bool(down),
                    partial=partial,
                    held_back=True,
                )
            verb = "nothing to apply" if plan.empty else "not applied (no --auto-approve)"
            return Cycle(
                f"{head} plan {plan.id}: {summary}; {verb}{down}",
                failed=bool(down),
                partial=partial,
            )
        done = sum(o.status == "done" for o in report.outcomes)
        state = (
            "stopped on request"
            if report.stopped
            else ("applied" if report.ok else "apply stopped")
        )
        broke = report.failed[0] if report.failed else None
        why = (
            f" (first: {broke.action.op.value} {broke.action.workload}: {broke.message})"
            if broke is not None
            else ""
        )
        return Cycle(
            f"{head} plan {plan.id}: {summary}; {state}: {done} done, "
            f"{len(report.failed)} failed{why}{down}",
            failed=not report.ok or bool(down),
            partial=report.ok and partial,
        )

    def _guard(self, plan: Plan, observed: Snapshot, *, again: bool = False) -> bool:
        """The guards: may this plan be applied without asking?"""
        self._blocked = None if plan.empty else self._changed_since_read()
        if self._blocked is not None:
            return False
        prunes = [a for a in plan.actions if a.reason.code == ReasonCode.PRUNE]
        if len(prunes) < 2 or self.options.allow_mass_prune:
            return True
        running = {
            j.workload
            for c in observed.clusters
            for j in c.jobs
            if j.workload and j.state.holds_gpus
        }
        share = len(prunes) / max(1, len(running))
        if share <= self.options.max_prune_share:
            return True
        self._blocked = (
            f"it would cancel {len(prunes)} of {len(running)} running workloads "
            f"that left the specs ({share:.0%}, above "
            f"{self.options.max_prune_share:.0%}); check the specs, then run "
            "`cp apply` or restart watch with --allow-mass-prune"
        )
        return False

    def _changed_since_read(self) -> str | None:
        """Why the specs the plan was made of may not be what the files hold now: they
        changed since the cycle read them, or a process is writing one."""
        dates = spec_dates(self.spec_dir)
        if self._read_as is not None and _files(dates) != self._read_as:
            return "the spec files changed while it was planned; the next cycle reads them again"
        if busy := writers(dates):
            return f"{self._said(busy)}; the next cycle waits for it"
        return None

    def _said(self, busy: list[Writer]) -> str:
        w = busy[0]
        path = os.path.relpath(w.path, self.spec_dir)
        return f"{path} is open for writing by pid {w.pid} ({w.command})"


def spec_change(path: str, spec_dir: Path) -> bool:
    """Whether a changed file is one the loader reads (the store under ``.cp/`` is not)."""
    return is_spec_path(os.path.relpath(path, spec_dir))


def spec_dates(spec_dir: Path) -> dict[str, float]:
    """When each spec file and folder under ``spec_dir`` last changed (a deleted file
    changes its folder)."""
    dates = {}
    for folder, subfolders, names in os.walk(spec_dir):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]
        for path in [
            folder,
            *(os.path.join(folder, n) for n in names if is_spec_path(n)),
        ]:
            try:
                dates[path] = os.stat(path).st_mtime
            except OSError:
                continue  # gone while we looked: its folder changed
    return dates


def _files(dates: dict[str, float]) -> dict[str, float]:
    """The spec files' dates without their folders' (a folder's changes when ``.cp/`` is
    made in it; a file added, removed or renamed changes the keys)."""
    return {path: date for path, date in dates.items() if is_spec_path(os.path.basename(path))}


def _summary(plan: Plan) -> str:
    counts = Counter(a.op for a in plan.actions)
    parts = [f"{counts[op]:,} to {op.value}" for op in Op if counts[op]]  # as cp plan counts
    # a plan cut short (--time-limit) is told so, with the steps (`cp show PLAN` says why)
    cut = f", cut short ({', '.join(plan.solver.cut_steps)})" if plan.solver.work_left else ""
    return (", ".join(parts) or "no changes") + f", {len(plan.pending)} waiting{cut}"


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
