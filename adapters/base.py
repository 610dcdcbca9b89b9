"""The one small boundary every cluster adapter implements: ``observe`` and ``execute``.

Exception tree (what the CLI catches and records per action)::

    AdapterError            something outside the project went wrong
    ├── TemporaryError      a retry may help (controller down, timeout); ``delay`` hints when
    └── PermanentError      retrying the same call cannot help (rejected request, bad spec)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from specs.actions import Action
from specs.snapshot import ClusterState, JobRun

# how apply records a failure that a rerun may get past (a cluster that did not answer)
TEMPORARY = " (temporary: rerun `cp apply` to continue)"


class AdapterError(Exception):
    retryable = False


class TemporaryError(AdapterError):
    retryable = True

    def __init__(self, message: str, delay: float = 5.0) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(AdapterError):
    retryable = False


class LocalStateError(PermanentError):
    """The adapter's own state on this machine is unusable (a broken simulator state file):
    not a cluster that does not answer, but a file someone must repair or remove."""


class ActionResult(BaseModel):
    ok: bool
    job: str | None = None  # the cluster's job id the action created or touched
    message: str = ""


@runtime_checkable
class Accounting(Protocol):
    """An adapter that remembers ended jobs: the runs of our jobs that overlapped
    ``[since, until]``, including those that started and ended between two observations
    (Slurm: ``sacct``; the simulator: its job records). Without it, runs are read off
    the jobs an observation shows."""

    def runs(self, since: datetime, until: datetime) -> list[JobRun]: ...


@runtime_checkable
class Adapter(Protocol):
    """One cluster. ``observe`` reports it; ``execute`` carries out one plan action.

    ``execute`` tags every job it creates with the workload identity and ``plan_id``, so the
    control plane recognises its own jobs after a crash; it never touches a job whose
    ``workload`` is null (not ours).
    """

    cluster: str

    def observe(self) -> ClusterState: ...

    def execute(self, action: Action, *, plan_id: str) -> ActionResult: ...


@runtime_checkable
class Preflight(Protocol):
    """An adapter that can tell, before anything is done, that it could not carry out some
    of a plan's actions (Kubernetes: the rights each needs in its namespace). ``preflight``
    raises an AdapterError naming what is missing; apply then does nothing on that cluster
    rather than evict work for a submit that would be refused."""

    def preflight(self, actions: Sequence[Action]) -> None: ...
