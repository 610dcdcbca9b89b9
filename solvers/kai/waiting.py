"""The waiting jobs of a disruptive step, per project in job order, as staircases.

A simulation (solvers/kai/victims.py) allocates its jobs in KAI's normal order, and the
other waiting jobs take their turns there too: they are never placed, but a queue whose
next job is large comes later. Popping every waiting job in every simulation made a plan
at 1,000 nodes cost minutes. What those turns decide is captured by far less: a
project's key in queue order grows with the GPUs its next job asks for, so in the
allocation order a queue's jobs come out in *runs*, each run opened by a job asking more
than every job before it (a *record*). A queue with thousands of waiting jobs has a
handful of records, whichever job the run starts from. :class:`Lane` keeps one
project's waiting jobs in job order and finds the next record after any position in
logarithmic time; solvers/kai/turns.py merges the lanes up the queue tree.

Built at rest by a step's first simulation, or taken over from the step before it (which
kept it up to date); a job a step places, or a victim it evicts, leaves its lane
(``kill``), and a victim moved onto fewer nodes takes its new place (``update``). Pure
scratch state of one plan.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from solvers.kai.allocate import next_chunk
from solvers.order import JobKey, job_order
from solvers.session import Session


class Lane:
    """One project's waiting jobs in job order, with the GPUs each asks for next."""

    def __init__(self, entries: list[tuple[JobKey, str, int]]) -> None:
        entries.sort()
        self.keys = [k for k, _, _ in entries]
        self.names = [n for _, n, _ in entries]
        self.reqs = [r for _, _, r in entries]
        self.position = {n: i for i, n in enumerate(self.names)}
        self.dead: set[int] = set()
        # for each GPU count asked, the positions of the jobs asking more (sorted); the
        # threshold below every count (-1) lists every position
        self.sizes = sorted(set(self.reqs))
        self.above: dict[int, list[int]] = {-1: list(range(len(self.reqs)))}
        for size in self.sizes:
            self.above[size] = [i for i, r in enumerate(self.reqs) if r > size]

    def __len__(self) -> int:
        return len(self.keys) - len(self.dead)

    def at(self, key: JobKey) -> int:
        """Where a job with order ``key`` stands: how many lane entries come before it."""
        return bisect_left(self.keys, key)

    def next_record(self, start: int, record: int, skip: set[int]) -> int | None:
        """The first live position >= ``start`` (not in ``skip``) asking more than ``record``."""
        i = bisect_left(self.sizes, record + 1) - 1  # the largest count <= record
        positions = self.above[self.sizes[i]] if i >= 0 else self.above[-1]
        j = bisect_left(positions, start)
        while j < len(positions):
            p = positions[j]
            if p not in self.dead and p not in skip:
                return p
            j += 1
        return None

    def records(self) -> list[int]:
        """The GPUs of each record from the start, no job left out."""
        out: list[int] = []
        pos = self.next_record(0, -1, set())
        while pos is not None:
            out.append(self.reqs[pos])
            pos = self.next_record(pos + 1, out[-1], set())
        return out

    def live(self) -> list[tuple[JobKey, str, int]]:
        """The entries still in the lane, in order."""
        return [
            (self.keys[i], self.names[i], self.reqs[i])
            for i in range(len(self.keys))
            if i not in self.dead
        ]

    def kill(self, name: str) -> bool:
        """The job leaves the lane (placed by the step, or evicted); False if not in it."""
        pos = self.position.get(name)
        if pos is None or pos in self.dead:
            return False
        self.dead.add(pos)
        return True


class WaitingIndex:
    """Every waiting job of a step in lanes by project (the simulations' other jobs)."""

    def __init__(self, session: Session, keys: Iterable[str]) -> None:
        self.s = session
        jobs = session.problem.jobs
        entries: dict[str, list[tuple[JobKey, str, int]]] = {}
        for key in keys:
            entries.setdefault(jobs[key].queue, []).append(self._entry(key))
        self.lanes = {q: Lane(e) for q, e in entries.items()}
        self.members = {n for lane in self.lanes.values() for n in lane.names}

    def _entry(self, key: str) -> tuple[JobKey, str, int]:
        """A waiting job's place in its lane and the GPUs it asks next, as it holds now."""
        job = self.s.problem.jobs[key]
        placed = len(self.s.tasks.get(key, []))
        return job_order(job, placed), key, next_chunk(job, placed) * job.gpus

    def lane(self, queue: str) -> Lane | None:
        return self.lanes.get(queue)

    def remove(self, keys: Iterable[str]) -> None:
        jobs = self.s.problem.jobs
        for key in keys:
            if key in self.members:
                self.members.discard(key)
                lane = self.lanes[jobs[key].queue]
                lane.kill(key)
                if len(lane.dead) * 2 > len(lane.keys):  # mostly dead: rebuild it smaller
                    self.lanes[jobs[key].queue] = Lane(lane.live())

    def update(self, keys: Iterable[str]) -> None:
        """Jobs still waiting whose replicas changed (a victim moved onto fewer nodes): each
        takes its place again, in a lane rebuilt around it."""
        jobs = self.s.problem.jobs
        for key in keys:
            if key not in self.members:
                continue
            lane = self.lanes[jobs[key].queue]
            at = lane.position[key]
            entry = self._entry(key)
            if entry != (lane.keys[at], key, lane.reqs[at]):
                lane.kill(key)
                self.lanes[jobs[key].queue] = Lane([*lane.live(), entry])
