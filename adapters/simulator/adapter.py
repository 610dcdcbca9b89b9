"""The file-backed simulator adapter: the engine's state kept as JSON under ``.cp/``.

:class:`SimulatorAdapter` persists a :class:`~adapters.simulator.engine.SimulatedCluster`
in ``STATE_DIR/simulator/<cluster>.json`` so that ``cp apply`` followed by ``cp plan``
shows the world moved on (``STATE_DIR``: the spec repo's ``.cp/``, or the folder of a
store kept elsewhere; a state kept in an ``earlier`` folder is carried on from there).
The spec's node pools are its hardware. As a forecaster (fan-out) it says "now" for a
request that fits at once and "unknown" otherwise.

The file is the simulated cluster's only truth, so it is handled as a real one would be:
every change is a read-modify-write under an exclusive lock (two applies cannot lose each
other's jobs), written whole aside and renamed over the old one (adapters/simulator/
statefile.py), and a file that is not a valid state is an error naming it, never silently
replaced. A read-only adapter (``cp plan``, a what-if at any ``--now``) computes where the
clock has taken the cluster but writes nothing back; one that writes refuses a clock
earlier than the state's (``--now`` going backwards would run ended jobs again).

So that an action costs what it changes, not the history: an ended job leaves the queue a
day after its end (``FORGET_ENDED_AFTER``, Slurm's ``MinJobAge``); the runs that ended are
appended to the cluster's accounting, a file of its own (adapters/simulator/ledger.py);
and an adapter keeps the state it saved for its next change, reading the file again only
when another writer has replaced it since.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from adapters.base import ActionResult, LocalStateError, PermanentError
from adapters.simulator.engine import SimulatedCluster, nodes_from_spec
from adapters.simulator.ledger import Ledger, Mark
from adapters.simulator.statefile import StateFile, Written, read_state, write_state
from specs.actions import Action, Op
from specs.models import Cluster
from specs.snapshot import ClusterState, JobRun, Node

ACCOUNTING_DAYS = 400  # ended runs kept: a year of budgets and fairshare, and then some
FORGET_ENDED_AFTER = timedelta(days=1)  # an ended job then leaves the queue (Slurm's MinJobAge)
PRUNE_EVERY = timedelta(days=7)  # how often the accounting drops what it no longer keeps


@dataclass
class _Held:
    """The state an adapter saved last, kept to change again without reading it back."""

    written: Written
    sim: SimulatedCluster
    clock: datetime
    mark: Mark


class SimulatorAdapter:
    """The file-backed simulator: state in ``STATE_DIR/simulator/<cluster>.json``."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        state_dir: Path,
        clock: Callable[[], datetime],
        read_only: bool = False,
        earlier: Path | None = None,
    ) -> None:
        self.spec = cluster
        self.cluster = cluster.metadata.name
        self.path = state_dir / "simulator" / f"{self.cluster}.json"
        # the state an earlier version kept in another folder (the spec repo's .cp/, before
        # the simulator moved beside a store kept elsewhere): read while there is none
        # here, so its jobs carry on; the first change writes it here
        self.earlier = earlier / "simulator" / f"{self.cluster}.json" if earlier else None
        self.clock = clock
        self.read_only = read_only
        self.ledger = Ledger(self.path.parent, self.cluster)  # its accounting, beside it
        self._held: _Held | None = None
        self._spec_nodes: dict[str, Node] | None = None  # the hardware, by name

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """Exclusive for a read-modify-write. Readers take no lock: a state file is always
        whole (written aside, then renamed), and a read sees the old state or the new."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def _load(self, *, held: bool = False) -> tuple[SimulatedCluster, Mark]:
        """The cluster as of the clock, and the mark of its accounting. ``held`` (under the
        lock, to change it): the state this adapter saved last, unless the file has been
        written since; it is taken, so a change that fails leaves it to be read again."""
        kept = self._held if held else None
        fresh = kept is not None and kept.written.unchanged()
        if held:
            self._drop_held()
        clock: datetime | None
        found: Path | None
        if kept is not None and fresh:
            sim, clock, mark, found = kept.sim, kept.clock, kept.mark, self.path
        else:
            sim, clock, mark, found = self._read()
        try:
            self.ledger.check(mark)
        except ValueError as exc:
            raise LocalStateError(
                f"{self.path}: {exc}; restore it, or delete the state to start the simulated "
                "cluster afresh (its jobs are lost)"
            ) from None
        now = self.clock()
        if not self.read_only and clock is not None and now < clock:
            raise LocalStateError(
                f"the simulated cluster {self.cluster} is at {clock.isoformat()}; "
                f"{now.isoformat()} would run its clock backwards (jobs that ended would be "
                "running, and history out of order): give the command a later --now (cp "
                "watch has none: it runs on the wall clock, and cannot act before then), or "
                f"delete {found} to start the simulated cluster afresh (its jobs are lost)"
            )
        if clock is not None and clock < now:
            # on the hardware as it was saved: what the last change freed room for (the last
            # action of an apply, which nothing looked at after) started then
            sim.refresh(clock)
        self._sync_nodes(sim)
        sim.refresh(now)
        self._sync_nodes(sim)  # what leaves or shrinks, as the work stands now
        sim.forget(now - FORGET_ENDED_AFTER)
        return sim, mark

    def _drop_held(self) -> None:
        if self._held is not None:
            self._held.written.close()
            self._held = None

    def _read(self) -> tuple[SimulatedCluster, datetime | None, Mark, Path | None]:
        """The saved state (here, or in the earlier folder), its clock, the mark of its
        accounting here, and the file read. Runs not in the accounting here (inline in a
        state of an earlier version, or in the earlier folder's) wait in ``accounting``."""
        found = next((p for p in (self.path, self.earlier) if p and p.exists()), None)
        if found is None:
            return SimulatedCluster(ClusterState(name=self.cluster)), None, Mark(), None
        try:
            body = read_state(found)
            # runs inline, and no mark: an earlier version wrote the state
            waiting = list(body.accounting)
            ledger = self.ledger if found == self.path else Ledger(found.parent, self.cluster)
            mark = body.ledger or ledger.adopted()
            if found != self.path:  # all of its runs are written here at the first change
                waiting = [*ledger.read(mark), *waiting]
                mark = Mark(generation=self.ledger.next_generation())
        except (OSError, ValueError) as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise LocalStateError(
                f"{found} is not a simulator state ({detail}); "
                "delete it to start the simulated cluster afresh (its jobs are lost), or "
                "restore it"
            ) from None
        sim = SimulatedCluster(
            body.state, next_id=body.next_id, accounting=waiting, open_since=body.open_since
        )
        return sim, body.clock, mark, found

    def _sync_nodes(self, sim: SimulatedCluster) -> None:
        """The spec's pools are the simulator's hardware: add new nodes; a node the spec no
        longer has leaves once no job of it is active. Until then it drains (takes no new
        work) and is reported in ``removedNodes``: the plan moves its work off it, with
        approval (an observation ends nothing; a declined apply changes nothing). A node
        the spec shrinks takes its new size at once; where its work holds more, the work
        runs on over it (no new work fits) and the node is reported in ``shrinkingNodes``
        until the plan has moved off what does not fit."""
        if self._spec_nodes is None:
            self._spec_nodes = {n.name: n for n in nodes_from_spec(self.spec)}
        wanted = self._spec_nodes
        have = {n.name: n for n in sim.state.nodes}
        used: Counter[str] = Counter()  # GPUs held per node
        busy: set[str] = set()  # nodes with an active job (CPU-only ones too)
        for job in sim.state.jobs:
            for r in job.replicas if job.state.active else ():
                if r.node:
                    used[r.node] += r.gpus if job.state.holds_gpus else 0
                    busy.add(r.node)
        was_leaving = set(sim.state.removed_nodes)  # back in the spec: it drains no more
        nodes: list[Node] = []
        for name, node in wanted.items():
            old = have.get(name)
            keep = old is not None and old.gpus == node.gpus and name not in was_leaving
            nodes.append(old if keep and old is not None else node.model_copy())
        leaving = sorted(name for name in have if name not in wanted and name in busy)
        nodes += [have[name].model_copy(update={"state": "drain"}) for name in leaving]
        sim.state.nodes = nodes
        sim.state.removed_nodes = leaving
        sim.state.shrinking_nodes = {
            name: node.gpus for name, node in wanted.items() if used[name] > node.gpus
        }

    def _save(self, sim: SimulatedCluster, mark: Mark) -> None:
        """The runs that ended first (counted only once the state says so), then the
        state; held for this adapter's next change."""
        now = self.clock()
        was = mark.generation
        mark = self.ledger.append(mark, sim.accounting, now)
        if mark.pruned_at is None or now - mark.pruned_at >= PRUNE_EVERY:
            mark = self.ledger.prune(mark, now - timedelta(days=ACCOUNTING_DAYS), now)
        body = StateFile(
            clock=now, next_id=sim.next_id, state=sim.state, ledger=mark, open_since=sim.open_since
        )
        written = write_state(self.path, body)
        sim.accounting = []
        self._drop_held()
        if mark.generation != was:  # the one before stays, for a reader that just read it
            self.ledger.drop_before(mark.generation - 1)
        self._held = _Held(written, sim, now, mark)

    def observe(self) -> ClusterState:
        """The cluster as of the clock; time passing (jobs ending, queued jobs starting)
        is written back unless the adapter is read-only."""
        if self.read_only:
            return self._load()[0].state
        with self._changing():
            sim, mark = self._load(held=True)
            self._save(sim, mark)
        self._drop_held()  # the state is the caller's now
        return sim.state

    @contextlib.contextmanager
    def change(self) -> Iterator[SimulatedCluster]:
        """A change from outside the plan (what befalls the cluster, injected by a test):
        the cluster as of the clock, saved when the block ends without an error."""
        with self._changing():
            sim, mark = self._load(held=True)
            yield sim
            self._save(sim, mark)
            self._drop_held()  # the caller may change it on

    def execute(self, action: Action, *, plan_id: str) -> ActionResult:
        if self.read_only:
            raise PermanentError(f"the simulator of {self.cluster} was opened read-only")
        with self._changing():
            sim, mark = self._load(held=True)
            result = sim.execute(action, plan_id=plan_id, now=self.clock())
            self._save(sim, mark)
        return result

    def runs(self, since: datetime, until: datetime) -> list[JobRun]:
        """The accounting of the simulated cluster (the Accounting capability)."""
        sim, mark = self._load()
        try:
            kept = self.ledger.read(mark, since)
        except (OSError, ValueError) as exc:
            raise LocalStateError(f"the accounting of {self.path} cannot be read ({exc})") from None
        return sim.runs(since, until, earlier=kept)

    def forecast(self, actions: Sequence[Action], *, now: datetime) -> list[datetime | None]:
        """Fan-out estimates: ``now`` for a submit that fits at once, else unknown (None)."""
        sim, _ = self._load()
        return [now if a.op == Op.SUBMIT and sim.fits_now(a) else None for a in actions]
