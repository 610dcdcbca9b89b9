"""Plans that are fixed points: run KAI cycles on a copy of the world until nothing changes.

One KAI cycle (allocate, consolidate, reclaim, preempt) is not always the end of the
story: the cycle after it may find a move that lets an elastic job grow, or place work on
GPUs a reclaim freed. KAI simply runs again a few seconds later; a reviewable plan should
instead say everything at once, so that applying it leaves nothing for the next plan.

So the reconciler plans a cycle, applies it to a *virtual* copy of the observed state with
the simulator's engine (pure, in memory), plans again, and so on until a cycle changes
nothing, or the time or round limit ends the rounds (the last round is carried out too).
The plan shown is the net difference between the observed state and the final virtual one:
a job started in round 1 and reclaimed in round 2 never appears; a job evicted and placed
again elsewhere is one ``move``. Each net action keeps the reason of the round that caused
it.

A round's actions are all the next round needs; what still waits, the quota table and the
plan's id are worked out only for the round whose plan is shown (a :class:`Round` finishes
its plan on demand): the first when it is the only one, else the last, with the solver
report and the GPUs held of the first. A busy org's other rounds would spend a good part
of their time on them. Jobs a round starts in the virtual world are tagged with the
round's number, not a plan id (none is worked out for it).

Fan-out candidates (submits the cluster places, ``submit.candidate`` set) stay PENDING in
the virtual world: which of them starts is the real cluster's decision, so the next round
sees them waiting, and each appears in the plan as it was submitted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from adapters.base import AdapterError
from adapters.simulator.engine import SimulatedCluster
from controlplane.plan import DISPLAY_RANK, Plan, SolverReport, execution_order, shrinks
from solvers.kai.handover import handed_on
from solvers.policy import Deadline
from solvers.reasons import room_as_ended
from specs.actions import Action, Op
from specs.snapshot import Job, JobState, Replica, Snapshot

MAX_ROUNDS = 8  # a guard against rounds that undo each other; the time limit is the budget
VIRTUAL = "virtual-"  # id prefix of jobs that exist only in the virtual world
# a round's jobs are submitted just after the plan's moment, as an apply submits them
# after it: in job order (which reads the submit time first) they are younger than all work
# waiting since the plan's observation, as they will be. They start at the plan's moment
# (minRuntime and walltimes count from it, as before)
AFTER_THE_PLAN = timedelta(microseconds=1)


@dataclass
class Round:
    """One cycle: its actions and solver report at once, its whole plan on demand."""

    actions: list[Action]
    finish: Callable[[], Plan]
    report: SolverReport
    # GPUs each project and department holds as the round begins, by name, on demand
    held_by_name: Callable[[], tuple[dict[str, float], dict[str, float]]]
    # waiting candidates the round held GPUs for: (cluster, job id) -> (node, GPUs)
    held: dict[tuple[str, str], list[tuple[str, int]]] = field(default_factory=dict)
    # jobs the round cancels that save a checkpoint first: (cluster, job id); the next
    # round sees them winding down, as the clusters will show them
    saving: set[tuple[str, str]] = field(default_factory=set)
    # each victim's first beneficiary (workload keys): a later round may take its place
    gave_to: dict[str, str] = field(default_factory=dict)


@dataclass
class Converged:
    first: Round  # the first cycle (its solver report is the plan's)
    last: Round  # the last cycle: what still waits, quotas after the plan
    actions: list[Action]  # the net actions
    rounds: int


def converge(
    cycle: Callable[[Snapshot], Round],
    observed: Snapshot,
    now: datetime,
    deadline: Deadline | None = None,
) -> Converged:
    """Cycles until one changes nothing. With a ``deadline``, no round starts after it has
    passed; rounds not run, or a fixed point not reached, are recorded there."""
    deadline = deadline or Deadline()
    deadline.round = 1
    first = latest = cycle(observed)
    if not first.actions:
        return Converged(first, first, [], 1)
    rounds = [first.actions]  # each round's actions; only the latest round is kept whole
    gave_to = dict(latest.gave_to)
    # a deep copy, by validating its dump: pydantic does that in its core, ~7x faster than
    # copy.deepcopy (0.18 -> 0.03 s at 1,000 nodes)
    world = Snapshot.model_validate(observed.model_dump())
    # every round's actions are carried out on the virtual world, the last one's too when
    # the round limit or the time limit ends the rounds: what a round decided is in the plan
    while True:
        if len(rounds) == 1 and deadline.expired:  # the first round's actions are the plan
            deadline.cut("converge", "the time limit ran out before the next round")
            break
        refused = _apply(world, latest, f"{VIRTUAL}round-{len(rounds)}", now)
        if refused is not None:  # keep what was reached, and say that a step may fail
            deadline.cut("converge", f"a copy of the clusters refused a step: {refused}")
            break
        if len(rounds) == 1:
            _start_where_held(world, latest.held)
        _regrow_at_home(world, observed, latest.actions)
        if len(rounds) == MAX_ROUNDS:
            deadline.cut("converge", f"no fixed point after {MAX_ROUNDS} rounds")
            break
        if deadline.expired:
            deadline.cut("converge", "the time limit ran out before the next round")
            break
        deadline.round = len(rounds) + 1
        latest = cycle(world)
        rounds.append(latest.actions)
        gave_to = {**latest.gave_to, **gave_to}  # the first round a victim lost in counts
        if not latest.actions:
            break
    if len(rounds) == 1 or (len(rounds) == 2 and not rounds[1]):
        return Converged(first, latest, first.actions, len(rounds))
    net = _handed_on(net_actions(observed, world, rounds), world, gave_to)
    return Converged(first, latest, _room_as_ended(net, observed), len(rounds))


def _handed_on(actions: list[Action], final: Snapshot, gave_to: dict[str, str]) -> list[Action]:
    """Evictions whose beneficiary a later round took the place of again (started in the
    virtual world, then evicted there): their reasons say who holds the place at the end."""
    active = {j.workload for c in final.clusters for j in c.jobs if j.state.active}
    placed = active.__contains__
    out = []
    for a in actions:
        if a.op in (Op.PREEMPT, Op.CANCEL) or shrinks(a):
            a = a.model_copy(update={"reason": handed_on(a.reason, a.workload, gave_to, placed)})
        out.append(a)
    return out


def _room_as_ended(actions: list[Action], observed: Snapshot) -> list[Action]:
    """What a start says of the work that made room for it, as the plan ends: a round's
    words ("X moves to make room") of a victim a later round evicted, placed again
    elsewhere or put back where it ran, are made true of the net actions."""
    running = {(c.name, j.id) for c in observed.clusters for j in c.jobs if j.state.holds_gpus}
    done: dict[str, list[Action]] = {}
    for a in actions:
        done.setdefault(a.workload, []).append(a)

    def fate(workload: str) -> str | None:
        """Moved, taken (its running job evicted, or shrunk), stays (nothing done to it),
        or None: something else, told as it was."""
        mine = done.get(workload, [])
        if not mine:
            return "stays"
        if any(a.op == Op.MOVE for a in mine):
            return "moved"
        evicted = (Op.PREEMPT, Op.CANCEL)
        if any(shrinks(a) or (a.op in evicted and (a.cluster, a.job) in running) for a in mine):
            return "taken"
        return None

    out = []
    for a in actions:
        if "make room" in a.reason.message or "makes room" in a.reason.message:
            told = room_as_ended(a.reason.message, fate, a.reason.code)
            if told != a.reason.message:
                a = a.model_copy(update={"reason": a.reason.model_copy(update={"message": told})})
        out.append(a)
    return out


def _apply(world: Snapshot, step: Round, plan_id: str, now: datetime) -> str | None:
    """Carry out a round's actions on the virtual world; why a step was refused, if one
    was (a plan whose steps do not fit the clusters: a defect, said in the plan)."""
    sims = {c.name: SimulatedCluster(c, id_prefix=VIRTUAL, schedule=False) for c in world.clusters}
    by_cluster: dict[str, list[Action]] = {}
    for action in execution_order(step.actions):  # clusters are independent: each in order
        if action.op == Op.CANCEL and (action.cluster, action.job or "") in step.saving:
            _winding_down(world, action)
            continue
        by_cluster.setdefault(action.cluster, []).append(action)
    before = {c.name: {j.id for j in c.jobs} for c in world.clusters}
    try:
        for cluster, actions in by_cluster.items():
            sims[cluster].execute_many(actions, plan_id=plan_id, now=now)
    except (AdapterError, KeyError) as err:
        return str(err)
    finally:  # the jobs it made are submitted after the plan (job order), started at it
        for state in world.clusters:
            for job in state.jobs:
                if job.id not in before[state.name]:
                    job.submitted_at = now + AFTER_THE_PLAN
    return None


def _winding_down(world: Snapshot, cancel: Action) -> None:
    """The cancelled job saves its checkpoint in its grace: it winds down, GPUs held."""
    for state in world.clusters:
        if state.name == cancel.cluster:
            for job in state.jobs:
                if job.id == cancel.job:
                    job.state = JobState.COMPLETING


def _start_where_held(world: Snapshot, held: dict[tuple[str, str], list[tuple[str, int]]]) -> None:
    """Name, on each waiting candidate of the virtual world, the nodes the first round held
    for it: the cluster starts it on the cluster as it is now, before anything this plan
    does, so every later round holds it there too (not where the virtual world, with the
    plan's own work on it, would fit it best). It stays waiting: only where is decided."""
    for state in world.clusters:
        for job in state.jobs:
            where = held.get((state.name, job.id))
            if where is not None and job.candidate is not None and not job.state.holds_gpus:
                job.replicas = [Replica(node=node, gpus=gpus) for node, gpus in where]


def _regrow_at_home(world: Snapshot, observed: Snapshot, actions: list[Action]) -> None:
    """Put the replicas a round grew back on the nodes the job ran on before the plan,
    where those still have room.

    A replica one round takes back (a limit, a reclaim) and a later round grows again
    lands where best fit puts it, which need not be where it ran: shown net, that is a
    move nobody asked for. Within a round the solver puts disturbed work back home; across
    rounds this does, and the next round checks the result like any other."""
    grown = {(a.cluster, a.job) for a in actions if a.op == Op.RESIZE and not shrinks(a)}
    if not grown:
        return
    before = {(c.name, j.id): j for c in observed.clusters for j in c.jobs if j.state.holds_gpus}
    for state in world.clusters:
        jobs = [
            j for j in state.jobs if (state.name, j.id) in grown and (state.name, j.id) in before
        ]
        if not jobs:
            continue
        nodes = {n.name: n for n in state.nodes}
        used = Counter(SimulatedCluster(state, schedule=False).used())
        for job in jobs:
            home = _shape(before[(state.name, job.id)])
            lost, new = home - _shape(job), _shape(job) - home
            for i, r in enumerate(job.replicas):
                here = (r.node or "", r.gpus)
                if not new[here]:
                    continue  # where it ran before
                back = next(
                    (
                        n
                        for (n, g), count in sorted(lost.items())
                        if g == r.gpus
                        and count > 0
                        and (node := nodes.get(n)) is not None
                        and node.schedulable
                        and node.pool == job.pool
                        and used[n] + g <= node.gpus
                    ),
                    None,
                )
                if back is None:
                    continue
                new[here] -= 1
                lost[(back, r.gpus)] -= 1
                used[here[0]] -= r.gpus
                used[back] += r.gpus
                job.replicas[i] = Replica(node=back, gpus=r.gpus)


def _shape(job: Job) -> Counter[tuple[str, int]]:
    return Counter((r.node or "", r.gpus) for r in job.replicas)


def net_actions(observed: Snapshot, final: Snapshot, rounds: list[list[Action]]) -> list[Action]:
    """The actions that take ``observed`` to ``final``, with the reasons the rounds gave, in
    reading order (the reconciler then orders the moves so each finds room)."""
    steps = [a for actions in rounds for a in actions]
    before = {(c.name, j.id): j for c in observed.clusters for j in c.jobs if j.state.active}
    after = {(c.name, j.id): j for c in final.clusters for j in c.jobs if j.state.active}
    by_job: dict[tuple[str, str], Action] = {}  # the first action that touched a real job
    evicted: dict[tuple[str, str], Action] = {}  # the first that took one away entirely
    shrinking: dict[tuple[str, str], Action] = {}  # the first that took replicas away
    for a in steps:
        if a.job is not None:
            by_job.setdefault((a.cluster, a.job), a)
            if a.op in (Op.PREEMPT, Op.CANCEL):
                evicted.setdefault((a.cluster, a.job), a)
            if shrinks(a):
                shrinking.setdefault((a.cluster, a.job), a)
    # the latest submit of each workload (and fan-out candidate)
    submits = {
        (a.workload, a.submit.candidate if a.submit else None): a
        for a in steps
        if a.op == Op.SUBMIT
    }

    out: list[Action] = []
    new = {k: j for k, j in after.items() if k not in before}
    # jobs new in the final world, per (workload, cluster), by job key: an evicted job's
    # successor is the first of them not yet taken. A fan-out candidate is none: the
    # cluster places it, so nothing could move the evicted job onto it
    successors: dict[tuple[str | None, str], list[tuple[str, str]]] = {}
    for k in sorted(new):
        if new[k].candidate is None:
            successors.setdefault((new[k].workload, k[0]), []).append(k)
    replaced: set[tuple[str, str]] = set()
    for key, job in sorted(before.items()):
        cluster, job_id = key
        if key in after:
            winding = (
                after[key].state is JobState.COMPLETING and job.state is not JobState.COMPLETING
            )
            if key in evicted and winding:  # cancelled to save first: it holds its GPUs
                out.append(evicted[key])  # while it winds down, but it is cancelled
                continue
            # a waiting candidate's nodes are where the cluster will start it, not a change
            # (a running one, the winner of its round, is moved like any job)
            placed_by_cluster = job.candidate is not None and not job.state.holds_gpus
            if not placed_by_cluster and _shape(after[key]) != _shape(job):
                reason = by_job[key].reason
                grown = _shape(after[key]) - _shape(job)
                shrunk = _shape(job) - _shape(after[key])
                op = Op.RESIZE if not (grown and shrunk) else Op.MOVE
                if not grown:  # a net shrink: the reason of the round that took replicas away
                    reason = shrinking.get(key, by_job[key]).reason
                out.append(
                    Action(
                        op=op,
                        workload=job.workload or "",
                        cluster=cluster,
                        pool=after[key].pool or job.pool,
                        job=job_id,
                        replicas=after[key].replicas,
                        reason=reason,
                        shrink=op is Op.RESIZE and not grown,
                    )
                )
            continue
        first = by_job.get(key)
        if first is None:
            continue
        if key in evicted and first.op not in (Op.PREEMPT, Op.CANCEL):
            first = evicted[key]  # shrunk in one round, evicted in a later one: it is gone
        successor = next(
            (k for k in successors.get((job.workload, cluster), []) if k not in replaced), None
        )
        if successor is not None and job.state.holds_gpus and first.op == Op.PREEMPT:
            replaced.add(successor)  # evicted, then placed again: one move
            if _shape(new[successor]) == _shape(job):
                continue  # back on the very GPUs it ran on: a restart for nothing
            out.append(
                Action(
                    op=Op.MOVE,
                    workload=job.workload or "",
                    cluster=cluster,
                    pool=new[successor].pool,
                    job=job_id,
                    replicas=new[successor].replicas,
                    reason=first.reason,
                    submit=(s.submit if (s := submits.get((job.workload or "", None))) else None),
                )
            )
        else:
            out.append(first)
    for key, job in sorted(new.items()):
        submit = submits.get((job.workload or "", job.candidate))
        if key in replaced or submit is None:
            continue
        if job.candidate is not None:  # the cluster places it: as submitted
            out.append(submit)
            continue
        out.append(submit.model_copy(update={"replicas": job.replicas, "pool": job.pool}))
    out.sort(key=lambda a: (DISPLAY_RANK[a.op], a.workload, a.cluster, a.job or ""))
    return out
