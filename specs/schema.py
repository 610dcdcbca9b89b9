"""JSON Schema of a spec document, for editors and CI linters.

Editors (VS Code's YAML extension, JetBrains) validate and complete YAML against a JSON
Schema, and CI can lint a spec repo without installing us. The schema is generated from
the pydantic models, so it cannot drift from what the loader accepts; keys are the
camelCase spellings users write.
"""

from __future__ import annotations

from typing import cast

from pydantic import TypeAdapter

from specs.durations import format_duration
from specs.models import API_VERSION, Document

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def json_schema() -> dict[str, object]:
    """A draft 2020-12 schema: one document is oneOf Cluster, Department, Project, Workload."""
    generated = TypeAdapter(Document).json_schema(by_alias=True, mode="validation")
    schema: dict[str, object] = {
        "$schema": DIALECT,
        "title": f"controlplane spec document ({API_VERSION})",
        "description": "One YAML document of a controlplane spec repo; several per file are allowed.",
    }
    schema.update(cast(dict[str, object], _durations_as_text(generated)))
    return schema


def _durations_as_text(node: object) -> object:
    """Duration defaults are stored as seconds; a schema typed "string" must show them as text."""
    if isinstance(node, list):
        return [_durations_as_text(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _durations_as_text(value) for key, value in node.items()}
    default = out.get("default")
    if out.get("type") == "string" and "examples" in out and isinstance(default, int):
        out["default"] = format_duration(default)
    return out
