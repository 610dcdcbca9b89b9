"""``cp apply`` killed mid-way on a real kube-apiserver: it always converges, never doubles.

As tests/integration/slurm/test_crash.py does for Slurm: every case runs ``cp apply`` as a
process of its own, SIGKILLs it at one point, recovers as an operator would (rerun the
same plan file, or plan afresh) and checks what must hold whatever the point was:

* every workload has exactly one submission, with one pod per replica (no duplicate
  objects: deterministic names meet the API server's 409 AlreadyExists);
* no deletion was lost: the pruned workload's Job and pod are gone;
* the final ``cp plan`` is empty.

The points: right after the plan row is written; and for each action (the prune, then a
two-pod gang, then a one-pod Job) once it is marked started, once its effect is visible in
the API server but before the store records it (for the gang: after its first pod), and
once it is done. The apply process talks to the API server through a slow proxy (each
response held back a little), which widens every window enough to kill it there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.kubernetes import KubernetesAdapter
from adapters.kubernetes.localcluster import LocalKubernetes
from controlplane.plan import Plan, SolverReport
from controlplane.store import Store, default_url
from specs.models import Cluster
from tests.builders.cli import cp, ok, write_specs

pytestmark = pytest.mark.k8s
Helper = Callable[..., Any]
Capsys = pytest.CaptureFixture[str]
CP = Path(sys.executable).parent / "cp"
DELAY = 0.15  # seconds each response chunk is held back


class SlowProxy:
    """A TCP proxy to the API server that delays everything the server sends (TLS passes
    through untouched: the certificate names 127.0.0.1, whatever the port)."""

    def __init__(self, target: int, delay: float) -> None:
        self.target, self.delay = target, delay
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pump, args=(conn, upstream, 0.0), daemon=True).start()
            threading.Thread(
                target=self._pump, args=(upstream, conn, self.delay), daemon=True
            ).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, delay: float) -> None:
        try:
            while data := src.recv(65536):
                if delay:
                    time.sleep(delay)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed = True
        self.server.close()


@pytest.fixture(scope="module")
def slow_env(
    local_k8s: LocalKubernetes, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """The environment of a ``cp`` whose API server answers slowly (KUBECONFIG)."""
    proxy = SlowProxy(local_k8s.port, DELAY)
    slow = tmp_path_factory.mktemp("slow") / "kubeconfig"
    slow.write_text(
        local_k8s.kubeconfig.read_text().replace(f":{local_k8s.port}", f":{proxy.port}")
    )
    yield os.environ | {"KUBECONFIG": str(slow)}
    proxy.close()


@pytest.fixture
def fast_kubeconfig(clean_k8s: LocalKubernetes, monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process (planning, recovering, checking) the API server answers at full speed."""
    monkeypatch.setenv("KUBECONFIG", str(clean_k8s.kubeconfig))


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


@dataclass
class Scenario:
    specs: Path
    project: str
    orphan: str  # the running submission of the workload that left the specs

    @property
    def db(self) -> Path:
        return self.specs / ".cp" / "controlplane.db"


def make_scenario(
    tmp_path: Path,
    project: str,
    cluster: dict[str, Any],
    make_action: Helper,
    wait_for: Helper,
    pods: Helper,
) -> Scenario:
    adapter = KubernetesAdapter(Cluster.model_validate(cluster))
    orphan = adapter.execute(
        make_action(workload=f"{project}/old", nodes=["a100-2"]), plan_id="before"
    ).job
    assert orphan is not None
    wait_for(
        lambda: [p.status.phase for p in pods(f"controlplane.io/project={project}")] == ["Running"]
    )
    common = {"walltime": "1h", "command": ["sleep", "600"]}
    specs = tmp_path / "specs"
    # the orphan's plan is one this store made: a tagged job of a plan it never made, of
    # a workload not in its specs, is another control plane's and never pruned
    made = Plan(
        id="before",
        created_at=datetime.now(UTC),
        spec_digest="",
        observed_digest="",
        solver=SolverReport(engine="kai", status="optimal"),
    )
    Store(default_url(specs), create_dir=True).save_plan(made)
    specs = write_specs(
        specs,
        [
            cluster,
            doc("Project", project, quota={"gpus": 24}),
            doc(
                "Workload",
                "alpha",
                project=project,
                gpus=2,
                replicas=2,
                gpuTypes=["a100_80"],
                **common,
            ),
            doc("Workload", "beta", project=project, gpus=1, gpuTypes=["h100"], **common),
        ],
    )
    return Scenario(specs, project, orphan)


def read_db(db: Path, query: str, *args: str) -> list[tuple[Any, ...]]:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.5) as conn:
            return list(conn.execute(query, args))
    except sqlite3.OperationalError:
        return []


def statuses(db: Path, plan_id: str) -> list[str]:
    return [
        r[0]
        for r in read_db(db, "SELECT status FROM actions WHERE plan_id = ? ORDER BY seq", plan_id)
    ]


@dataclass
class Apply:
    proc: subprocess.Popen[bytes]

    @classmethod
    def start(cls, env: dict[str, str], *args: str | Path) -> Apply:
        proc = subprocess.Popen(
            [str(CP), "apply", *map(str, args)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        return cls(proc)

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc.poll() is None, f"cp apply exited ({self.proc.returncode}) first"
            assert time.monotonic() < deadline, "the apply never reached the kill point"
            time.sleep(0.005)


def converge(capsys: Capsys, specs: Path, rounds: int = 4) -> dict[str, Any]:
    for _ in range(rounds):
        plan = ok(cp(capsys, "plan", specs, "--json")).json()
        if not plan["actions"]:
            return dict(plan)
        ok(cp(capsys, "apply", specs, "--auto-approve"))
    raise AssertionError(f"no empty plan after {rounds} applies: {plan['actions']}")


def check_invariants(sc: Scenario, pods: Helper, kube_jobs: Callable[[], list[Any]]) -> None:
    live = [
        p
        for p in pods(f"controlplane.io/project={sc.project}")
        if not p.metadata.deletion_timestamp
    ]
    for name, replicas in (("alpha", 2), ("beta", 1)):
        mine = [p for p in live if p.metadata.labels["controlplane.io/workload"] == name]
        subs = {p.metadata.labels["controlplane.io/submission"] for p in mine}
        assert len(subs) == 1 and len(mine) == replicas, (
            f"{name}: one submission of {replicas}, got {[p.metadata.name for p in mine]}"
        )
    assert not [p for p in live if p.metadata.labels["controlplane.io/workload"] == "old"], (
        "deletion lost"
    )
    names = [
        j.metadata.name
        for j in kube_jobs()
        if j.metadata.labels.get("controlplane.io/project") == sc.project
    ]
    assert sc.orphan.split("/")[1] not in names and len(names) == 1, names


# (kill point, action index, recovery); execution order: the prune, then the two submits
KILL_POINTS = [
    ("planned", -1, "resume"),
    ("started", 0, "fresh"),
    ("sent", 0, "resume"),
    ("done", 0, "fresh"),
    ("started", 1, "resume"),
    ("sent", 1, "fresh"),
    ("sent", 1, "resume"),
    ("done", 1, "resume"),
    ("started", 2, "fresh"),
    ("sent", 2, "resume"),
    ("done", 2, "fresh"),
]


@pytest.mark.parametrize(
    ("point", "seq", "recovery"),
    KILL_POINTS,
    ids=[f"{p}-{s}-{r}" if s >= 0 else p for p, s, r in KILL_POINTS],
)
def test_sigkill_then_rerun_converges_without_duplicates(
    point: str,
    seq: int,
    recovery: str,
    tmp_path: Path,
    capsys: Capsys,
    cluster_doc: dict[str, Any],
    fast_kubeconfig: None,
    slow_env: dict[str, str],
    make_action: Helper,
    wait_for: Helper,
    pods: Helper,
    kube: Any,
) -> None:
    from kubernetes import client

    project = f"k{KILL_POINTS.index((point, seq, recovery))}"
    cluster = {
        **cluster_doc,
        "spec": {**cluster_doc["spec"], "kubernetes": {"image": "busybox:1.36"}},
    }
    sc = make_scenario(tmp_path, project, cluster, make_action, wait_for, pods)
    plan_file = tmp_path / "plan.json"
    ok(cp(capsys, "plan", sc.specs, "--out", plan_file))
    plan = Plan.from_json(plan_file.read_text())
    order = [(a.op.value, a.workload) for a in plan.execution_order()]
    assert order == [
        ("cancel", f"{project}/old"),
        ("submit", f"{project}/alpha"),
        ("submit", f"{project}/beta"),
    ]
    mine = f"controlplane.io/project={project}"

    if point == "planned":
        before = len(read_db(sc.db, "SELECT id FROM plans"))
        run = Apply.start(slow_env, sc.specs, "--auto-approve")
        run.wait_until(lambda: len(read_db(sc.db, "SELECT id FROM plans")) > before)
        run.kill()
        newest = read_db(sc.db, "SELECT id FROM plans ORDER BY created_at DESC LIMIT 1")[0][0]
        plan_file.write_text(ok(cp(capsys, "show", newest, "--dir", sc.specs, "--json")).out)
        plan = Plan.from_json(plan_file.read_text())
    else:
        op, workload = order[seq]
        name = workload.split("/")[1]

        def effect_visible() -> bool:
            theirs = [
                p for p in pods(mine) if p.metadata.labels["controlplane.io/workload"] == name
            ]
            if op == "cancel":
                return not theirs or any(p.metadata.deletion_timestamp for p in theirs)
            jobs = client.BatchV1Api(kube).list_namespaced_job(
                f"cp-{project}", label_selector=f"controlplane.io/workload={name}"
            )
            return bool(theirs) or bool(jobs.items)

        def reached() -> bool:
            now = statuses(sc.db, plan.id)
            if len(now) <= seq:  # the apply has not stored the plan's actions yet
                return False
            if point == "started":
                return now[seq] != "pending"
            if point == "done":
                return now[seq] == "done"
            return now[seq] == "done" or (now[seq] == "started" and effect_visible())

        run = Apply.start(slow_env, plan_file, "--dir", sc.specs)
        run.wait_until(reached)
        caught = statuses(sc.db, plan.id)
        run.kill()
        assert caught[seq] == ("done" if point == "done" else "started"), caught

    if recovery == "resume":
        body = ok(cp(capsys, "apply", plan_file, "--dir", sc.specs, "--json")).json()
        assert body["ok"], body
        assert statuses(sc.db, plan.id) == ["done"] * len(plan.actions)
    else:
        ok(cp(capsys, "apply", sc.specs, "--auto-approve"))
    final = converge(capsys, sc.specs)
    assert final["actions"] == []
    wait_for(lambda: not [p for p in pods(mine) if p.metadata.deletion_timestamp])
    check_invariants(sc, pods, lambda: client.BatchV1Api(kube).list_job_for_all_namespaces().items)
