"""A queue the plan leaves above its lowered limit is named in the plan's views, with why
and until when; the plan does not claim the clusters match the specs (user trial: "No
changes. The clusters match the specs." with 10 GPUs held against a limit of 4)."""

from __future__ import annotations

import io
from datetime import timedelta

from rich.console import Console

from controlplane.cli.views.markdown import plan_markdown
from controlplane.cli.views.plan import print_plan
from controlplane.reconcile import plan
from specs.snapshot import ClusterState, Job, Node, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload


def test_the_views_name_a_queue_kept_above_its_limit() -> None:
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]
    d = desired(
        [
            cluster(pools=pools),
            project("n", gpus=2, limit=2, minRuntime="20m"),
            workload("a", "n", gpus=4),
        ]
    )
    job = Job(id="1", workload="n/a", started_at=NOW - timedelta(minutes=5), pool="a100",
              replicas=[Replica(node="a100-01", gpus=4)], spec_digest=d.workloads["n/a"].spec.digest)  # fmt: skip
    node = Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8)
    p = plan(d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=[node], jobs=[job])]), now=NOW)  # fmt: skip
    assert p.actions == [] and p.projects["n"].above_limit is not None

    out = io.StringIO()
    print_plan(Console(file=out, width=200), p)
    text = out.getvalue()
    assert "The clusters match the specs" not in text
    assert "No changes now. 1 queue stays above its limit (below)." in text
    assert "Above their limit" in text
    assert "project n holds 4 GPUs, above its limit of 2: minRuntime keeps n/a" in text

    comment = plan_markdown(p)
    assert "1 queue above its limit." in comment.splitlines()[0]
    assert "<details open><summary>Above their limit (1)</summary>" in comment
    assert "| `n` | project n holds 4 GPUs, above its limit of 2: minRuntime keeps n/a" in comment
