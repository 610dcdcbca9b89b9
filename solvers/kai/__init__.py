"""KAI-Scheduler's cycle, one module per action, and the victim search they share.

:mod:`~solvers.kai.allocate` (place pending work in queue and job order),
:mod:`~solvers.kai.consolidate` (move running work so a gang finds whole nodes),
:mod:`~solvers.kai.reclaim` (take GPUs back from queues above their fair share),
:mod:`~solvers.kai.preempt` (evict lower-priority work inside a project);
:mod:`~solvers.kai.disruption` is the loop the last three share and the ledger of what
they did, :mod:`~solvers.kai.victims` KAI's job solver (candidate sets, verification by
simulation). What keeps that search cheap at thousands of nodes, without changing an
answer: :mod:`~solvers.kai.candidates` (running work indexed per project and pool, in
victim order), :mod:`~solvers.kai.waiting` (waiting jobs in lanes per project) and
:mod:`~solvers.kai.turns` (a simulation's turn order from each queue's runs).
:mod:`~solvers.kai.exhaustive` keeps the search as first written, for comparison.
"""
