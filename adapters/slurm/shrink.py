"""An elastic job gives replicas back in place.

A plan shrinks a running elastic job when reclaim, preemption or a lowered limit takes the
replicas it runs beyond ``minReplicas``. Done as a move is (submit the new shape, then
cancel the old job), every replica would restart, the ones that stay too, and lose what
they did since their last checkpoint. Slurm can shrink a running job instead:
``scontrol update JobId=N NodeList=<the nodes it keeps>`` releases the other nodes and
ends the job's tasks there. A gang's tasks all belong to one ``srun`` step, which Slurm
ends as a whole when one of its tasks is killed, unless the step was started to run on
without it; so an elastic gang is launched with ``srun --no-kill --kill-on-bad-exit=0``
and tagged ``elastic=1`` (script.py, tags.py), and only a job so tagged is shrunk in
place: running, one replica per node, the nodes it keeps among those it holds, with the
GPUs it has on each, and its batch host among them (the node its batch script runs on,
which Slurm cannot take from it: "Invalid node name specified"), on a cluster that stores
jobs in its accounting database (a job resized in place waits for its database index
before slurmctld takes another update of it; without accounting storage that index never
comes, and every later update, a checkpoint's eviction or the next shrink, is refused for
ever: "the DB index is being set"). Anything else (a job submitted before the tag
existed, replicas that share a node, a replica placed on another node, the batch host's
replica taken, a cluster without accounting storage) is replaced as before.

The job keeps its id, and a retried apply finds it already shrunk. Its tasks on the nodes
it keeps run on; what the job's environment says of its size (``SLURM_JOB_NODELIST``,
``SLURM_NNODES``) is now stale: an elastic framework learns the size from its own
rendezvous (torchrun's ``--nnodes=MIN:MAX``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from adapters.base import ActionResult
from adapters.slurm import parse
from adapters.slurm.parse import QueueRow
from adapters.slurm.tags import Tag
from adapters.slurm.transport import Completed
from specs.actions import Action, Op

Run = Callable[[list[str]], Completed]


def kept_nodes(row: QueueRow, tag: Tag, action: Action) -> list[str] | None:
    """The nodes a resize keeps ``row``'s job on, if it can be done in place: the job is
    tagged elastic and running, and the action keeps fewer of its nodes with the same
    GPUs on each, one replica per node. None: it is done by replacing the job."""
    if action.op is not Op.RESIZE or not tag.elastic or row.state != "RUNNING":
        return None
    replicas = action.replicas or []
    nodes = [r.node for r in replicas if r.node is not None]
    _, per_node = parse.parse_gpu_gres(row.gres_per_node)
    if (
        not nodes
        or len(nodes) != len(replicas)  # one the cluster would place
        or len(set(nodes)) != len(nodes)  # two on one node
        or any(r.gpus != per_node for r in replicas)
        or not set(nodes) <= set(row.nodes)
    ):
        return None
    return sorted(nodes)


def shrink(check: Run, row: QueueRow, tag: Tag, action: Action) -> ActionResult | None:
    """Release every node of ``row``'s job but those ``action`` keeps, where that can be
    done in place (:func:`kept_nodes`, and the batch host kept); None where it cannot.
    ``check`` runs a Slurm command and raises its error if it fails."""
    nodes = kept_nodes(row, tag, action)
    if nodes is None:
        return None
    if sorted(row.nodes) == nodes:  # a retried apply: done already
        return ActionResult(
            ok=True, job=row.job_id, message=f"job {row.job_id} already runs on {len(nodes)} nodes"
        )
    detail = check(["scontrol", "-o", "show", "job", row.unique_id]).stdout
    host = re.search(r"\sBatchHost=(\S+)", detail)
    if host is None or host.group(1) not in nodes or stores_jobs(check) is not True:
        return None
    check(["scontrol", "update", f"JobId={row.job_id}", f"NodeList={','.join(nodes)}"])
    left = sorted(set(row.nodes) - set(nodes))
    return ActionResult(
        ok=True,
        job=row.job_id,
        message=f"resize: job {row.job_id} gave back {', '.join(left)}; it runs on in place",
    )


def stores_jobs(run: Run) -> bool | None:
    """Whether slurmctld stores jobs in an accounting database (``AccountingStorageType``
    other than ``accounting_storage/none``): only then does a job resized in place take
    updates again. None: its configuration could not be read (each caller takes the safe
    side: no shrink in place, no giving up on an update)."""
    done = run(["scontrol", "show", "config"])
    storage = re.search(r"^AccountingStorageType\s*=\s*(\S+)", done.stdout, re.MULTILINE)
    if not done.ok or storage is None:
        return None
    return storage.group(1) != "accounting_storage/none"
