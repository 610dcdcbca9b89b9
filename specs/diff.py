"""Field-by-field differences between two versions of a spec, spelled as in the YAML.

Used wherever a change must be shown rather than merely detected: a workload edited while
it runs (``gpus: 2 -> 4``, solvers/drift.py) and a policy change under review
(``quota.limit: 32 -> 16``, controlplane/impact.py). Nested fields are dotted
(``checkpoint.grace``); a per-GPU-type quota list is keyed by type
(``quota[a100_80].gpus``); durations read as written (``2h``); other lists are values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from specs.durations import format_duration

Scalar = float | str | bool | list[Any] | None
Change = tuple[str, Scalar, Scalar]  # (field, before, after)

# fields written as durations (seconds in the models)
DURATIONS = frozenset({"halfLife", "maxWalltime", "minRuntime", "walltime", "grace", "total"})


def flatten(
    body: Mapping[str, Any], prefix: str = "", skip: frozenset[str] = frozenset()
) -> dict[str, Scalar]:
    """``{"quota": {"gpus": 8}}`` -> ``{"quota.gpus": 8}``; None values left out."""
    out: dict[str, Scalar] = {}
    for key, value in body.items():
        if not prefix and key in skip:
            continue
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{path}."))
        elif (
            isinstance(value, list)
            and value
            and all(isinstance(v, Mapping) and "name" in v for v in value)
        ):  # named items (node pools): by name
            for item in value:
                rest = {k: v for k, v in item.items() if k != "name"}
                out.update(flatten(rest, f"{path}[{item['name']}]."))
        elif (
            isinstance(value, list)
            and value
            and all(isinstance(v, Mapping) and "gpuType" in v for v in value)
        ):
            for item in value:
                rest = {k: v for k, v in item.items() if k != "gpuType"}
                out.update(flatten(rest, f"{path}[{item['gpuType']}]."))
        elif value is not None:
            out[path] = format_duration(int(value)) if key in DURATIONS else value
    return out


def changes(
    old: BaseModel, new: BaseModel, skip: frozenset[str] = frozenset()
) -> list[tuple[str, Scalar, Scalar]]:
    """(field, before, after) of every field that differs, in field order."""
    a = flatten(old.model_dump(by_alias=True, mode="json"), skip=skip)
    b = flatten(new.model_dump(by_alias=True, mode="json"), skip=skip)
    order = list(dict.fromkeys([*a, *b]))
    return [(f, a.get(f), b.get(f)) for f in order if a.get(f) != b.get(f)]


def show(value: Scalar) -> str:
    """A value as a person would write it in the specs."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def describe(found: list[tuple[str, Scalar, Scalar]]) -> str:
    """``gpus: 2 -> 4; walltime: none -> 2h``."""
    return "; ".join(f"{f}: {show(a)} -> {show(b)}" for f, a, b in found)
