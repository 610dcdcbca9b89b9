"""The Kubernetes objects of one submission, as the JSON bodies the API server takes.

One replica becomes a batch/v1 Job (one pod, ``backoffLimit: 0``: a failure is the
control plane's to retry, with backoff); a gang becomes one pod per replica, named
``<submission>-<i>``, so that every replica is bound to the node the plan chose. Either
way each pod:

* is bound with ``spec.nodeName`` where the plan placed it (no scheduler involved) and
  carries the pool's labels as ``nodeSelector`` (the kubelet checks them at admission;
  where the plan leaves placement to the cluster, the scheduler uses them);
* asks for its GPUs with requests equal to limits, quantities as strings (the API
  server rejects a request without an equal limit, and server-side apply an integer);
* stops at its walltime (``activeDeadlineSeconds``);
* if it checkpoints, gets ``terminationGracePeriodSeconds`` = the checkpoint grace and a
  preStop hook that sends the checkpoint signal to the workload (PID 1) when it is
  preempted; a checkpoint *segment* runs under :data:`SEGMENT_WRAPPER`, which also
  sends it ``grace`` before the segment's time is up and turns that stop into exit 0.

Spec text never becomes shell code: the hook and the wrapper are fixed scripts, and the
signal, the times and the workload's argv reach them as positional parameters.
"""

from __future__ import annotations

from typing import Any

from adapters.kubernetes.identity import metadata_for, pod_name
from adapters.kubernetes.request import PodRequest

CONTAINER = "main"
# preStop: the checkpoint signal to the workload, then wait for the grace period to run out
# (the workload saving and exiting ends the container, and the hook with it)
PRESTOP_SCRIPT = 'kill -s "$0" 1; sleep "$1"'
# A checkpoint segment (the Slurm adapter's ``timeout`` wrapper, for a container): run the
# command; "$2" seconds later send it the signal "$1" and count the stop as the segment
# done (exit 0); a preemption's signal (the preStop hook signals PID 1, this shell) or a
# TERM is passed on to the command.
SEGMENT_WRAPPER = """sig=$1; after=$2; shift 2
checkpoint=0
"$@" &
child=$!
trap 'kill -s "$sig" "$child" 2>/dev/null' "$sig"
trap 'kill -s TERM "$child" 2>/dev/null' TERM
trap 'checkpoint=1' ALRM
(sleep "$after"; kill -s ALRM $$; kill -s "$sig" "$child") </dev/null >/dev/null 2>&1 &
timer=$!
while :; do
  wait "$child"; rc=$?
  kill -0 "$child" 2>/dev/null || break  # wait was cut short by a trap: wait again
done
kill "$timer" 2>/dev/null
if [ "$checkpoint" = 1 ]; then exit 0; fi
exit "$rc"
"""


def objects(req: PodRequest) -> list[dict[str, Any]]:
    """Every object to create for ``req``, in creation order."""
    if req.gang:
        return [pod(req, i, node) for i, node in enumerate(req.nodes)]
    return [job(req)]


def job(req: PodRequest) -> dict[str, Any]:
    """A batch/v1 Job running the one replica; the pod template carries our identity."""
    meta = metadata_for(req.identity, replica=0)
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "completions": 1,
        "parallelism": 1,
        "template": {"metadata": meta, "spec": pod_spec(req, 0, req.nodes[0])},
    }
    if req.walltime:
        spec["activeDeadlineSeconds"] = req.walltime
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": req.name, "namespace": req.namespace, **meta},
        "spec": spec,
    }


def pod(req: PodRequest, index: int, node: str | None) -> dict[str, Any]:
    """Replica ``index`` of a gang as a bare pod, bound to ``node`` (None: the scheduler's)."""
    spec = pod_spec(req, index, node)
    if req.walltime:
        spec["activeDeadlineSeconds"] = req.walltime
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(req.name, index),
            "namespace": req.namespace,
            **metadata_for(req.identity, replica=index),
        },
        "spec": spec,
    }


def pod_spec(req: PodRequest, index: int, node: str | None) -> dict[str, Any]:
    gpus = {req.gpu_resource: str(req.gpus)} if req.gpus else {}
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": req.image,
        "resources": {"limits": dict(gpus), "requests": dict(gpus)},
        "env": [
            {"name": "CP_WORKLOAD", "value": req.workload},
            {"name": "CP_SUBMISSION", "value": req.name},
            {"name": "CP_REPLICA", "value": str(index)},
            {"name": "CP_REPLICAS", "value": str(len(req.nodes))},
        ],
    }
    command = list(req.command) if req.command else None
    signal, grace = req.checkpoint_signal, req.checkpoint_grace
    if req.segment is not None and signal and req.walltime and grace is not None and command:
        after = max(1, req.walltime - grace)
        command = ["/bin/sh", "-c", SEGMENT_WRAPPER, "cp-segment", signal, str(after), *command]
    if command:
        container["command"] = command
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if signal and grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
        if signal != "TERM":  # the kubelet sends TERM itself
            hook = ["/bin/sh", "-c", PRESTOP_SCRIPT, signal, str(grace)]
            container["lifecycle"] = {"preStop": {"exec": {"command": hook}}}
    if node is not None:
        spec["nodeName"] = node
    if req.selector:
        spec["nodeSelector"] = dict(req.selector)
    return spec
