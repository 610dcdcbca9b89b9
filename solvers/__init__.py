"""Pure scheduling: from desired state, observed state, policy and time to an allocation.

The cycle, as KAI-Scheduler runs it (allocate, consolidate, reclaim, preempt), over one
session; the reconciler (controlplane/reconcile.py) narrates it step by step.

Shared by every step (this package's top level):

- :mod:`~solvers.problem` — specs and snapshot joined into plain records (``records``):
  queues, pools, nodes, one :class:`~solvers.problem.JobRequest` per workload; the spec
  part cached by digest (``specpart``: :class:`~solvers.problem.ProblemCache`);
- :mod:`~solvers.session` — the scratch state of one pass (free GPUs, allocation per
  queue, fair shares), the statement that applies and rolls back trial moves, grants;
- :mod:`~solvers.fairshare` — KAI's fair-share division over the queue tree;
- :mod:`~solvers.placement` — GPU bin-packing (fewest free GPUs first);
- :mod:`~solvers.segments` — where a checkpoint-segmented workload stands;
- :mod:`~solvers.reasons` — the words of every reason a plan gives, a module per kind;
- :mod:`~solvers.drift` — running work whose spec was edited: in place, fewer replicas,
  or replaced;
- :mod:`~solvers.policy` — site-wide knobs (seed, time limit, engine, victim search) and
  the plan's time budget (:class:`~solvers.policy.Deadline`);
- :mod:`~solvers.allocation` — the allocate step with both engines, the better kept.

One subpackage per concern:

- :mod:`solvers.kai` — the cycle's actions (allocate, consolidate, reclaim, preempt)
  and the victim search they share, with the indexes that keep it cheap at scale;
- :mod:`solvers.cpsat` — the OR-Tools CP-SAT allocation model, its LP bound and score;
- :mod:`solvers.fanout` — rv-style candidate submissions, the first to run wins;
- :mod:`solvers.sitepolicy` — Slurm site policy: decayed usage, budgets, retry backoff.
"""
