"""``cp apply`` killed or cut off from slurmctld mid-way, on a real Slurm: it always converges.

Every case runs ``cp apply`` as its own process and interrupts it at one point, then
recovers the way an operator would (rerun the same plan file, or plan afresh) and checks
what must hold whatever the point was:

* no workload ever got a second Slurm job (every job Slurm remembers is counted);
* no cancellation was lost: the pruned workload's job has ended;
* the final ``cp plan`` is empty.

The interruptions: SIGKILL of the whole process group (``cp`` and the Slurm command it
is running, as when the reconciler's host dies) right after the plan row is written,
and for each action once it is marked started, once its Slurm call has taken effect but
before the store records it, and once it is done. Then slurmctld stopped after the
first action: the failure is recorded on the action, and the next apply finishes.

The apply process sees Slurm through a slow client: each Slurm command is followed by a
short sleep before it returns (a busy controller), which holds every action between
"its effect is visible in Slurm" and "the store knows" long enough to kill it there.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.slurm import SlurmAdapter
from adapters.slurm.localcluster import LocalSlurm
from controlplane.plan import Plan
from tests.builders.cli import cp, ok, write_specs

pytestmark = pytest.mark.slurm
Helper = Callable[..., Any]
Capsys = pytest.CaptureFixture[str]
CP = Path(sys.executable).parent / "cp"
SLOW_COMMANDS = ("sbatch", "scancel", "squeue", "scontrol", "sinfo")
SLOW_SECONDS = 0.3


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


@pytest.fixture(scope="module")
def slow_slurm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a ``cp`` whose Slurm commands each take SLOW_SECONDS longer."""
    shims = tmp_path_factory.mktemp("slow-slurm")
    for name in SLOW_COMMANDS:
        real = shutil.which(name)
        assert real, f"{name} is not installed"
        shim = shims / name
        shim.write_text(f'#!/bin/sh\n"{real}" "$@"\nrc=$?\nsleep {SLOW_SECONDS}\nexit $rc\n')
        shim.chmod(0o755)
    return os.environ | {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}


@dataclass
class Scenario:
    """A spec repo with one job to prune (already running) and two workloads to submit."""

    specs: Path
    project: str
    orphan: str  # the running job of the workload that left the specs

    @property
    def workloads(self) -> list[str]:
        return [f"{self.project}/alpha", f"{self.project}/beta"]

    @property
    def db(self) -> Path:
        return self.specs / ".cp" / "controlplane.db"


def make_scenario(
    tmp_path: Path,
    project: str,
    cluster_doc: dict[str, Any],
    adapter: SlurmAdapter,
    make_action: Helper,
    wait_for: Helper,
) -> Scenario:
    # the orphan: a job of this store's (it knows the plan that made it) whose workload
    # then left the specs; a tagged job of a plan it never made would be another's
    old = doc(
        "Workload",
        "old",
        project=project,
        gpus=1,
        gpuTypes=["a100_80"],
        walltime="1h",
        command=["sleep", "600"],
    )
    base = [cluster_doc, doc("Project", project, quota={"gpus": 24})]
    specs = write_specs(tmp_path / "specs", [*base, old])
    made = subprocess.run(
        [str(CP), "apply", str(specs), "--auto-approve", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    [orphan] = [a["job"] for a in json.loads(made.stdout)["actions"]]
    assert orphan is not None
    wait_for(lambda: any(j.id == orphan and j.state.holds_gpus for j in adapter.observe().jobs))
    specs = write_specs(
        tmp_path / "specs",
        [
            *base,
            doc(
                "Workload",
                "alpha",
                project=project,
                gpus=2,
                gpuTypes=["a100_80"],
                walltime="1h",
                command=["sleep", "600"],
            ),
            doc(
                "Workload",
                "beta",
                project=project,
                gpus=1,
                gpuTypes=["v100"],
                walltime="1h",
                command=["sleep", "600"],
            ),
        ],
    )
    return Scenario(specs, project, orphan)


def read_db(db: Path, query: str, *args: str) -> list[tuple[Any, ...]]:
    """A read that never blocks the apply under test for long (read-only, short timeout)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.5) as conn:
            return list(conn.execute(query, args))
    except sqlite3.OperationalError:
        return []  # not created yet, or locked for a moment


def statuses(db: Path, plan_id: str) -> list[str]:
    query = "SELECT status FROM actions WHERE plan_id = ? ORDER BY seq"
    return [r[0] for r in read_db(db, query, plan_id)]


@dataclass
class Apply:
    """``cp apply`` running as a process group of its own."""

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

    def signal(self, sig: signal.Signals) -> None:
        os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=10)  # reaped: its lease holder is now a dead pid

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc.poll() is None, f"cp apply exited ({self.proc.returncode}) first"
            assert time.monotonic() < deadline, "the apply never reached the kill point"
            time.sleep(0.005)


def converge(capsys: Capsys, specs: Path, rounds: int = 4) -> dict[str, Any]:
    """Plan and apply until a plan is empty; the empty plan."""
    for _ in range(rounds):
        plan = ok(cp(capsys, "plan", specs, "--json")).json()
        if not plan["actions"]:
            return dict(plan)
        ok(cp(capsys, "apply", specs, "--auto-approve"))
    raise AssertionError(f"no empty plan after {rounds} applies: {plan['actions']}")


def check_invariants(sc: Scenario, squeue: Helper) -> None:
    jobs = squeue()
    for w in sc.workloads:
        mine = [j for j in jobs if j.workload == w]
        assert len(mine) == 1 and mine[0].active, f"{w}: expected one live job, Slurm has {mine}"
    orphan = next(j for j in jobs if j.id == sc.orphan)
    assert not orphan.active or orphan.state == "COMPLETING", f"cancellation lost: {orphan}"


# ---------------------------------------------------------------------- SIGKILL points

# (kill point, action index, recovery); execution order: the prune, then the two submits
KILL_POINTS = [
    ("planned", -1, "resume"),
    ("started", 0, "fresh"),
    ("sent", 0, "resume"),
    ("done", 0, "fresh"),
    ("started", 1, "resume"),
    ("sent", 1, "fresh"),
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
    adapter: SlurmAdapter,
    make_action: Helper,
    wait_for: Helper,
    squeue: Helper,
    slow_slurm: dict[str, str],
) -> None:
    project = f"k{KILL_POINTS.index((point, seq, recovery))}"
    sc = make_scenario(tmp_path, project, cluster_doc, adapter, make_action, wait_for)
    plan_file = tmp_path / "plan.json"
    ok(cp(capsys, "plan", sc.specs, "--out", plan_file))
    plan = Plan.from_json(plan_file.read_text())
    order = [(a.op.value, a.workload) for a in plan.execution_order()]
    assert order == [
        ("cancel", f"{project}/old"),
        ("submit", sc.workloads[0]),
        ("submit", sc.workloads[1]),
    ]

    if point == "planned":
        # plan afresh inside the apply process, and die as soon as that plan is stored
        before = len(read_db(sc.db, "SELECT id FROM plans"))
        run = Apply.start(slow_slurm, sc.specs, "--auto-approve")
        run.wait_until(lambda: len(read_db(sc.db, "SELECT id FROM plans")) > before)
        run.kill()
        newest = read_db(sc.db, "SELECT id FROM plans ORDER BY created_at DESC LIMIT 1")[0][0]
        plan_file.write_text(ok(cp(capsys, "show", newest, "--dir", sc.specs, "--json")).out)
        plan = Plan.from_json(plan_file.read_text())
    else:
        op, workload = order[seq]

        def effect_visible() -> bool:
            job = next((j for j in squeue() if j.workload == workload), None)
            if op == "cancel":
                return job is not None and job.state != "RUNNING"
            return job is not None

        def reached() -> bool:
            now = statuses(sc.db, plan.id)
            if point == "started":
                return now[seq] != "pending"
            if point == "done":
                return now[seq] == "done"
            return now[seq] == "done" or (now[seq] == "started" and effect_visible())

        run = Apply.start(slow_slurm, plan_file, "--dir", sc.specs)
        run.wait_until(reached)
        caught = statuses(sc.db, plan.id)
        run.kill()
        # the slow client makes every window wide enough to be hit exactly
        assert caught[seq] == ("done" if point == "done" else "started"), caught

    if recovery == "resume":
        body = ok(cp(capsys, "apply", plan_file, "--dir", sc.specs, "--json")).json()
        assert body["ok"]
        assert statuses(sc.db, plan.id) == ["done"] * len(plan.actions)
    else:
        ok(cp(capsys, "apply", sc.specs, "--auto-approve"))
        # an honest history: the killed apply is closed, and a submit whose job Slurm made
        # but the store never heard of is linked to that job by the next observation
        [(status,)] = read_db(sc.db, f"SELECT status FROM plans WHERE id = '{plan.id}'")
        # the plan the operator applied afresh supersedes the one that was cut off
        assert status in ("superseded", "applied"), status
        if point == "sent" and order[seq][0] == "submit":
            [(state, job)] = read_db(
                sc.db,
                f"SELECT status, job FROM actions WHERE plan_id = '{plan.id}' AND seq = {seq}",
            )
            assert state == "done" and job in {j.id for j in squeue()}, (state, job)
    final = converge(capsys, sc.specs)
    assert final["actions"] == []
    check_invariants(sc, squeue)
    verified = ok(cp(capsys, "history", sc.specs, "--verify", "--json")).json()
    assert verified["ok"], verified["problem"]


def test_a_resumed_submit_whose_job_already_finished_does_not_run_it_again(
    adapter: SlurmAdapter,
    cluster_spec: Any,
    tmp_path: Path,
    make_action: Helper,
    wait_for: Helper,
    squeue: Helper,
) -> None:
    """Killed after sbatch, resumed after the (short) job completed: one run, not two."""
    action = make_action(workload="k/short", command=["true"])
    first = adapter.execute(action, plan_id="p-short")
    wait_for(lambda: [j.state for j in squeue() if j.id == first.job] == ["COMPLETED"])
    # a new process: nothing cached, only what Slurm remembers
    again = SlurmAdapter(cluster_spec, work_dir=tmp_path / "w2").execute(action, plan_id="p-short")
    assert again.ok and again.job == first.job and "already submitted" in again.message
    assert [j.id for j in squeue() if j.workload == "k/short"] == [first.job]


# ------------------------------------------------------------- slurmctld down (runs last)


@pytest.fixture
def controller_back(local_slurm: LocalSlurm) -> Iterator[LocalSlurm]:
    """Whatever the test does to slurmctld, it runs again afterwards for the next tests."""
    yield local_slurm
    local_slurm.start()


def test_controller_down_mid_apply_is_recorded_and_the_next_apply_finishes(
    tmp_path: Path,
    capsys: Capsys,
    controller_back: LocalSlurm,
    cluster_doc: dict[str, Any],
    adapter: SlurmAdapter,
    make_action: Helper,
    wait_for: Helper,
    squeue: Helper,
    slow_slurm: dict[str, str],
) -> None:
    sc = make_scenario(tmp_path, "down", cluster_doc, adapter, make_action, wait_for)
    plan_file = tmp_path / "plan.json"
    ok(cp(capsys, "plan", sc.specs, "--out", plan_file))
    plan = Plan.from_json(plan_file.read_text())
    order = plan.execution_order()

    run = Apply.start(slow_slurm, plan_file, "--dir", sc.specs)
    run.wait_until(lambda: statuses(sc.db, plan.id)[0] == "done")
    run.signal(signal.SIGSTOP)  # hold it still while the controller goes away
    try:
        controller_back.stop_controller()
    finally:
        run.signal(signal.SIGCONT)
    assert run.proc.wait(timeout=120) == 1, "the apply reports the failure"

    rows = read_db(
        sc.db, "SELECT status, message, job FROM actions WHERE plan_id = ? ORDER BY seq", plan.id
    )
    status = [r[0] for r in rows]
    failed = status.index("failed")
    assert status == ["done"] * failed + ["failed"] + ["pending"] * (len(rows) - failed - 1)
    message = rows[failed][1]
    assert "Unable to contact slurm controller" in message
    assert "TemporaryError" in message and "rerun `cp apply`" in message, "says a retry may help"
    shown = " ".join(ok(cp(capsys, "show", plan.id, "--dir", sc.specs)).out.split())
    assert "Apply status: failed" in shown and "Unable to contact" in shown

    controller_back.start()  # idempotent: brings back slurmctld only
    # nothing marked done that wasn't: the done submits exist, the rest were never sent
    jobs = squeue()
    for (state, _, job), action in zip(rows, order, strict=True):
        if action.op.value == "submit":
            theirs = [j.id for j in jobs if j.workload == action.workload]
            assert theirs == ([job] if state == "done" else []), (action.workload, state)
    orphan = next(j for j in jobs if j.id == sc.orphan)
    assert orphan.state != "RUNNING", "the first action, the prune, was done"

    body = ok(cp(capsys, "apply", plan_file, "--dir", sc.specs, "--json")).json()
    assert body["ok"] and body["resumed"]
    assert [a["status"] for a in body["actions"]][:failed] == ["skipped"] * failed
    assert statuses(sc.db, plan.id) == ["done"] * len(rows)
    assert converge(capsys, sc.specs)["actions"] == []
    check_invariants(sc, squeue)
