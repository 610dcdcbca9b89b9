"""The file-backed simulator adapter: the engine's state kept as JSON under ``.cp/``.

:class:`SimulatorAdapter` persists a :class:`~adapters.simulator.engine.SimulatedCluster`
in ``STATE_DIR/simulator/<cluster>.json`` so that ``cp apply`` followed by ``cp plan``
shows the world moved on (``STATE_DIR``: the spec repo's ``.cp/``, or the folder of a
store kept elsewhere; a state kept in an ``earlier`` folder is carried on from there).
The spec's node pools are its hardware. As a forecaster (fan-out) it says "now" for a
request that fits at once and "unknown" otherwise.

The file is the simulated cluster's only truth, so it is handled as a real one would be:
every change is a read-modify-write under an exclusive lock (two applies cannot lose each
other's jobs), written to a unique temporary file and renamed over the old one (a crash
leaves the old state or the new, never half of one), and a file that is not a valid state
is an error naming it, never silently replaced. A read-only adapter (``cp plan``, a
what-if at any ``--now``) computes where the clock has taken the cluster but writes
nothing back; one that writes refuses a clock earlier than the state's (``--now`` going
backwards would run ended jobs again).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from adapters.base import ActionResult, LocalStateError, PermanentError
from adapters.simulator.engine import SimulatedCluster, nodes_from_spec
from specs.actions import Action, Op
from specs.models import Cluster
from specs.snapshot import ClusterState, JobRun, Node

ACCOUNTING_DAYS = 400  # ended runs kept: a year of budgets and fairshare, and then some


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

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """Exclusive for a read-modify-write. Readers take no lock: a state file is always
        whole (written aside, then renamed), and a read sees the old state or the new."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def _load(self) -> SimulatedCluster:
        fresh = SimulatedCluster(ClusterState(name=self.cluster))
        found = next((p for p in (self.path, self.earlier) if p and p.exists()), None)
        sim, clock = self._read(found) if found else (fresh, None)
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
        return sim

    def _read(self, path: Path) -> tuple[SimulatedCluster, datetime | None]:
        """The state, and the clock it was written at (None: a file from before it was kept)."""
        try:
            raw = json.loads(path.read_text())
            state = ClusterState.model_validate(raw["state"])
            next_id = int(raw["nextId"])
            accounting = [JobRun.model_validate(r) for r in raw.get("accounting", [])]
            open_since = {k: datetime.fromisoformat(v) for k, v in raw.get("openSince", {}).items()}
            clock = datetime.fromisoformat(raw["clock"]) if "clock" in raw else None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise LocalStateError(
                f"{path} is not a simulator state ({detail}); delete it to start the "
                "simulated cluster afresh (its jobs are lost), or restore it"
            ) from None
        return (
            SimulatedCluster(state, next_id=next_id, accounting=accounting, open_since=open_since),
            clock,
        )

    def _sync_nodes(self, sim: SimulatedCluster) -> None:
        """The spec's pools are the simulator's hardware: add new nodes; a node the spec no
        longer has leaves once no job of it is active. Until then it drains (takes no new
        work) and is reported in ``removedNodes``: the plan moves its work off it, with
        approval (an observation ends nothing; a declined apply changes nothing). A node
        the spec shrinks takes its new size at once; where its work holds more, the work
        runs on over it (no new work fits) and the node is reported in ``shrinkingNodes``
        until the plan has moved off what does not fit."""
        wanted = {n.name: n for n in nodes_from_spec(self.spec)}
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
            nodes.append(old if keep and old is not None else node)
        leaving = sorted(name for name in have if name not in wanted and name in busy)
        nodes += [have[name].model_copy(update={"state": "drain"}) for name in leaving]
        sim.state.nodes = nodes
        sim.state.removed_nodes = leaving
        sim.state.shrinking_nodes = {
            name: node.gpus for name, node in wanted.items() if used[name] > node.gpus
        }

    def _save(self, sim: SimulatedCluster) -> None:
        horizon = self.clock() - timedelta(days=ACCOUNTING_DAYS)
        kept = [r for r in sim.accounting if r.ended_at is None or r.ended_at >= horizon]
        body = {
            "clock": self.clock().isoformat(),  # where time stands: it only moves on
            "nextId": sim.next_id,
            "state": sim.state.model_dump(mode="json", by_alias=True),
            "accounting": [r.model_dump(mode="json", by_alias=True) for r in kept],
            "openSince": {k: v.isoformat() for k, v in sim.open_since.items()},
        }
        fd, tmp = tempfile.mkstemp(
            dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"
        )
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(body, indent=1))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)  # atomic: a crash leaves the old or the new state
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def observe(self) -> ClusterState:
        """The cluster as of the clock; time passing (jobs ending, queued jobs starting)
        is written back unless the adapter is read-only."""
        if self.read_only:
            return self._load().state
        with self._changing():
            sim = self._load()
            self._save(sim)
        return sim.state

    def execute(self, action: Action, *, plan_id: str) -> ActionResult:
        if self.read_only:
            raise PermanentError(f"the simulator of {self.cluster} was opened read-only")
        with self._changing():
            sim = self._load()
            result = sim.execute(action, plan_id=plan_id, now=self.clock())
            self._save(sim)
        return result

    def runs(self, since: datetime, until: datetime) -> list[JobRun]:
        """The accounting of the simulated cluster (the Accounting capability)."""
        return self._load().runs(since, until)

    def forecast(self, actions: Sequence[Action], *, now: datetime) -> list[datetime | None]:
        """Fan-out estimates: ``now`` for a submit that fits at once, else unknown (None)."""
        sim = self._load()
        return [now if a.op == Op.SUBMIT and sim.fits_now(a) else None for a in actions]
