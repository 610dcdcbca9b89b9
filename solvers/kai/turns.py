"""The order in which a simulation's jobs take their turns, without popping the rest.

A simulation (solvers/kai/victims.py) evicts some victims, then allocates the waiting job
and the victims in KAI's allocation order, with every other waiting job taking its turn
(it is not placed: it only delays queues). That order is a walk down the queue tree: at
each level the child whose key (solvers/order.py ``queue_order``) is smallest for the
next job of its subtree goes first, and the keys are evaluated afresh after every pick.

Between two placements nothing is allocated, so every key is fixed, and a queue's key
only grows with the GPUs its next job asks for. For such a merge the order is known in
closed form: a job comes out at the *largest* key of any job before it in its stream
(the running maximum, or *record*), and the streams interleave by those records. So a
subtree's output is a short list of *runs*, each opened by a record; a parent merges its
children's runs by the children's keys and takes the running maximum again. The runs of
a project's waiting jobs come from its lane (solvers/kai/waiting.py); subtrees holding
none of the simulated jobs keep the same runs in every simulation of a step
(:class:`StaticRuns`); only the queues above the simulated jobs are merged each turn.
The first simulated job in the merged order takes the next turn; every run before it is
taken (skipped) with it. After a placement the allocation changes, and the merge starts
again from where each stream stands.

This gives exactly the order the allocate loop would (solvers/kai/allocate.py
``Allocator.pop_next``), at the cost of a few runs per queue instead of one pop per
waiting job. Keys of sibling queues never tie (the creation rank is their last part).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from operator import itemgetter

from solvers.kai.waiting import WaitingIndex
from solvers.order import JobKey, QueueKey, queue_order
from solvers.session import Session

# an item of a merged stream: ("lane", queue, end position, first simulated job or "")
# for a run of a lane, ("static", queue, index, "") for a run of an untouched subtree
Atom = tuple[str, str, int, str]
Run = tuple[int, Atom]  # (record GPUs, atom)
Keyed = tuple[QueueKey, int, Atom]  # a run as its parent merges it: (key there, record, atom)
_key = itemgetter(0)


def queue_key(session: Session, qid: str, request: int) -> QueueKey:
    q = session.problem.queues[qid]
    return queue_order(
        q,
        allocated=session.alloc[qid],
        request=request,
        share=session.allocatable_share(q),
        rank=session.problem.order[qid],
    )


class StaticRuns:
    """The runs of every subtree as the step's session stands (no simulated job inside,
    allocations as committed), each run with its key at the subtree's root. A commit
    changes the allocations and lanes of its projects only: ``forget`` drops what was
    worked out along their chains, the rest stays."""

    def __init__(self, session: Session, index: WaitingIndex) -> None:
        self.s = session
        self.index = index
        self._runs: dict[str, list[tuple[int, QueueKey]]] = {}
        self._keyed: dict[str, list[Keyed]] = {}

    def forget(self, projects: Iterable[str]) -> None:
        """The allocations or waiting jobs of ``projects`` changed."""
        for qid in projects:
            for q in self.s.chain(qid):
                self._runs.pop(q.id, None)
                self._keyed.pop(q.id, None)

    def keyed(self, qid: str) -> list[Keyed]:
        """The subtree's runs as its parent merges them: key, record, atom."""
        if qid not in self._keyed:
            self._keyed[qid] = [
                (key, rec, ("static", qid, i, "")) for i, (rec, key) in enumerate(self.runs(qid))
            ]
        return self._keyed[qid]

    def runs(self, qid: str) -> list[tuple[int, QueueKey]]:
        """(record GPUs, key of ``qid`` asking that much) for each run of the subtree."""
        if qid in self._runs:
            return self._runs[qid]
        q = self.s.problem.queues[qid]
        if q.kind == "project":
            lane = self.index.lane(qid)
            records = lane.records() if lane is not None else []
        else:
            merged: list[tuple[QueueKey, int]] = []
            for child in q.children:
                merged += [(key, rec) for rec, key in self.runs(child)]
            merged.sort(key=itemgetter(0))  # stable: a child's own runs keep their order
            records, top = [], -1
            for _, rec in merged:
                if rec > top:
                    records.append(rec)
                    top = rec
        out = [(rec, queue_key(self.s, qid, rec)) for rec in records]
        self._runs[qid] = out
        return out


class Turns:
    """The simulated jobs (``todo``: name -> (job order key, GPUs asked)) in turn order."""

    def __init__(
        self,
        session: Session,
        index: WaitingIndex,
        static: StaticRuns,
        todo: dict[str, tuple[JobKey, int]],
    ) -> None:
        self.s = session
        self.index = index
        self.static = static
        jobs = session.problem.jobs
        self.lanes: dict[str, list[tuple[JobKey, str, int]]] = {}  # queue -> its todo
        self.dirty: set[str] = set()  # queues above a simulated job: merged every turn
        self.skip: dict[str, set[int]] = {}  # lane positions of the simulated jobs
        for name, (key, req) in todo.items():
            qid = jobs[name].queue
            self.lanes.setdefault(qid, []).append((key, name, req))
            self.dirty.update(q.id for q in session.chain(qid))
            lane = index.lane(qid)
            if lane is not None and name in lane.position:
                self.skip.setdefault(qid, set()).add(lane.position[name])
        for todo_here in self.lanes.values():
            todo_here.sort()
        self.head: dict[str, int] = {}  # lane -> first position not yet taken
        self.cut: dict[str, int] = {}  # untouched subtree -> runs already taken

    def next(self) -> str | None:
        """The simulated job whose turn comes next (None when all had theirs)."""
        live = [q for q, todo in self.lanes.items() if todo]
        if not live:
            return None
        if len(live) == 1:  # one stream left: its own job order decides
            return self._take(live[0])
        streams = [self._keyed(top) for top in self.s.problem.top if top in self.dirty]
        for _, _, (kind, qid, mark, first) in _merged(streams):
            if first:  # a lane's runs come in order: its first simulated job is this one
                assert self.lanes[qid][0][1] == first
                return self._take(qid)
            if kind == "lane":
                self.head[qid] = mark
            else:
                self.cut[qid] = mark + 1
        raise AssertionError("a simulated job is missing from the merged order")

    def _take(self, qid: str) -> str:
        key, name, _ = self.lanes[qid].pop(0)
        lane = self.index.lane(qid)
        if lane is not None:
            self.head[qid] = max(self.head.get(qid, 0), lane.at(key))
        return name

    def _keyed(self, qid: str) -> list[Keyed]:
        """A dirty subtree's runs with their keys at its root, as its parent merges them."""
        s = self.s
        keys: dict[int, QueueKey] = {}  # runs after a large record share its key
        out: list[Keyed] = []
        for rec, atom in self._emit(qid):
            key = keys.get(rec)
            if key is None:
                key = keys[rec] = queue_key(s, qid, rec)
            out.append((key, rec, atom))
        return out

    def _emit(self, qid: str) -> list[Run]:
        """The runs of a subtree holding simulated jobs, from where its streams stand, up to
        the first run with a simulated job (nothing after it can come first)."""
        q = self.s.problem.queues[qid]
        if q.kind == "project":
            return list(self._lane_runs(qid))
        streams: list[list[Keyed]] = []
        for child in q.children:
            if child in self.dirty:
                streams.append(self._keyed(child))
            else:
                streams.append(self.static.keyed(child)[self.cut.get(child, 0) :])
        out: list[Run] = []
        top = -1
        for _, rec, atom in _merged(streams):
            top = max(top, rec)
            out.append((top, atom))
        return out

    def _lane_runs(self, qid: str) -> Iterator[Run]:
        """A lane's runs from its head, the queue's simulated jobs in their places, up to the
        run of the first of them."""
        lane = self.index.lane(qid)
        todo = self.lanes.get(qid, [])
        skip = self.skip.get(qid, set())
        pos = self.head.get(qid, 0)
        record, start = -1, -1  # the open run: its record and where it starts
        at = None  # where the first simulated job stands (lane entries before it: at, not after)
        if todo:
            at = lane.at(todo[0][0]) if lane is not None else 0
        while True:
            nxt = lane.next_record(pos, record, skip) if lane is not None else None
            if at is not None and (nxt is None or at <= nxt):
                _, name, req = todo[0]
                if req > record:  # it opens a run of its own
                    if start >= 0:
                        yield record, ("lane", qid, at, "")
                    record = req
                yield record, ("lane", qid, at, name)
                return
            if nxt is None:
                if start >= 0:
                    assert lane is not None
                    yield record, ("lane", qid, len(lane.keys), "")
                return
            assert lane is not None
            if start >= 0:
                yield record, ("lane", qid, nxt, "")
            record, start, pos = lane.reqs[nxt], nxt, nxt + 1


def _merged(streams: list[list[Keyed]]) -> list[Keyed]:
    """Sorted streams merged by key, up to and with the first run of a simulated job. Keys
    of two streams never tie (sibling queues), and a stable sort keeps each stream's own
    order: a merge of a few short lists, not a heap of generators."""
    items = [item for stream in streams for item in stream]
    items.sort(key=_key)
    for i, item in enumerate(items):
        if item[2][3]:
            return items[: i + 1]
    return items
