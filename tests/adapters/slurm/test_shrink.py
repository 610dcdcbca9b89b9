"""An elastic gang on Slurm gives replicas back in place (adapters/slurm/shrink.py): its
script lets its tasks run on without a node, its tag says so, and a resize that keeps some
of its nodes is an ``scontrol update``, not a new job that restarts every replica (the
real controller's side is in tests/integration/slurm/test_adapter.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from adapters.slurm.parse import QueueRow
from adapters.slurm.request import build_request
from adapters.slurm.script import ELASTIC_PREFIX, command_of, render_script
from adapters.slurm.shrink import kept_nodes, shrink
from adapters.slurm.tags import Tag, format_tag, parse_tag
from adapters.slurm.transport import Completed
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.models import WorkloadSpec
from specs.snapshot import Replica

WHY = Reason(code=ReasonCode.RECLAIM, message="x")


def _action(op: Op, nodes: list[str | None], *, elastic: bool = True, gpus: int = 4) -> Action:
    return Action(
        op=op,
        workload="ml/elastic",
        cluster="c",
        pool="a100",
        job="7" if op is not Op.SUBMIT else None,
        replicas=[Replica(node=n, gpus=gpus) for n in nodes],
        submit=SubmitDetails(
            gpu_type="a100_80", gpus_per_replica=gpus, command=["train"], elastic=elastic
        ),
        reason=WHY,
    )


def test_an_elastic_gang_runs_on_without_a_node_and_says_so() -> None:
    req = build_request(_action(Op.SUBMIT, ["n1", "n2", "n3"]), "p1", pools=[], account=None)
    script = render_script(req)
    assert f"exec {' '.join(ELASTIC_PREFIX)} train\n" in script
    assert command_of(script) == ("train",)  # a move of it reads its command back
    assert parse_tag(format_tag(req.tag)) == Tag("ml/elastic", plan_id="p1", elastic=True)
    # a gang that is not elastic ends its step when a task ends, and says nothing
    fixed = build_request(
        _action(Op.SUBMIT, ["n1", "n2"], elastic=False), "p1", pools=[], account=None
    )
    assert "exec srun --kill-on-bad-exit=1 --ntasks-per-node=1 train\n" in render_script(fixed)
    assert "elastic=1" not in format_tag(fixed.tag)


def test_a_workload_with_fewer_min_replicas_is_submitted_elastic() -> None:
    elastic = WorkloadSpec.model_validate(
        {"project": "ml", "gpus": 4, "replicas": 3, "minReplicas": 1}
    )
    gang = WorkloadSpec.model_validate({"project": "ml", "gpus": 4, "replicas": 3})
    kw: dict[str, object] = {"gpu_type": "a100_80", "partition": None, "walltime": None}
    assert SubmitDetails.for_workload(elastic, account=None, **kw).elastic  # type: ignore[arg-type]
    plain = SubmitDetails.for_workload(gang, account=None, **kw)  # type: ignore[arg-type]
    assert not plain.elastic
    assert "elastic" not in plain.model_dump(by_alias=True)  # plans of other work read as before


def _row(nodes: list[str], *, state: str = "RUNNING", elastic: bool = True) -> QueueRow:
    tag = format_tag(Tag("ml/elastic", plan_id="p1", elastic=elastic))
    return QueueRow("7", "7", state, "cp.ml.elastic", "gpu-a100", len(nodes), nodes,
                    "gpu:a100_80:4", None, None, 3600, None, tag)  # fmt: skip


@pytest.mark.parametrize(
    ("row", "action", "kept"),
    [
        # a replica taken away: the job keeps the other two nodes
        (_row(["n1", "n2", "n3"]), _action(Op.RESIZE, ["n3", "n1"]), ["n1", "n3"]),
        # done already (a retried apply): kept as it is
        (_row(["n1", "n3"]), _action(Op.RESIZE, ["n1", "n3"]), ["n1", "n3"]),
        # a job submitted before the tag: its step would end with the node, so replaced
        (_row(["n1", "n2"], elastic=False), _action(Op.RESIZE, ["n1"]), None),
        # grown, or a replica placed on a node it does not hold: a new job
        (_row(["n1", "n2"]), _action(Op.RESIZE, ["n1", "n2", "n3"]), None),
        (_row(["n1", "n2"]), _action(Op.RESIZE, ["n3"]), None),
        # other GPUs per replica, a node the cluster would choose, two replicas on one node
        (_row(["n1", "n2"]), _action(Op.RESIZE, ["n1"], gpus=2), None),
        (_row(["n1", "n2"]), _action(Op.RESIZE, ["n1", None]), None),
        (_row(["n1", "n2"]), _action(Op.RESIZE, ["n1", "n1"]), None),
        # not running, or not a resize
        (_row(["n1", "n2"], state="PENDING"), _action(Op.RESIZE, ["n1"]), None),
        (_row(["n1", "n2"]), _action(Op.MOVE, ["n1"]), None),
    ],
)
def test_which_resizes_are_done_in_place(
    row: QueueRow, action: Action, kept: list[str] | None
) -> None:
    tag = parse_tag(row.comment)
    assert tag is not None
    assert kept_nodes(row, tag, action) == kept


def _slurm(storage: str, ran: list[list[str]]) -> Callable[[list[str]], Completed]:
    """Answers of a controller whose accounting storage is ``storage`` (a stand-in for
    slurmctld: the real one's side is in tests/integration/slurm/test_adapter.py)."""

    def run(argv: list[str]) -> Completed:
        ran.append(argv)
        if argv[:3] == ["scontrol", "show", "config"]:
            if not storage:  # the controller did not answer
                return Completed(tuple(argv), 1, "", "slurm_load_ctl_conf error")
            return Completed(tuple(argv), 0, f"AccountingStorageType   = {storage}\n", "")
        if argv[:3] == ["scontrol", "-o", "show"]:
            return Completed(tuple(argv), 0, "JobId=7 BatchHost=n1 NodeList=n[1-2]\n", "")
        return Completed(tuple(argv), 0, "", "")

    return run


@pytest.mark.parametrize(
    ("storage", "in_place"),
    [("accounting_storage/slurmdbd", True), ("accounting_storage/none", False), ("", False)],
)
def test_a_shrink_is_done_in_place_only_where_slurm_stores_jobs(
    storage: str, in_place: bool
) -> None:
    """A job resized in place waits for its database index before slurmctld takes another
    update of it; without accounting storage that index never comes, and every later
    update (a checkpoint's eviction, the next shrink) was refused for ever ("the DB index
    is being set"; trialN, real Slurm): such a cluster's jobs are replaced instead."""
    ran: list[list[str]] = []
    tag = Tag("ml/elastic", plan_id="p1", elastic=True)
    done = shrink(_slurm(storage, ran), _row(["n1", "n2"]), tag, _action(Op.RESIZE, ["n1"]))
    updates = [a for a in ran if a[:2] == ["scontrol", "update"]]
    assert (done is not None) is in_place
    assert updates == ([["scontrol", "update", "JobId=7", "NodeList=n1"]] if in_place else [])
