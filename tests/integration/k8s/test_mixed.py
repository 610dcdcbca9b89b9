"""examples/mixed: one spec repo, a real Slurm and a real Kubernetes, one plan, one apply.

Both servers are real: a local Slurm of its own (the Slurm suite's port base + 60, in
the suite's slot of ports: tests/integration/slurmports.py) and the session's
kube-apiserver. The example is used as written, except that every command becomes
``sleep 600`` (Slurm really runs them).

* one plan places work on both clusters; the project limit counts GPUs on both;
* one apply submits Slurm jobs and creates Kubernetes objects; the next plan is empty;
* Slurm's controller down: the plan names hpc unreachable, holds what runs there (not
  pruned, not resubmitted on k8s) and still plans k8s; once it is back, the prune happens.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapters.kubernetes.localcluster import LocalKubernetes
from adapters.slurm.localcluster import LocalSlurm, LocalSlurmError
from adapters.slurm.tags import parse_tag
from tests.builders.cli import cp, ok
from tests.integration import slurmports

pytestmark = [pytest.mark.k8s, pytest.mark.slurm]
Helper = Callable[..., Any]
Capsys = pytest.CaptureFixture[str]
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mixed"


@pytest.fixture(scope="module")
def mixed_slurm() -> Iterator[tuple[LocalSlurm, dict[str, str]]]:
    root = Path(tempfile.mkdtemp(prefix="cp-mixed-slurm-"))
    root.chmod(0o755)  # munged insists every folder above its socket is a+x
    base = slurmports.plain_base() + slurmports.MIXED_OFFSET
    cluster = LocalSlurm(root / "cluster", port_base=base)
    try:
        exports = cluster.start(fresh=True)
    except LocalSlurmError as exc:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"the local Slurm cluster did not start: {exc}", pytrace=False)
    try:
        yield cluster, exports
    finally:
        cluster.stop()
        leftovers = cluster.processes()
        shutil.rmtree(root, ignore_errors=True)
        assert not leftovers, f"processes left behind by the local Slurm: {leftovers}"


@pytest.fixture
def both(
    mixed_slurm: tuple[LocalSlurm, dict[str, str]],
    clean_k8s: LocalKubernetes,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[LocalSlurm]:
    slurm, exports = mixed_slurm
    monkeypatch.setenv("SLURM_CONF", exports["SLURM_CONF"])
    monkeypatch.setenv("KUBECONFIG", str(clean_k8s.kubeconfig))
    yield slurm
    slurm.start()  # whatever the test did to slurmctld
    ids = squeue_raw("%i").split()
    if ids:
        subprocess.run(["scancel", *ids], check=False)


def squeue_raw(fmt: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-a", "-o", fmt],
        check=False,
        capture_output=True,
        text=True,
        env=os.environ,
    ).stdout


def slurm_jobs() -> dict[str, str]:
    """workload -> state of our active Slurm jobs."""
    out = {}
    for line in squeue_raw("%T|%k").splitlines():
        state, _, comment = line.partition("|")
        tag = parse_tag(comment)
        if tag and state in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            out[tag.workload] = state
    return out


def spec_repo(tmp_path: Path) -> Path:
    specs = tmp_path / "mixed"
    shutil.copytree(EXAMPLE, specs, ignore=shutil.ignore_patterns(".cp"))
    path = specs / "workloads.yaml"
    docs = list(yaml.safe_load_all(path.read_text()))
    for d in docs:
        d["spec"]["command"] = ["sleep", "600"]
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return specs


def where(plan: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {a["workload"]: (a["op"], a["cluster"]) for a in plan["actions"]}


def test_one_plan_over_slurm_and_kubernetes(
    both: LocalSlurm, tmp_path: Path, capsys: Capsys, pods: Helper, wait_for: Helper
) -> None:
    specs = spec_repo(tmp_path)
    planned = ok(cp(capsys, "plan", specs, "--json")).json()
    placed = where(planned)
    assert placed["vision/resnet"] == ("submit", "hpc")
    assert placed["vision/vit"] == ("submit", "k8s") and placed["nlp/serve"] == ("submit", "k8s")
    assert {c for _, c in placed.values()} == {"hpc", "k8s"}, "one plan, both clusters"
    assert set(placed) == {
        "vision/resnet",
        "vision/vit",
        "nlp/serve",
        "nlp/tokenize",
        "nlp/finetune",
    }
    # the project limit counts both clusters: 8 on Slurm + 6 on Kubernetes, augment waits
    assert {p["workload"]: p["reason"]["code"] for p in planned["pending"]} == {
        "vision/augment": "over-limit"
    }
    assert (
        planned["projects"]["vision"]["allocated"] == 14
        and planned["projects"]["vision"]["limit"] == 16
    )

    applied = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()
    assert applied["ok"] and len(applied["actions"]) == 5
    on_hpc = {w for w, (_, c) in placed.items() if c == "hpc"}
    wait_for(
        lambda: slurm_jobs() and all(slurm_jobs().get(w) == "RUNNING" for w in on_hpc), timeout=60
    )
    vit = pods("controlplane.io/project=vision,controlplane.io/workload=vit")
    assert (
        sorted(p.spec.node_name for p in vit) == ["h100-0", "h100-1"]
        or len({p.spec.node_name for p in vit}) >= 1
    )
    assert {p.metadata.namespace for p in pods("controlplane.io/project=nlp")} <= {"nlp-team"}
    wait_for(lambda: all(p.status.phase == "Running" for p in pods()))
    assert ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()["actions"] == []
    status = ok(cp(capsys, "status", specs, "--json")).json()
    assert status["projects"]["vision"]["allocated"] == 14

    # Slurm's controller goes away: plan the rest, touch nothing there
    both.stop_controller()
    path = specs / "workloads.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d["metadata"]["name"] != "resnet"]
    docs.append(
        {
            "apiVersion": "controlplane/v1",
            "kind": "Workload",
            "metadata": {"name": "eval"},
            "spec": {
                "project": "vision",
                "gpus": 1,
                "clusters": ["k8s"],
                "gpuTypes": ["a100_80"],
                "command": ["sleep", "600"],
            },
        }
    )
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    down = ok(cp(capsys, "plan", specs, "--json")).json()
    assert list(down["unreachable"]) == ["hpc"]
    assert where(down) == {"vision/eval": ("submit", "k8s")}, (
        "no prune of resnet on hpc, nothing moved to k8s"
    )
    waits = {p["workload"]: p["reason"]["code"] for p in down["pending"]}
    assert {w for w in on_hpc if w != "vision/resnet"} <= {
        w for w, c in waits.items() if c == "cluster-unreachable"
    }
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    assert pods("controlplane.io/workload=eval")

    both.start()
    back = ok(cp(capsys, "plan", specs, "--json")).json()
    assert not back.get("unreachable")
    assert where(back).get("vision/resnet") == ("cancel", "hpc"), "the prune, once hpc answers"
