"""A workload's digest says which version of the spec a job runs: it must change with every
edit that matters and with nothing else (a job tagged with it is otherwise replaced)."""

from __future__ import annotations

from typing import Any

from specs.models import WorkloadSpec


def digest(**spec: Any) -> str:
    return WorkloadSpec.model_validate({"project": "p", **spec}).digest


def test_defaults_written_out_change_nothing() -> None:
    assert digest() == digest(replicas=1, type="training", gpus=1)
    assert digest(command=["sleep", "1"]) == digest(command=["sleep", "1"], image=None)


def test_every_edit_changes_it() -> None:
    base = {"gpus": 2, "replicas": 2, "command": ["train"], "gpuTypes": ["a100_80"]}
    edits: list[dict[str, Any]] = [
        {"gpus": 4},
        {"replicas": 3},
        {"command": ["train", "--fast"]},
        {"gpuTypes": ["v100"]},
        {"priority": 7},
        {"walltime": "2h"},
        {"image": "pytorch:2"},
    ]
    seen = {digest(**base)}
    for edit in edits:
        seen.add(digest(**{**base, **edit}))
    assert len(seen) == len(edits) + 1


def test_a_copy_with_edits_has_its_own_digest() -> None:
    """The digest is worked out once per spec; a copy with changes works it out again."""
    spec = WorkloadSpec.model_validate({"project": "p", "gpus": 2})
    first = spec.digest
    edited = spec.model_copy(update={"gpus": 4})
    assert edited.digest == digest(gpus=4) != first
    assert spec.model_copy().digest == spec.digest == first
