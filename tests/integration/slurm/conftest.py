"""A real Slurm cluster for the adapter's integration tests, started once per session.

The cluster comes from the project's own scripts (adapters/slurm/local/): munged,
slurmctld and six slurmd on this host, fake GPUs, Slurm installed with apt when missing.
If it cannot start, every test that needs it FAILS with the script's output: a CI
run must never turn green by skipping the Slurm suite.

Port base 26817 (override with CP_TEST_SLURM_PORT_BASE) keeps clear of a default
Slurm (6817) and of the shared recipe's 16817, so a developer's own test cluster can
run beside this one; a second suite running at the same time takes the next free slot
of ports (tests/integration/slurmports.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.slurm import SlurmAdapter
from adapters.slurm.localcluster import LocalSlurm, LocalSlurmError
from adapters.slurm.tags import parse_tag
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.models import Cluster
from specs.snapshot import Replica
from tests.integration import slurmports

CLUSTER = "local"


@pytest.fixture(scope="session")
def local_slurm() -> Iterator[LocalSlurm]:
    # not pytest's tmp_path: it is mode 700 and munged insists every folder above its
    # socket is a+x
    root = Path(tempfile.mkdtemp(prefix="cp-slurm-"))
    root.chmod(0o755)
    cluster = LocalSlurm(root / "cluster", port_base=slurmports.plain_base())
    saved = os.environ.get("SLURM_CONF")
    try:
        exports = cluster.start(fresh=True)
    except LocalSlurmError as exc:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"the local Slurm cluster did not start: {exc}", pytrace=False)
    os.environ["SLURM_CONF"] = exports["SLURM_CONF"]
    try:
        yield cluster
    finally:
        cluster.stop()
        leftovers = cluster.processes()
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        shutil.rmtree(root, ignore_errors=True)
        assert not leftovers, f"processes left behind by the local Slurm: {leftovers}"


def _slurm(*argv: str) -> subprocess.CompletedProcess[str]:
    """A raw Slurm command, the way a person (or an unmanaged user) would run it."""
    return subprocess.run(
        list(argv),
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | {"TZ": "UTC"},
    )


def cancel_everything() -> None:
    ids = _slurm("squeue", "-h", "-o", "%i").stdout.split()
    if ids:
        _slurm("scancel", *ids)
    _wait_for(
        lambda: not _slurm("squeue", "-h", "-t", "R,CG,S,CF", "-o", "%i").stdout.strip(), timeout=30
    )


def _wait_for(predicate: Callable[[], Any], *, timeout: float = 20.0, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(every)


@pytest.fixture
def clean_slurm(local_slurm: LocalSlurm) -> Iterator[LocalSlurm]:
    """The cluster with an empty queue before and after the test."""
    cancel_everything()
    yield local_slurm
    cancel_everything()


@pytest.fixture(scope="session")
def cluster_spec() -> Cluster:
    return Cluster.model_validate(
        {
            "apiVersion": "controlplane/v1",
            "kind": "Cluster",
            "metadata": {"name": CLUSTER},
            "spec": {
                "adapter": "slurm",
                "gpuTypes": {"a100_80": {"memoryGiB": 80}, "v100": {"memoryGiB": 32}},
                "nodePools": [
                    {
                        "name": "a100",
                        "gpuType": "a100_80",
                        "gpusPerNode": 8,
                        "partition": "gpu-a100",
                    },
                    {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "partition": "gpu-v100"},
                ],
            },
        }
    )


@pytest.fixture
def adapter(clean_slurm: LocalSlurm, cluster_spec: Cluster, tmp_path: Path) -> SlurmAdapter:
    return SlurmAdapter(cluster_spec, work_dir=tmp_path / "work", timeout=30)


def _make_action(
    op: Op | str = Op.SUBMIT,
    *,
    workload: str = "chem/md-run",
    job: str | None = None,
    nodes: list[str | None] | None = None,
    gpus: int = 1,
    pool: str | None = "a100",
    partition: str | None = "gpu-a100",
    gpu_type: str | None = "a100_80",
    command: list[str] | None = None,
    walltime: int | None = 3600,
    checkpoint_signal: str | None = None,
    preemptible: bool = True,
    details: bool = True,
    elastic: bool = False,
) -> Action:
    """A plan action with keyword defaults: a 1-GPU a100 job on a node Slurm chooses."""
    nodes = nodes if nodes is not None else [None]
    return Action(
        op=Op(op),
        workload=workload,
        cluster=CLUSTER,
        pool=pool,
        job=job,
        replicas=[Replica(node=n, gpus=gpus) for n in nodes],
        reason=Reason(code=ReasonCode.WITHIN_DESERVED, message="test"),
        submit=SubmitDetails(
            gpu_type=gpu_type,
            gpus_per_replica=gpus,
            partition=partition,
            walltime=walltime,
            command=command,
            preemptible=preemptible,
            checkpoint_signal=checkpoint_signal,
            checkpoint_grace=60 if checkpoint_signal else None,
            elastic=elastic,
        )
        if details
        else None,
    )


# Helpers reach the tests as fixtures, not imports: a directory without __init__.py
# makes its conftest a top-level "conftest" module, which another one could shadow.


@dataclass(frozen=True)
class SlurmJob:
    """One row of ``squeue``, read with a plain format (not the adapter's parser)."""

    id: str
    state: str
    partition: str
    gres: str
    nodes: str
    workload: str | None  # from our tag; None for a job that is not the control plane's

    @property
    def active(self) -> bool:
        return self.state in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED")


def _squeue() -> list[SlurmJob]:
    """Every job slurmctld remembers, ended ones included (for MinJobAge)."""
    done = _slurm("squeue", "-h", "-a", "-t", "all", "-o", "%i|%T|%P|%b|%N|%k")
    assert done.returncode == 0, done.stderr
    jobs = []
    for line in done.stdout.splitlines():
        jid, state, part, gres, nodes, comment = line.split("|", 5)
        tag = parse_tag(comment)
        jobs.append(SlurmJob(jid, state, part, gres, nodes, tag.workload if tag else None))
    return jobs


def _cluster_doc(slurm_conf: Path, work_dir: Path) -> dict[str, Any]:
    """The Cluster spec of the local test cluster: its partitions as node pools."""
    return {
        "apiVersion": "controlplane/v1",
        "kind": "Cluster",
        "metadata": {"name": CLUSTER},
        "spec": {
            "adapter": "slurm",
            "slurm": {"slurmConf": str(slurm_conf), "workDir": str(work_dir)},
            "gpuTypes": {"a100_80": {"memoryGiB": 80}, "v100": {"memoryGiB": 32}},
            "nodePools": [
                {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "partition": "gpu-a100"},
                {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "partition": "gpu-v100"},
            ],
        },
    }


@pytest.fixture
def squeue() -> Callable[[], list[SlurmJob]]:
    return _squeue


@pytest.fixture
def cluster_doc(local_slurm: LocalSlurm, tmp_path: Path) -> dict[str, Any]:
    return _cluster_doc(local_slurm.slurm_conf, tmp_path / "slurm-work")


@pytest.fixture
def make_action() -> Callable[..., Action]:
    return _make_action


@pytest.fixture
def slurm() -> Callable[..., subprocess.CompletedProcess[str]]:
    return _slurm


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    return _wait_for


@pytest.fixture(scope="session")
def accounting_slurm() -> Iterator[LocalSlurm]:
    """A second local cluster, with accounting (MariaDB + slurmdbd) and a slurmctld that
    forgets ended jobs after 2 s: only sacct knows of them then. Its own ports (base 27817
    in the suite's slot, or CP_TEST_SLURM_ACCT_PORT_BASE) so it runs beside the plain one."""
    root = Path(tempfile.mkdtemp(prefix="cp-slurm-acct-"))
    root.chmod(0o755)
    cluster = LocalSlurm(
        root / "cluster", port_base=slurmports.accounting_base(), accounting=True, min_job_age=2
    )
    try:
        cluster.start(fresh=True)
    except LocalSlurmError as exc:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"the local Slurm cluster with accounting did not start: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
        leftovers = cluster.processes()
        shutil.rmtree(root, ignore_errors=True)
        assert not leftovers, f"processes left behind by the accounting cluster: {leftovers}"
