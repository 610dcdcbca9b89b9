"""From a plan action to Kubernetes objects, without a server: names, identity, manifests.

What the API server insists on (quantities as strings, GPU requests equal to limits,
DNS-1123 names, 63-character label values) is checked on the bodies themselves; the
integration tests (tests/integration/k8s) send them to a real one.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from adapters.base import PermanentError
from adapters.kubernetes import manifests
from adapters.kubernetes.identity import (
    Identity,
    idempotency_key,
    identity_of,
    metadata_for,
    submission_name,
)
from adapters.kubernetes.request import PodRequest, build_request
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.models import NodePool
from specs.reach import KubernetesSettings
from specs.snapshot import Replica

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$")
POOLS = [
    NodePool(name="a100", gpu_type="a100_80", gpus_per_node=8, labels={"gpu": "a100"}),
    NodePool(name="any", gpu_type="v100", gpus_per_node=4),
]


def action(
    nodes: list[str | None],
    *,
    gpus: int = 2,
    op: Op = Op.SUBMIT,
    workload: str = "chem/md-run",
    **details: Any,
) -> Action:
    sd: dict[str, Any] = {
        "gpu_type": "a100_80",
        "gpus_per_replica": gpus,
        "command": ["python", "train.py"],
    }
    return Action(
        op=op,
        workload=workload,
        cluster="k8s",
        pool="a100",
        replicas=[Replica(node=n, gpus=gpus) for n in nodes],
        reason=Reason(code=ReasonCode.WITHIN_DESERVED, message="t"),
        submit=SubmitDetails.model_validate(sd | details),
    )


def request(act: Action, plan_id: str = "plan-1", **settings: Any) -> PodRequest:
    return build_request(
        act,
        plan_id,
        settings=KubernetesSettings.model_validate({"image": "busybox:1.36", **settings}),
        pools=POOLS,
        namespaces={},
    )


# ----------------------------------------------------------------------------- names


def test_names_are_deterministic_valid_and_distinct() -> None:
    key = idempotency_key("plan-1")
    name = submission_name("chem/md-run", key)
    assert name == submission_name("chem/md-run", key), "a rerun of the plan meets its objects"
    assert name.startswith("chem-md-run-") and DNS_LABEL.match(name)
    assert name != submission_name("chem/md-run", idempotency_key("plan-2"))
    assert name != submission_name("chem/md-run", idempotency_key("plan-1", "cand-a"))
    assert name != submission_name("chem.x/md_run", key)
    long = submission_name("a" * 63 + "/" + "b" * 63, key)
    assert DNS_LABEL.match(long) and len(long) + len("-999") <= 63, "gang pod names fit a label"
    assert DNS_LABEL.match(submission_name("p_1/w.2", key))


def test_identity_round_trips_and_foreign_objects_are_not_ours() -> None:
    ident = Identity(
        workload="chem/md-run",
        submission="chem-md-run-0123456789",
        plan_id="plan-1",
        spec_digest="abc",
        candidate="c1",
        pool="a100",
        replicas=2,
        request={"gpusPerReplica": 2},
    )
    meta = metadata_for(ident)
    assert identity_of(meta) == ident
    for value in meta["labels"].values():
        assert LABEL_VALUE.match(value)
    assert identity_of({"labels": {"app": "web"}}) is None
    copied = {"labels": dict(meta["labels"]), "annotations": {}}  # a label copied, no identity
    assert identity_of(copied) is None
    lying = {"labels": dict(meta["labels"]), "annotations": {**meta["annotations"]}}
    lying["annotations"]["controlplane.io/id"] = "bio/other"  # labels say chem/md-run
    assert identity_of(lying) is None


# ----------------------------------------------------------------------------- requests


def test_request_from_action_and_settings() -> None:
    req = request(action(["n1", "n2"], gpus=4, walltime=3600))
    assert (req.namespace, req.nodes, req.gpus, req.image) == (
        "cp-chem",
        ("n1", "n2"),
        4,
        "busybox:1.36",
    )
    assert req.selector == {"gpu": "a100"} and req.walltime == 3600 and req.gang
    assert req.job_id == f"cp-chem/{req.name}"
    shared = request(action(["n1"]), namespace="gpu-jobs")
    assert shared.namespace == "gpu-jobs"
    own = build_request(
        action(["n1"]),
        "p",
        settings=KubernetesSettings(image="x"),
        pools=POOLS,
        namespaces={"chem": "chemistry"},
    )
    assert own.namespace == "chemistry"
    assert request(action(["n1"], image="pytorch:2")).image == "pytorch:2", "the workload's wins"


@pytest.mark.parametrize(
    ("act", "settings", "message"),
    [
        (action(["n1"]), {"image": None}, "no container image"),
        (action(["n1"], checkpoint_signal="USR1; rm -rf /"), {}, "not a signal name"),
        (
            action(["n1", "n2"]).model_copy(
                update={"replicas": [Replica(node="n1", gpus=1), Replica(node="n2", gpus=2)]}
            ),
            {},
            "same resources",
        ),
    ],
)
def test_requests_that_cannot_be_made_are_permanent_errors(
    act: Action, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(PermanentError, match=message):
        request(act, **settings)


def test_a_move_without_details_takes_them_from_the_old_submission() -> None:
    old = request(action(["n1"], walltime=600))
    bare = action(["n2"], op=Op.MOVE).model_copy(update={"submit": None})
    with pytest.raises(PermanentError, match="no submit details"):
        request(bare)
    moved = build_request(
        bare,
        "plan-2",
        settings=KubernetesSettings(image="busybox"),
        pools=POOLS,
        namespaces={},
        stored=old.details,
    )
    assert (moved.nodes, moved.command, moved.walltime, moved.pool) == (
        ("n2",),
        ("python", "train.py"),
        600,
        "a100",
    )


# ----------------------------------------------------------------------------- manifests


def test_one_replica_is_a_job_bound_where_the_plan_says() -> None:
    [job] = manifests.objects(request(action(["n1"], gpus=2, walltime=900)))
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, 900)
    pod = spec["template"]["spec"]
    assert pod["nodeName"] == "n1" and pod["nodeSelector"] == {"gpu": "a100"}
    assert pod["restartPolicy"] == "Never"
    [main] = pod["containers"]
    assert main["resources"] == {
        "limits": {"nvidia.com/gpu": "2"},
        "requests": {"nvidia.com/gpu": "2"},
    }, "requests equal limits, as strings"
    assert main["command"] == ["python", "train.py"] and main["image"] == "busybox:1.36"
    assert identity_of(job["metadata"]) == identity_of(spec["template"]["metadata"])
    assert "lifecycle" not in main and "terminationGracePeriodSeconds" not in pod


def test_a_gang_is_one_pod_per_replica_each_on_its_node() -> None:
    req = request(action(["n1", "n2", "n2"], gpus=4), gpuResource="amd.com/gpu")
    pods = manifests.objects(req)
    assert [p["kind"] for p in pods] == ["Pod"] * 3
    assert [p["metadata"]["name"] for p in pods] == [f"{req.name}-{i}" for i in range(3)]
    assert [p["spec"]["nodeName"] for p in pods] == ["n1", "n2", "n2"]
    assert {p["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] for p in pods} == {"4"}
    envs = [{e["name"]: e["value"] for e in p["spec"]["containers"][0]["env"]} for p in pods]
    assert [e["CP_REPLICA"] for e in envs] == ["0", "1", "2"] and envs[0]["CP_REPLICAS"] == "3"


def test_unplaced_replicas_are_left_to_the_scheduler() -> None:
    [job] = manifests.objects(request(action([None])))
    assert "nodeName" not in job["spec"]["template"]["spec"]


def test_a_checkpointable_workload_gets_its_signal_before_it_is_stopped() -> None:
    [job] = manifests.objects(
        request(action(["n1"], checkpoint_signal="SIGUSR1", checkpoint_grace=120))
    )
    pod = job["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 120
    hook = pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    assert hook == ["/bin/sh", "-c", manifests.PRESTOP_SCRIPT, "USR1", "120"], (
        "argv, not shell text"
    )
    [term] = manifests.objects(
        request(action(["n1"], checkpoint_signal="TERM", checkpoint_grace=60))
    )
    spec = term["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] == 60 and "lifecycle" not in spec["containers"][0]


def test_a_segment_runs_under_the_wrapper_with_the_argv_verbatim() -> None:
    argv = ["python", "-c", "print('$HOME; `x`')"]
    segment = action(
        ["n1"], command=argv, walltime=600, checkpoint_signal="USR1", checkpoint_grace=60, segment=2
    )
    [job] = manifests.objects(request(segment))
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command == [
        "/bin/sh",
        "-c",
        manifests.SEGMENT_WRAPPER,
        "cp-segment",
        "USR1",
        "540",
        *argv,
    ]
