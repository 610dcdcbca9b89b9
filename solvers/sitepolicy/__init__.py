"""Slurm site policy layered on KAI's semantics: what may start at all, and how past use
bends the over-quota split.

:mod:`~solvers.sitepolicy.usage` (decayed usage for time-based fairshare),
:mod:`~solvers.sitepolicy.budgets` (monthly GPU-hour and cost budgets),
:mod:`~solvers.sitepolicy.backoff` (retry backoff for failed jobs).
"""
