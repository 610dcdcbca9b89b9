"""A Slurm cluster with accounting (slurmdbd): usage read from ``sacct``.

Set ``slurm: {accounting: true}`` on the Cluster spec when the site runs slurmdbd. The
adapter then has the Accounting capability (adapters/base.py): the runs of our jobs in a
time window, jobs that started and ended between two observations included
(adapters/slurm/accounting.py reads them). Without it, usage is read off the jobs each
observation shows, which misses a job Slurm forgot before anyone looked.
"""

from __future__ import annotations

from datetime import datetime

from adapters.slurm.accounting import ENV, parse_sacct, runs_of, sacct_argv
from adapters.slurm.adapter import SlurmAdapter
from adapters.slurm.tags import parse_tag
from specs.snapshot import JobRun


class AccountedSlurmAdapter(SlurmAdapter):
    def runs(self, since: datetime, until: datetime) -> list[JobRun]:
        """Every run of our jobs that overlapped ``[since, until]`` (sacct, and squeue for
        the tags of jobs still running: accounting stores a comment when a job ends)."""
        done = self._check(sacct_argv(since, until), env=ENV)
        running = {row.job_id: tag for row in self._queue() if (tag := parse_tag(row.comment))}
        return runs_of(parse_sacct(done.stdout), running)
