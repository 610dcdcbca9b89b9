"""One actor at a time on the real Slurm: pairs of `cp apply --auto-approve` started
together (two CI jobs, or a CI job and a watch) never submit a workload twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.builders.cli import together, write_specs
from tests.controlplane.test_concurrency import judge_pair

pytestmark = pytest.mark.slurm
PAIRS = 20


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def test_applies_started_together_never_submit_twice(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    squeue: Callable[[], list[Any]],
    slurm: Callable[..., Any],
    wait_for: Callable[..., Any],
) -> None:
    work = [
        doc(
            "Workload",
            f"w{i}",
            project="p",
            gpus=1,
            gpuTypes=["a100_80"],
            walltime="1h",
            command=["sleep", "600"],
        )
        for i in range(3)
    ]
    for i in range(PAIRS):
        specs = write_specs(
            tmp_path / f"s{i}", [cluster_doc, doc("Project", "p", quota={"gpus": 8}), *work]
        )
        results = together(*[["apply", specs, "--auto-approve"] for _ in range(2)])
        judge_pair(results)
        active = Counter(j.workload for j in squeue() if j.workload and j.active)
        assert active == Counter({"p/w0": 1, "p/w1": 1, "p/w2": 1}), (i, active)
        ids = [j.id for j in squeue() if j.active]
        slurm("scancel", *ids)
        wait_for(lambda: not [j for j in squeue() if j.active])
