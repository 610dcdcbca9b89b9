"""The base of every spec object (specs/models.py, specs/reach.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class SpecModel(BaseModel):
    """Base of every spec object: camelCase keys, unknown keys rejected, immutable, and no
    value converted to another type (``gpus: "2"``, ``priority: true`` and
    ``preemptible: "yes"`` are errors, not 2, 1 and true)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
    )
