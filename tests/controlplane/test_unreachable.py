"""A cluster that does not answer: the plan says so, plans the others, and leaves it alone.

Two simulated clusters, ``near`` and ``far``; ``far``'s adapter raises TemporaryError
while it is "down". What must hold: nothing on ``far`` is cancelled or submitted again
elsewhere, what may run there keeps its GPUs in the quota, everything else is planned,
and a plan made while ``far`` was down is stale once it answers.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import yaml
from rich.console import Console

from adapters import make_adapter
from adapters.base import Adapter
from adapters.simulator import SimulatorAdapter, nodes_from_spec
from controlplane import unreachable
from controlplane.apply import apply_plan
from controlplane.cli.views.markdown import plan_markdown
from controlplane.cli.views.plan import print_plan
from controlplane.observe import observe
from controlplane.placeholders import Fate, judge
from controlplane.plan import Plan
from controlplane.reconcile import plan
from controlplane.store import Store
from controlplane.watch import Watcher, WatchOptions
from specs.actions import Op, ReasonCode
from specs.desired import DesiredState
from specs.observation import observation_of, observed_digest
from specs.snapshot import ClusterState, Snapshot
from tests.builders import NOW, cluster, department, desired, pool, project, workload
from tests.builders.cli import CP, write_specs
from tests.builders.incidents import Flaky


def render_text(made: Plan) -> str:
    """The plan as `cp plan` prints it, at 100 columns, without styles."""
    out = io.StringIO()
    print_plan(Console(file=out, width=100), made)
    return out.getvalue()


def clusters() -> list[dict[str, object]]:
    return [
        cluster("near", pools=[pool("a100", nodes=2)]),
        cluster("far", pools=[pool("v100", gpu_type="v100", gpus_per_node=4, nodes=2)]),
    ]


def world(tmp_path: Path, specs: DesiredState) -> tuple[dict[str, Adapter], Flaky, Store]:
    clock = lambda: NOW  # noqa: E731
    adapters: dict[str, Adapter] = {
        name: SimulatorAdapter(c, state_dir=tmp_path, clock=clock)
        for name, c in specs.clusters.items()
    }
    far = Flaky(adapters["far"])
    adapters["far"] = far
    return adapters, far, Store(f"sqlite:///{tmp_path}/db")


def run(specs: DesiredState, adapters: dict[str, Adapter], store: Store, now: datetime):  # type: ignore[no-untyped-def]
    snap = observe(specs, adapters, now, store)
    return snap, plan(specs, snap, now=now)


def apply(specs: DesiredState, adapters: dict[str, Adapter], store: Store, now: datetime) -> None:
    snap, planned = run(specs, adapters, store, now)
    report = apply_plan(planned, adapters, store, observed=observation_of(snap))
    assert report.ok, report.failed


def test_the_cluster_that_answers_is_planned_and_the_other_is_left_alone(tmp_path: Path) -> None:
    specs = desired(
        [
            *clusters(),
            project("p", gpus=16),
            workload("on-far", "p", gpus=4, clusters=["far"]),
            workload("old-far", "p", gpus=4, clusters=["far"]),
            workload("old-near", "p", gpus=4, clusters=["near"]),
        ]
    )
    adapters, far, store = world(tmp_path, specs)
    apply(specs, adapters, store, NOW)  # everything runs where it may

    # far goes down; old-far and old-near leave the specs (prune), new work arrives
    far.down = True
    later = desired(
        [
            *clusters(),
            project("p", gpus=16),
            workload("on-far", "p", gpus=4, clusters=["far"]),
            workload("new-near", "p", gpus=4, clusters=["near"]),
            workload("anywhere", "p", gpus=4, gpuTypes=["v100", "a100_80"]),
            workload("a100-only", "p", gpus=4, gpuTypes=["a100_80"]),
        ]
    )
    snap, planned = run(later, adapters, store, NOW + timedelta(minutes=5))
    [down] = [c for c in snap.clusters if c.name == "far"]
    assert (down.reachable, down.error) == (False, "TemporaryError: connection refused")
    assert planned.unreachable == {"far": "TemporaryError: connection refused"}

    ops = {(a.op, a.workload, a.cluster) for a in planned.actions}
    assert ops == {
        (Op.CANCEL, "p/old-near", "near"),  # the cluster that answers is pruned
        (Op.SUBMIT, "p/new-near", "near"),
        (Op.SUBMIT, "p/a100-only", "near"),  # it can never be on far: planned as usual
        (Op.SUBMIT, "p/anywhere", "near"),  # never submitted to far: planned as usual
    }, "nothing on far: p/old-far is not pruned, p/on-far not submitted again"
    waits = {p.workload: p.reason for p in planned.pending}
    assert waits["p/on-far"].code == ReasonCode.CLUSTER_UNREACHABLE
    # the error once, in the plan's unreachable clusters, not again for every workload
    assert "cluster far did not answer" in waits["p/on-far"].message
    assert "connection refused" not in waits["p/on-far"].message
    assert "p/a100-only" not in waits and "p/anywhere" not in waits

    # p/old-far left the specs but its job on far cannot be pruned yet: it waits for far
    assert "left the specs" in waits["p/old-far"].message

    # the held workloads count as running: 4 + 4 of far (on-far, and old-far's job that
    # still runs there), 4 + 4 + 4 on near; the plan says how much of that is held for far,
    # in JSON and under the quota table
    assert planned.projects["p"].allocated == 20
    assert planned.projects["p"].unreachable == 8
    assert json.loads(planned.to_json())["projects"]["p"]["unreachable"] == 8
    text = render_text(planned)
    assert "allocated counts GPUs held for clusters that did not answer (they may run" in text
    assert "there): project p 8" in text
    assert "| 20 (8 unreachable) |" in plan_markdown(planned)

    # far answers again: the plan made while it was down is stale, a fresh one is whole
    far.down = False
    snap, again = run(later, adapters, store, NOW + timedelta(minutes=6))
    assert observed_digest(snap) != planned.observed_digest
    assert again.unreachable == {}
    assert (Op.CANCEL, "p/old-far", "far") in {(a.op, a.workload, a.cluster) for a in again.actions}


def test_held_gpus_count_up_the_department_chain() -> None:
    """Held work's full size (gpus x replicas) under its project and every department above
    it, nested departments included; a project without a department adds to none."""
    specs = desired(
        [
            *clusters(),
            department("org", gpus=32),
            department("lab", gpus=16, parent="org"),
            project("p", gpus=8, department="lab"),
            project("q", gpus=8),
            workload("a", "p", gpus=4, replicas=2, clusters=["far"]),
            workload("b", "p", gpus=2, clusters=["far"]),
            workload("c", "q", gpus=1, clusters=["far"]),
        ]
    )
    holds = {"p/a": ["far"], "p/b": ["far"], "q/c": ["far"]}
    assert unreachable.held_gpus(specs, holds) == ({"p": 10, "q": 1}, {"lab": 10, "org": 10})


def test_held_work_counts_against_limits(tmp_path: Path) -> None:
    """A project at its limit through work on the unreachable cluster starts nothing new."""
    specs = desired(
        [
            *clusters(),
            project("p", gpus=8, limit=8),
            workload("big-far", "p", gpus=4, replicas=2, clusters=["far"]),
        ]
    )
    adapters, far, store = world(tmp_path, specs)
    apply(specs, adapters, store, NOW)
    far.down = True
    more = desired(
        [
            *clusters(),
            project("p", gpus=8, limit=8),
            workload("big-far", "p", gpus=4, replicas=2, clusters=["far"]),
            workload("near-1", "p", gpus=4, clusters=["near"]),
        ]
    )
    _, planned = run(more, adapters, store, NOW + timedelta(minutes=1))
    assert planned.actions == []
    waits = {p.workload: p.reason.code for p in planned.pending}
    assert waits == {"p/big-far": ReasonCode.CLUSTER_UNREACHABLE, "p/near-1": ReasonCode.OVER_LIMIT}


def test_held_work_is_never_a_victim(tmp_path: Path) -> None:
    """Reclaim would take far's GPUs for another project; it cannot touch what it cannot see."""
    docs = [
        *clusters(),
        project("owner", gpus=8),
        project("guest", gpus=0),
        workload("borrow", "guest", gpus=4, replicas=2, clusters=["far"]),
    ]
    adapters, far, store = world(tmp_path, desired(docs))
    apply(desired(docs), adapters, store, NOW)
    far.down = True
    docs.append(workload("claim", "owner", gpus=4, replicas=2, clusters=["far"]))
    _, planned = run(desired(docs), adapters, store, NOW + timedelta(minutes=1))
    assert planned.actions == []
    assert {p.workload for p in planned.pending} == {"guest/borrow", "owner/claim"}


def test_a_placeholder_on_an_unreachable_cluster_is_kept(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/db")
    store.add_placeholder("p/w", "far", "1000", "plan-1")
    snap = Snapshot(
        now=NOW + timedelta(hours=1), clusters=[ClusterState(name="far", reachable=False)]
    )
    [verdict] = judge(store.placeholders(), snap)
    assert verdict.fate is Fate.UNOBSERVED


def test_a_placeholder_whose_plan_is_gone_is_sized_by_its_spec(tmp_path: Path) -> None:
    """A job submitted to a silent cluster by a plan the store no longer has (an older
    store, a pruned history) held 0 GPUs: its project could start other work over its
    limit meanwhile. It holds what its spec asks for."""
    specs = desired(
        [*clusters(), project("p", gpus=8, limit=8), workload("w", "p", gpus=4, replicas=2)]
    )
    adapters, far, store = world(tmp_path, specs)
    store.add_placeholder("p/w", "far", "1000", "plan-gone")
    far.down = True
    snap, planned = run(specs, adapters, store, NOW)
    [down] = [c for c in snap.clusters if c.name == "far"]
    assert [(k.workload, k.gpus, k.running) for k in down.last_known or []] == [
        ("p/w", 8, False)  # submitted, not seen starting
    ]
    assert planned.projects["p"].unreachable == 8


def test_unreachable_is_in_the_digest_and_left_out_of_json_when_reachable() -> None:
    up = Snapshot(now=NOW, clusters=[ClusterState(name="far")])
    down = Snapshot(now=NOW, clusters=[ClusterState(name="far", reachable=False, error="x")])
    assert observed_digest(up) != observed_digest(down)
    assert "reachable" not in up.model_dump_json(by_alias=True)
    assert '"reachable":false' in down.model_dump_json(by_alias=True)


def refused_kubeconfig(tmp_path: Path) -> dict[str, str]:
    """A Kubernetes cluster's settings whose API server refuses connections."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: connections are refused
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return {"kubeconfig": str(kubeconfig), "image": "busybox"}


def test_an_api_server_that_refuses_connections_is_unreachable(tmp_path: Path) -> None:
    """The real Kubernetes adapter against a port nobody listens on: the plan goes on."""
    k8s = refused_kubeconfig(tmp_path)
    specs = desired(
        [
            cluster("k", adapter="kubernetes", pools=[pool(nodes=0)], kubernetes=k8s),
            cluster("sim"),
            project("p"),
            workload("w", "p", clusters=["k"]),
            workload("v", "p", clusters=["sim"]),
        ]
    )
    adapters = {
        name: make_adapter(c, state_dir=tmp_path, clock=lambda: NOW)
        for name, c in specs.clusters.items()
    }
    started = time.monotonic()
    snap = observe(specs, adapters, NOW)
    assert time.monotonic() - started < 20, "an unreachable cluster is given up on quickly"
    [k] = [c for c in snap.clusters if c.name == "k"]
    assert not k.reachable and "TemporaryError" in (k.error or "") and "refused" in (k.error or "")
    planned = plan(specs, snap, now=NOW)
    assert [(a.op, a.workload) for a in planned.actions] == [(Op.SUBMIT, "p/v")]
    assert [(p.workload, p.reason.code) for p in planned.pending] == [
        ("p/w", ReasonCode.CLUSTER_UNREACHABLE)
    ]


def test_the_command_line_does_not_call_an_unchecked_cluster_in_sync(tmp_path: Path) -> None:
    """Every cluster down: the plan has no actions, yet nothing was checked. The text must
    not say the clusters match the specs, the plan exits 1, and a watch cycle names the
    cluster and fails (so `--once` exits 1 for cron and CI, and the loop backs off)."""
    k8s = refused_kubeconfig(tmp_path)
    specs = write_specs(
        tmp_path / "specs",
        [
            cluster("k", adapter="kubernetes", pools=[pool(nodes=1)], kubernetes=k8s),
            project("p"),
            workload("w", "p", clusters=["k"]),
        ],
    )
    planned = subprocess.run([CP, "plan", str(specs)], capture_output=True, text=True, timeout=120)
    assert "unreachable" in planned.stdout and "match the specs" not in planned.stdout
    # and it fails: a CI job asking --detailed-exitcode read "no changes" (user trial)
    assert planned.returncode == 1, planned.stderr
    assert "no cluster answered (k)" in planned.stderr
    as_json = subprocess.run(
        [CP, "plan", str(specs), "--json", "--detailed-exitcode"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and list(doc["unreachable"]) == ["k"]
    # the document says it too: a CI job reading it alone took it for a plan (trialQ)
    assert doc["ok"] is False and doc["error"]["kind"] == "unreachable"
    assert doc["error"]["message"].startswith("no cluster answered (k)")
    with_sim = write_specs(
        tmp_path / "with-sim",
        [
            cluster("k", adapter="kubernetes", pools=[pool(nodes=1)], kubernetes=k8s),
            cluster("sim"),
            project("p"),
            workload("w", "p", clusters=["k"]),
        ],
    )
    partly = subprocess.run(
        [CP, "plan", str(with_sim)], capture_output=True, text=True, timeout=120
    )
    assert partly.returncode == 0, partly.stderr  # one cluster answered: a plan of it
    # explain says which error keeps it waiting: its reason pointed at "the plan's
    # unreachable clusters", which explain never showed (user trial)
    explained = subprocess.run(
        [CP, "explain", "p/w", "--dir", str(with_sim)], capture_output=True, text=True, timeout=120
    )
    assert "cluster k did not answer: " in explained.stdout and "refused" in explained.stdout, (
        explained.stdout + explained.stderr
    )
    applied = subprocess.run(
        [CP, "apply", str(specs), "--json", "--auto-approve"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(applied.stdout)
    assert list(doc["unreachable"]) == ["k"] and "match the specs" not in doc["message"]
    # apply fails as plan does: it exited 0, ok: true, with nothing observed (user trial)
    assert applied.returncode == 1 and doc["ok"] is False, applied.stdout
    assert "no cluster answered (k)" in doc["message"] and "no cluster answered" in applied.stderr
    watched = subprocess.run(
        [CP, "watch", str(specs), "--once", "--quiet", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert watched.returncode == 1, watched.stdout + watched.stderr
    assert "unreachable: k (" in watched.stdout, watched.stdout


def test_watch_keeps_its_interval_while_some_cluster_still_answers(tmp_path: Path) -> None:
    """A cluster down for days must not slow the reconciling of the others to the longest
    backoff: the cycle fails (for --once) but only a cycle that reconciled nothing backs
    off. With no cluster left at all, nothing is planned and the cycle fails."""
    k8s = refused_kubeconfig(tmp_path)
    docs = [
        cluster("k", adapter="kubernetes", pools=[pool(nodes=1)], kubernetes=k8s),
        project("p"),
        workload("w", "p", clusters=["k"]),
    ]
    lines: list[str] = []
    for extra, backs_off in (([cluster("sim")], False), ([], True)):
        specs = write_specs(tmp_path / f"s{len(extra)}", docs + extra)
        watcher = Watcher(specs, WatchOptions(quiet=0, auto_approve=True), lines.append)
        watcher.run(once=True)
        assert watcher.failed and "unreachable: k (" in lines[-1], lines[-1]
        assert watcher.failures == (1 if backs_off else 0), lines[-1]
    empty = tmp_path / "empty"
    empty.mkdir()
    watcher = Watcher(empty, WatchOptions(quiet=0), lines.append)
    watcher.run(once=True)
    assert watcher.failed and "no clusters in the specs" in lines[-1]


def test_work_never_submitted_to_a_silent_cluster_is_not_held_there(tmp_path: Path) -> None:
    """A new cluster that does not answer (user trial: a kubeconfig not yet valid) held
    every workload that may use it and runs nowhere, never submitted there included; their
    stand-ins put the project over its limit, and a job running on the cluster that
    answered was preempted for it. Only what the store knows may be there is held now:
    a job submitted there and not seen starting, or a run not seen ending."""
    specs = desired(
        [
            *clusters(),
            project("p", gpus=8, limit=8),
            workload("running", "p", gpus=4, clusters=["near"]),
            workload("on-far", "p", gpus=4, clusters=["far"]),
            workload("big-far", "p", gpus=4, replicas=2, clusters=["far"]),
        ]
    )
    adapters, far, store = world(tmp_path, specs)
    far.down = True  # down before anything of ours was there
    apply(specs, adapters, store, NOW)
    assert [j.workload for j in adapters["near"].observe().jobs] == ["p/running"]
    snap, planned = run(specs, adapters, store, NOW + timedelta(minutes=1))
    [down] = [c for c in snap.clusters if c.name == "far"]
    assert down.last_known == []
    assert planned.actions == [], "held, on-far and big-far would put p over its limit"
    waits = {p.workload: p.reason.code for p in planned.pending}
    assert waits["p/on-far"] == waits["p/big-far"] == ReasonCode.CLUSTER_UNREACHABLE

    far.down = False  # far answers: on-far starts there; then it goes silent again
    apply(specs, adapters, store, NOW + timedelta(minutes=2))
    far.down = True
    snap, later = run(specs, adapters, store, NOW + timedelta(minutes=3))
    [down] = [c for c in snap.clusters if c.name == "far"]
    assert [(k.workload, k.gpus, k.running) for k in down.last_known or []] == [
        ("p/on-far", 4, False)  # submitted there; no observation saw it run before far went
    ]
    assert later.actions == []
    assert later.projects["p"].unreachable == 4, "on-far is held, big-far (never there) not"


def test_work_that_left_the_specs_while_its_cluster_is_silent_keeps_its_gpus(
    tmp_path: Path,
) -> None:
    """A workload removed from the specs while its job runs on a cluster that does not
    answer cannot be pruned yet, and its job still holds GPUs: they count under its
    project until the cluster answers, so its project's limit is not overrun meanwhile
    (the integration test over Slurm and Kubernetes caught this: another workload of the
    project started in its place)."""
    specs = desired(
        [
            *clusters(),
            project("p", gpus=8, limit=8),
            workload("old", "p", gpus=4, clusters=["far"]),
            workload("near-1", "p", gpus=4, clusters=["near"]),
        ]
    )
    adapters, far, store = world(tmp_path, specs)
    apply(specs, adapters, store, NOW)
    far.down = True
    later = desired(
        [
            *clusters(),
            project("p", gpus=8, limit=8),
            workload("near-1", "p", gpus=4, clusters=["near"]),
            workload("near-2", "p", gpus=4, clusters=["near"]),
        ]
    )
    _, planned = run(later, adapters, store, NOW + timedelta(minutes=1))
    assert planned.actions == [], "near-2 would put p at 12 of its limit 8"
    waits = {p.workload: p.reason for p in planned.pending}
    assert waits["p/old"].code == ReasonCode.CLUSTER_UNREACHABLE
    assert "left the specs" in waits["p/old"].message
    assert waits["p/near-2"].code == ReasonCode.OVER_LIMIT
    assert planned.projects["p"].unreachable == 4
    far.down = False  # far answers: old is pruned, near-2 starts
    _, again = run(later, adapters, store, NOW + timedelta(minutes=2))
    ops = {(a.op, a.workload) for a in again.actions}
    assert ops == {(Op.CANCEL, "p/old"), (Op.SUBMIT, "p/near-2")}


def test_a_fan_out_candidate_running_on_a_silent_cluster_won_the_round() -> None:
    """Candidates on near (queued) and far (running when last seen); far stops answering.
    The plan listed only near's candidate as waiting, which then started and ran the
    workload a second time until far answered (user trial). Far's ran first: near's is
    cancelled, and the workload is held for far. A candidate that was only submitted to far
    (not seen starting) decides nothing: near's waits on."""
    d = desired(
        [
            cluster("near", pools=[pool(nodes=1)]),
            cluster("far", pools=[pool(nodes=1)]),
            project("p", gpus=8),
            workload("w", "p", gpus=4, walltime="1h", strategy={"fanOut": True}),
        ]
    )
    queued = {"id": "5", "workload": "p/w", "state": "PENDING", "pool": "a100"}
    nodes = [n.model_dump() for n in nodes_from_spec(d.clusters["near"])]
    near = ClusterState.model_validate({"name": "near", "nodes": nodes, "jobs": [queued]})

    def far(running: bool) -> ClusterState:
        known = [{"workload": "p/w", "gpus": 4, "running": running}]
        return ClusterState(name="far", reachable=False, error="refused", last_known=known)

    made = plan(d, Snapshot(now=NOW, clusters=[near, far(True)]), now=NOW)
    [cancel] = made.actions
    assert (cancel.op, cancel.cluster, cancel.job, cancel.reason.code) == (
        Op.CANCEL,
        "near",
        "5",
        ReasonCode.FAN_OUT_LOSER,
    )
    assert cancel.reason.message.startswith(
        "fan-out: p/w ran on far when last seen (the cluster does not answer now)"
    )
    assert [(p.workload, p.reason.code) for p in made.pending] == [
        ("p/w", ReasonCode.CLUSTER_UNREACHABLE)
    ]
    only_submitted = plan(d, Snapshot(now=NOW, clusters=[near, far(False)]), now=NOW)
    assert only_submitted.actions == []
    [waits] = only_submitted.pending
    assert waits.reason.code == ReasonCode.SUBMITTED
    assert waits.reason.message.endswith(  # it was not mentioned (user trial)
        "; and one submitted to far, which does not answer (it may have started there)"
    )


def test_a_job_seen_running_on_a_cluster_that_goes_silent_is_known_running(
    tmp_path: Path,
) -> None:
    specs = desired(
        [*clusters(), project("p", gpus=8), workload("w", "p", gpus=4, clusters=["far"])]
    )
    adapters, far, store = world(tmp_path, specs)
    apply(specs, adapters, store, NOW)  # submitted on far
    run(specs, adapters, store, NOW + timedelta(minutes=1))  # and seen running there
    far.down = True
    snap, _ = run(specs, adapters, store, NOW + timedelta(minutes=2))
    [down] = [c for c in snap.clusters if c.name == "far"]
    assert [(k.workload, k.running) for k in down.last_known or []] == [("p/w", True)]
