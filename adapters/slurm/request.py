"""From a plan action to a Slurm request, and back from a running job to the request it was.

:func:`build_request` turns a ``submit`` (or the new half of a ``move``/``resize``) into a
:class:`~adapters.slurm.script.BatchRequest`, filling what the action leaves out from the
spec's node pool, the cluster's account, or the old job. :func:`request_of_job` reads an
existing job of ours back (options from Slurm, argv from its batch script), for moving it.
No Slurm command runs here: the adapter fetches, these functions only read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from adapters.base import PermanentError
from adapters.slurm import parse
from adapters.slurm.parse import QueueRow
from adapters.slurm.script import BatchRequest, command_of, segment_of
from adapters.slurm.tags import Tag
from specs.actions import Action, SubmitDetails
from specs.models import NodePool
from specs.snapshot import Replica


def build_request(
    action: Action,
    plan_id: str,
    *,
    pools: Sequence[NodePool],
    account: str | None,
    old: BatchRequest | None = None,
) -> BatchRequest:
    """The Slurm request for a submit (or the new half of a move), defaults from the spec's
    ``pools`` and the cluster's ``account``.

    ``old`` fills what a move's action leaves out (it may carry no submit details).
    """
    sd = action.submit or SubmitDetails()
    pool = next((p for p in pools if p.name == action.pool), None)
    replicas = list(action.replicas or [])
    if not replicas:
        if old is not None:
            replicas = [Replica(node=None, gpus=old.gpus_per_node) for _ in old.nodes]
        else:
            replicas = [Replica(node=None, gpus=sd.gpus_per_replica)]
    per_node = sd.gpus_per_replica or replicas[0].gpus
    if any(r.gpus != per_node for r in replicas):
        raise PermanentError(
            f"{action.workload}: replicas ask for {[r.gpus for r in replicas]} GPUs; a Slurm job "
            "has the same GRES on every node, so all replicas need the same count"
        )
    tasks = 1
    if sd.nodes and sd.nodes < len(replicas) and all(r.node is None for r in replicas):
        # replicas sharing nodes (fan-out's single-node shape): tasks per node, GRES summed
        if len(replicas) % sd.nodes:
            raise PermanentError(
                f"{action.workload}: {len(replicas)} replicas do not divide over {sd.nodes} nodes"
            )
        tasks = len(replicas) // sd.nodes
        replicas = replicas[: sd.nodes]
        per_node *= tasks
    fallback = old or BatchRequest(
        workload=action.workload, plan_id=plan_id, nodes=(None,), gpus_per_node=0
    )
    try:
        return BatchRequest(
            workload=action.workload,
            plan_id=plan_id,
            nodes=tuple(r.node for r in replicas),
            gpus_per_node=per_node,
            gpu_type=sd.gpu_type or (pool.gpu_type if pool else None) or fallback.gpu_type,
            partition=sd.partition or (pool.partition if pool else None) or fallback.partition,
            walltime=sd.walltime or fallback.walltime,
            command=tuple(sd.command) if sd.command else fallback.command,
            checkpoint_signal=sd.checkpoint_signal or fallback.checkpoint_signal,
            checkpoint_grace=sd.checkpoint_grace or fallback.checkpoint_grace,
            account=sd.account or account or fallback.account,
            preemptible=sd.preemptible if action.submit else fallback.preemptible,
            time_min=sd.time_min,
            tasks_per_node=tasks,
            segment=sd.segment,
            candidate=sd.candidate,
            spec_digest=sd.spec_digest or fallback.spec_digest,
            elastic=sd.elastic if action.submit else fallback.elastic,
        )
    except ValueError as exc:
        raise PermanentError(f"{action.workload}: {exc}") from exc


def request_of_job(row: QueueRow, tag: Tag, detail: str, script: str) -> BatchRequest:
    """What an existing job of ours was submitted with: options from its queue row and
    ``scontrol -o show job`` line (``detail``), argv from its batch ``script``."""
    command = command_of(script)
    if command is None:
        raise PermanentError(
            f"job {row.job_id}'s batch script was not written by the control plane; "
            "the action must carry submit details (command)"
        )
    gpu_type, per_node = parse.parse_gpu_gres(row.gres_per_node)
    requeue = re.search(r"\sRequeue=(\d)", detail)
    account = re.search(r"\sAccount=(\S+)", detail)
    signal, _, seconds = (tag.checkpoint or "").partition("@")
    return BatchRequest(
        workload=tag.workload,
        plan_id=tag.plan_id or "",
        nodes=tuple(None for _ in range(max(row.num_nodes, 1))),
        gpus_per_node=per_node,
        gpu_type=gpu_type,
        partition=row.partition,
        walltime=row.time_limit,
        command=command,
        checkpoint_signal=signal or None,
        checkpoint_grace=int(seconds) if seconds.isdigit() else None,
        account=account.group(1) if account and account.group(1) != "(null)" else None,
        preemptible=requeue is None or requeue.group(1) == "1",
        # a checkpoint segment moved elsewhere stays one (same wrapper, same limit)
        segment=segment_of(script) if signal and row.time_limit else None,
        candidate=tag.candidate,
        spec_digest=tag.spec_digest,
        elastic=tag.elastic,
    )
