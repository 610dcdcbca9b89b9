"""SlurmAdapter: observe a Slurm cluster and carry out plan actions with sbatch/scancel/scontrol.

How each action maps onto Slurm (and why):

``submit``
    Write a batch script into the work dir and ``sbatch --parsable`` it with the plan's
    partition, GRES per node, node list, walltime, checkpoint signal and account. The
    job carries our tag (workload + plan id) in ``--comment``. Idempotent: if an active
    job with the same workload and plan id exists, it is returned and nothing is
    submitted, so a retried apply (or one that crashed after sbatch) never doubles a job
    (idempotency.py: one queue read per plan, not one per submission). A
    fan-out plan submits one job per candidate of a workload; the candidate's name is in
    the tag, and idempotency is per (workload, candidate). A checkpoint segment gets the
    ``timeout`` wrapper script (script.py), a backfill candidate ``--time-min``.
``preempt``
    The job is *checkpointable* when its own tag says so (it was submitted with a
    checkpoint signal: ``ckpt=`` in the comment) or the action's submit details name a
    checkpoint signal. Checkpointable → its time limit is brought in so that Slurm sends
    the checkpoint signal now and ends the job once its grace has passed, and its tag
    says ``evicted`` (eviction.py); a checkpoint segment, whose ``timeout`` wrapper keeps
    its own clock, gets the signal through its batch shell (``scancel --batch``), and only
    one whose script predates that is requeued (``scontrol requeue``). A job that is
    still pending is left alone, it holds no GPUs. Otherwise → ``scancel``:
    ``--requeue`` alone only means "may restart", and restarting from scratch would just
    race the plan's winner for the GPUs it was evicted from; the reconciler resubmits it
    when it fits again.
``cancel``
    ``scancel``; a running checkpointable job is first given its signal and grace as a
    preempted one is, a segment by signalling its batch shell (``scancel --batch``),
    which passes the signal on to its ``timeout`` wrapper.
``move`` / ``resize``
    Slurm cannot move a running job or grow it (an elastic one shrinks in place,
    shrink.py). Both are *submit the new shape, then cancel the old job*: the new job
    (new id, tagged with this plan) pends until the old job's GPUs are free, and if the
    submission is rejected the old job is still running. The old job ends as a cancelled
    one does (a checkpointable one saves first), and the new one resumes from it. Without
    submit details in the action, partition, GPUs, walltime, account and checkpoint come
    from the old job and the command from its batch script.

Every action that touches an existing job first reads it back from Slurm: a job that
has already gone counts as done; a job without our tag, or tagged for another workload,
is refused with PermanentError.

Errors: controller unreachable, timeouts, ssh failures → TemporaryError; rejections
(invalid partition, "Requested node configuration is not available", bad options) →
PermanentError with Slurm's message.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from adapters.base import ActionResult, AdapterError, PermanentError
from adapters.slurm import parse
from adapters.slurm.errors import classify, is_gone
from adapters.slurm.eviction import requeue, wind_down
from adapters.slurm.forecast import (
    StartForecast,
    backfill_fits,
    parse_reservations,
    parse_test_only,
)
from adapters.slurm.idempotency import PlanIndex
from adapters.slurm.observation import build_job, cluster_state
from adapters.slurm.parse import QueueRow
from adapters.slurm.request import build_request, request_of_job
from adapters.slurm.reservations import COMMAND as RESERVATIONS
from adapters.slurm.reservations import parse_reservations as parse_windows
from adapters.slurm.script import BatchRequest, render_script, sbatch_options
from adapters.slurm.shrink import shrink
from adapters.slurm.tags import Tag, job_name, parse_tag
from adapters.slurm.transport import Completed, LocalTransport, SSHTransport, Transport
from specs.actions import NEVER, Action, Never, Op
from specs.models import Cluster, NodePool
from specs.snapshot import ClusterState, Job, JobState

_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


class SlurmAdapter:
    """One Slurm cluster of the specs, reached through a local or SSH transport.

    ``SLURM_CONF`` from the environment is honoured by the local transport (the Slurm
    tools read it); ``spec.slurm.slurmConf`` wins when set and is the only way to name
    the config on an SSH host. ``spec.slurm.workDir`` wins over ``work_dir`` (on an SSH
    host only the spec can name a remote path). ``timeout`` bounds each Slurm command:
    an unreachable controller makes the client tools retry for about ``MessageTimeout``.
    Not thread-safe: one apply drives one adapter.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        work_dir: Path,
        transport: Transport | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.spec = cluster
        self.cluster = cluster.metadata.name
        settings = cluster.spec.slurm
        self.settings = settings
        if transport is None:
            ssh_host = settings.ssh_host if settings else None
            passed = settings.export_env if settings else []
            transport = SSHTransport(ssh_host) if ssh_host else LocalTransport(passed=passed)
        self.transport = transport
        self.work_dir = str(settings.work_dir) if settings and settings.work_dir else str(work_dir)
        self.timeout = timeout
        # Slurm prints zone-less local times; under TZ=UTC they are UTC by construction.
        # SLURM_TIME_FORMAT=standard keeps a user's custom format from changing them.
        self.env = {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
        if settings and settings.slurm_conf:
            self.env["SLURM_CONF"] = settings.slurm_conf
        # which workloads each plan has already submitted (see idempotency.py)
        self._submitted = PlanIndex(self._queue, self._job)

    @property
    def pools(self) -> list[NodePool]:
        return list(self.spec.spec.node_pools)

    # ------------------------------------------------------------------ commands

    def _run(
        self, argv: Sequence[str], *, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> Completed:
        return self.transport.run(
            argv, env=self.env | (env or {}), stdin=stdin, timeout=self.timeout
        )

    def _check(
        self, argv: Sequence[str], *, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> Completed:
        done = self._run(argv, stdin=stdin, env=env)
        if not done.ok:
            raise classify(done)
        return done

    def _queue(self, *filters: str) -> list[QueueRow]:
        """squeue rows in every state (terminal ones stay visible for MinJobAge)."""
        done = self._run(["squeue", "-h", "-a", "-t", "all", *filters, "-o", parse.SQUEUE_FORMAT])
        if not done.ok:
            if is_gone(done):  # `-j ID` of a job Slurm has forgotten
                return []
            raise classify(done)
        return parse.parse_squeue(done.stdout)

    def _job(self, job_id: str) -> QueueRow | None:
        rows = self._queue("-j", job_id)
        return next((r for r in rows if job_id in (r.job_id, r.unique_id)), None)

    # ------------------------------------------------------------------- observe

    def observe(self) -> ClusterState:
        """Nodes from sinfo; jobs from squeue (all active jobs, plus our own recently ended ones).

        Ended jobs of ours stay in the snapshot while slurmctld remembers them
        (MinJobAge, 300 s by default) so the control plane can tell a job that finished
        from one that never started: an ended job whose ``startedAt`` is null died
        pending. Consumers must use ``job.state.holds_gpus`` for capacity.
        """
        sinfo = self._check(["sinfo", "-h", "-N", "-a", "-o", parse.SINFO_FORMAT])
        node_rows = parse.parse_sinfo(sinfo.stdout)
        reserved = parse_windows(self._check(list(RESERVATIONS)).stdout)
        rows = self._queue()
        wanted = [
            r
            for r in rows
            if parse.job_state(r.state, has_nodes=bool(r.nodes)).active or parse_tag(r.comment)
        ]
        allocations: dict[str, parse.Allocation] = {}
        # Jobs asking for GPUs per job or per task (``--gpus=3``) have no per-node figure
        # in squeue; only then is the bigger `scontrol -d` dump worth reading.
        if any(parse.parse_gpu_gres(r.gres_per_node)[1] == 0 for r in wanted):
            detail = self._check(["scontrol", "-o", "-d", "show", "job"])
            allocations = parse.parse_allocations(detail.stdout)
        jobs = [build_job(r, allocations.get(r.unique_id), self.pools) for r in wanted]
        return cluster_state(self.cluster, node_rows, reserved, self._endings(jobs), self.pools)

    def _endings(self, jobs: list[Job]) -> list[Job]:
        """End times of our ended jobs (squeue %e; for a running job it is only the limit)
        and exit codes of the failed ones (only scontrol shows those). Read only when such
        jobs are in view: slurmctld remembers them for MinJobAge after they end."""
        ended = [j for j in jobs if j.workload is not None and not j.state.active]
        if not ended:
            return jobs
        done = self._check(["squeue", "-h", "-a", "-t", "all", "-o", "%i|%e"])
        ends = {}
        for line in done.stdout.splitlines():
            job_id, _, end = line.partition("|")
            ends[job_id.strip()] = parse.parse_time(end)
        codes: dict[str, str] = {}
        for job in ended:
            if job.state in (JobState.FAILED, JobState.NODE_FAIL, JobState.TIMEOUT):
                detail = self._run(["scontrol", "-o", "show", "job", job.id])
                m = re.search(r"\sExitCode=(\d+:\d+)", " " + detail.stdout) if detail.ok else None
                if m:
                    codes[job.id] = m.group(1)
        ids = {j.id for j in ended}
        return [
            j.model_copy(update={"ended_at": ends.get(j.id), "exit_code": codes.get(j.id)})
            if j.id in ids and j.workload is not None
            else j
            for j in jobs
        ]

    def jobs_of(self, workload: str) -> list[Job]:
        """Our jobs (any state Slurm still remembers) tagged with ``workload``."""
        rows = self._queue("--name", job_name(workload))
        return [
            build_job(r, None, self.pools)
            for r in rows
            if (tag := parse_tag(r.comment)) is not None and tag.workload == workload
        ]

    # ------------------------------------------------------------------- execute

    def execute(self, action: Action, *, plan_id: str) -> ActionResult:
        if action.cluster != self.cluster:
            raise PermanentError(
                f"action for cluster {action.cluster!r} sent to adapter of {self.cluster!r}"
            )
        if action.op is Op.SUBMIT:
            return self._submit(self.request(action, plan_id), by_spec=True)
        if action.op is Op.CANCEL:
            return self._cancel(action, plan_id)
        if action.op is Op.PREEMPT:
            return self._preempt(action, plan_id)
        if action.op in (Op.MOVE, Op.RESIZE):
            return self._replace(action, plan_id)
        raise PermanentError(f"the Slurm adapter cannot {action.op}")

    def request(
        self, action: Action, plan_id: str, *, old: BatchRequest | None = None
    ) -> BatchRequest:
        """The Slurm request for a submit (or the new half of a move): :func:`build_request`."""
        account = self.settings.account if self.settings else None
        return build_request(action, plan_id, pools=self.pools, account=account, old=old)

    def _script_path(self, req: BatchRequest) -> str:
        stem = f"{job_name(req.workload)}.{req.plan_id}"
        if req.candidate:
            stem += f".{req.candidate}"
        return posixpath.join(self.work_dir, f"{_UNSAFE_FILE_CHARS.sub('_', stem)}.sh")

    def _submit(self, req: BatchRequest, *, by_spec: bool = False) -> ActionResult:
        """``by_spec``: an active job of the same workload spec from any plan is this
        submission (not for the new half of a move, whose old job has the same spec)."""
        existing = self._submitted.lookup(req.plan_id, req.workload, req.candidate)
        if existing is None and by_spec and req.spec_digest is not None:
            existing = self._submitted.lookup_spec(req.workload, req.spec_digest, req.candidate)
        if existing is not None:
            return ActionResult(
                ok=True, job=existing, message=f"already submitted as job {existing}"
            )
        path = self._script_path(req)
        self.transport.write_file(path, render_script(req), timeout=self.timeout)
        try:
            opts = sbatch_options(req, work_dir=self.work_dir)
            done = self._check(["sbatch", "--parsable", *opts, path])
        except AdapterError:
            # a timeout or a controller restart may still have queued the job
            self._submitted.forget(req.plan_id)
            raise
        job_id = done.stdout.strip().split(";")[0]  # "id" or "id;cluster"
        if not job_id.isdigit():
            self._submitted.forget(req.plan_id)
            raise PermanentError(f"sbatch printed {done.stdout.strip()!r}, not a job id")
        self._submitted.record(req.plan_id, req.workload, job_id, req.candidate, req.spec_digest)
        return ActionResult(ok=True, job=job_id, message=f"submitted job {job_id}")

    def _owned(self, action: Action) -> tuple[QueueRow, Tag] | None:
        """The action's job if it still exists and is ours for this workload; None if gone."""
        if not action.job:
            raise PermanentError(f"{action.op} of {action.workload} names no job")
        row = self._job(action.job)
        if row is None:
            return None
        tag = parse_tag(row.comment)
        if tag is None:
            raise PermanentError(
                f"job {action.job} is not tagged as the control plane's (comment {row.comment!r}); "
                "refusing to touch it"
            )
        if tag.workload not in (action.workload, action.tagged_as):  # tagged_as: renamed
            raise PermanentError(
                f"job {action.job} belongs to workload {tag.workload}, not {action.workload}; refusing"
            )
        return row, tag

    def _scancel(self, job_id: str) -> ActionResult:
        done = self._run(["scancel", job_id])
        if not done.ok and not is_gone(done):
            raise classify(done)
        return ActionResult(ok=True, job=job_id, message=f"cancelled job {job_id}")

    def _cancel(self, action: Action, plan_id: str) -> ActionResult:
        """Cancel a job; a running checkpointable one (a segment too) is given its signal
        and grace first, as an eviction is: its workload, replaced or removed, may save."""
        owned = self._owned(action)
        if owned is None or not _state(owned[0]).active:
            return ActionResult(
                ok=True, job=action.job, message=f"job {action.job} had already ended"
            )
        return self._end(*owned, plan_id)

    def _end(self, row: QueueRow, tag: Tag, plan_id: str) -> ActionResult:
        """End a job of ours that the plan no longer wants (cancelled, or the old half of a
        move or resize): a running checkpointable one with its signal and grace."""
        state = _state(row)
        if tag.checkpoint is not None and state.holds_gpus:
            ending = wind_down(self._run, row, tag, state, plan_id, lambda: self._script(row))
            if ending is not None:
                return ending
        return self._scancel(row.job_id)

    def _preempt(self, action: Action, plan_id: str) -> ActionResult:
        owned = self._owned(action)
        if owned is None or not _state(owned[0]).active:
            return ActionResult(
                ok=True, job=action.job, message=f"job {action.job} had already ended"
            )
        row, tag = owned
        checkpointable = tag.checkpoint is not None or bool(
            action.submit and action.submit.checkpoint_signal
        )
        if not checkpointable:
            return self._scancel(row.job_id)
        state = _state(row)
        if not state.holds_gpus:
            # requeue refuses a pending job ("Job is pending execution"), and it holds nothing
            return ActionResult(
                ok=True, job=row.job_id, message=f"job {row.job_id} is still queued; left as is"
            )
        ending = wind_down(self._run, row, tag, state, plan_id, lambda: self._script(row))
        return ending if ending is not None else requeue(self._run, row)

    def _script(self, row: QueueRow) -> str:
        return self._check(["scontrol", "write", "batch_script", row.unique_id, "-"]).stdout

    def _replace(self, action: Action, plan_id: str) -> ActionResult:
        if not action.replicas:
            raise PermanentError(f"{action.op} of {action.workload} lists no replicas")
        owned = self._owned(action)
        if owned is not None and (shrunk := shrink(self._check, *owned, action)) is not None:
            return shrunk
        old: BatchRequest | None = None
        if owned is not None:
            row, tag = owned
            if _state(row) is JobState.COMPLETED:
                raise PermanentError(
                    f"job {row.job_id} of {action.workload} has completed; nothing to {action.op}"
                )
            if action.submit is None or not action.submit.command:
                old = self._request_of(row, tag)
        elif action.submit is None:
            # a retry after the old job was cancelled: the new one must exist already
            for job in self.jobs_of(action.workload):
                if job.plan_id == plan_id and job.state.active:
                    return ActionResult(
                        ok=True, job=job.id, message=f"already moved to job {job.id}"
                    )
            raise PermanentError(
                f"job {action.job} of {action.workload} is gone and the action carries no submit details"
            )
        result = self._submit(self.request(action, plan_id, old=old))
        if owned is not None and _state(owned[0]).active:
            self._end(*owned, plan_id)  # a checkpointable one saves first
        return ActionResult(
            ok=True,
            job=result.job,
            message=f"{action.op}: job {result.job} replaces job {action.job}",
        )

    def _request_of(self, row: QueueRow, tag: Tag) -> BatchRequest:
        """What an existing job of ours was submitted with: options from Slurm, argv from its script."""
        detail = self._check(["scontrol", "-o", "show", "job", row.unique_id]).stdout
        script = self._check(["scontrol", "write", "batch_script", row.unique_id, "-"]).stdout
        return request_of_job(row, tag, detail, script)

    # ------------------------------------------------------------------ forecast

    def test_only(self, action: Action, *, plan_id: str = "test-only") -> StartForecast | Never:
        """Slurm's backfill estimate for a submit action: ``sbatch --test-only``.

        Returns when and where it would start, or ``"never"`` when the request can never
        run there. Nothing is queued, but each call consumes a Slurm job id.
        """
        req = self.request(action, plan_id)
        done = self._run(
            ["sbatch", "--test-only", *sbatch_options(req, work_dir=None)],
            stdin=render_script(req),
        )
        forecast = parse_test_only(done.stderr + "\n" + done.stdout)
        if forecast is None:
            raise (
                classify(done)
                if not done.ok
                else PermanentError(
                    f"sbatch --test-only printed nothing usable: {done.stderr.strip()!r}"
                )
            )
        return forecast

    def forecast(
        self, actions: Sequence[Action], *, now: datetime
    ) -> list[datetime | Never | None]:
        """The estimated start of each submit action (fan-out candidates); None if unknown.

        A plain request asks ``sbatch --test-only``. Slurm 22.05's test-only does not
        model backfill: it treats a higher-priority pending job as holding its nodes from
        now, so a request with ``--time-min`` is judged here instead: it starts now when
        enough nodes of the partition have the GPUs free and no reservation of a pending
        job (its expected start on its scheduled nodes, squeue %S/%Y) within ``time_min``.
        """
        out: list[datetime | Never | None] = []
        windows: tuple[ClusterState, dict[str, datetime]] | None = None
        for action in actions:
            try:
                if action.submit is not None and action.submit.time_min:
                    if windows is None:
                        pending = self._check(["squeue", "-h", "-t", "PD", "-o", "%i|%S|%Y"])
                        windows = (self.observe(), parse_reservations(pending.stdout))
                    req = self.request(action, "forecast")
                    fits = backfill_fits(
                        windows[0],
                        windows[1],
                        now,
                        partition=req.partition,
                        gpu_type=req.gpu_type,
                        nodes=len(req.nodes),
                        gpus_per_node=req.gpus_per_node,
                        time_min=action.submit.time_min,
                    )
                    out.append(now if fits else None)
                    continue
                result = self.test_only(action)
                out.append(result.start if isinstance(result, StartForecast) else NEVER)
            except AdapterError:
                out.append(None)  # unknown: the candidate is still ranked, after known ones
        return out


def _state(row: QueueRow) -> JobState:
    return parse.job_state(row.state, has_nodes=bool(row.nodes))
