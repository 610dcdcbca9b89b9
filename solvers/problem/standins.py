"""The GPU type of a stand-in, for per-GPU-type limits.

A workload held for a cluster that did not answer runs there as a stand-in on a node of
its own (controlplane/unreachable.py): on no pool, so of no GPU type. Its job, if it has
one, is in a pool the workload may use on a cluster that did not answer (it has none on a
cluster that did). Where all those pools have one GPU type, that is the type it holds, and
a limit on the type counts it, so nothing new of that type starts in its place
(solvers/session.py). Where they have several, which one it holds nobody can say: it is
charged to none, as before (the limit on a queue's total still counts it). Charging it to
each would close every one of those types for the GPUs of one job, and a per-type limit
held back that way is no safer than the total limit that already counts it.
"""

from __future__ import annotations

from solvers.problem.records import Problem


def stand_in_types(problem: Problem) -> dict[str, str]:
    """The stand-ins whose GPU type is known: workload -> that type."""
    # a cluster that answered reported nodes in its pools; one that did not, only the
    # stand-ins' nodes, which are in none (an answering cluster without such nodes only
    # widens the choice, and so charges less: as before)
    answered = {n.cluster for n in problem.nodes.values() if n.pool is not None}
    out = {}
    for key in sorted(problem.stand_ins & problem.jobs.keys()):
        job = problem.jobs[key]
        types = {problem.pools[p].gpu_type for p in job.pools if p[0] not in answered}
        if len(types) == 1:
            out[key] = types.pop()
    return out
