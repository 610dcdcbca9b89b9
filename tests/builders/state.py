"""DesiredState straight from documents (the loader has its own tests), and the tests' clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from specs.desired import DesiredState
from specs.models import KINDS, Workload

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def desired(docs: list[dict[str, Any]], digest: str = "test") -> DesiredState:
    """Validated models of ``docs``, indexed as the loader indexes them."""
    by_kind: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
    for d in docs:
        model = KINDS[d["kind"]].model_validate(d)
        key = model.key if isinstance(model, Workload) else model.metadata.name
        by_kind[d["kind"]][key] = model
    return DesiredState(
        clusters=by_kind["Cluster"],
        departments=by_kind["Department"],
        projects=by_kind["Project"],
        workloads=by_kind["Workload"],
        digest=digest,
    )
