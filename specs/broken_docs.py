"""Documents that failed their schema: who they are, and their references checked anyway.

A document with a schema error is left out of the desired state, and references to it
are not reported as unknown on top of its own errors (one typo, one error). Its own
references to other documents would then wait until its schema error is fixed: a second
round of errors. So a *shadow* of it is validated without the fields that failed (their
defaults instead), and the references of that shadow are checked with everything else:
only the fields that name another document, a GPU type or a pool, never a check of a
value that failed. A workload whose project failed (or is missing: no default to fall
back on) stands on a stand-in project, itself never judged; a document whose name failed
gets a stand-in name, never shown.

In a list of items (a cluster's nodePools, a quota per GPU type) only the failed field of
an item is left out when it has a default (a pool's ``nodes``): the other items and fields
stand, so a cluster's pools and GPU types are all known, and the references of the
documents that loaded to them (a workload's nodePools) are checked at once too. An item
cannot be left out alone, as the items after it would be renumbered: a failed field
without a default leaves out the whole list, as any other top field of spec.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from yaml.nodes import Node

from specs import cache
from specs.desired import DesiredState, SourceRef, document_name
from specs.diagnostics import Diagnostic, Issue, Loc, describe_errors, model_at
from specs.fields import FAILED, WRITTEN
from specs.models import Cluster, Department, Project, Workload
from specs.validate import validate
from specs.yaml_nodes import name_position

Shadow = tuple[cache.PlacedDocument, frozenset[str]]  # the document, the fields that failed
NAME = ("metadata", "name")


def shadow(
    node: Node, value: dict[object, object], model: type[BaseModel], locs: list[Loc], path: str
) -> tuple[Shadow | None, list[Issue]]:
    """The document without the fields of its spec that failed (their defaults instead),
    if that validates, and those fields: its references to other documents can then be
    checked with its schema errors, not once they are fixed. Also the errors of its
    checks across fields (``minReplicas`` against ``replicas``), which pydantic holds back
    while a field of the same model fails; a check whose other field failed is left out."""
    spec = value.get("spec")
    named = [loc for loc in locs if loc != NAME]
    if not isinstance(spec, dict) or any(len(loc) < 2 or loc[0] != "spec" for loc in named):
        return None, []  # an error outside spec's fields: nothing to stand on
    kept, failed = _left_out(spec, [loc[1:] for loc in named], model)
    line, column = name_position(node)
    if len(named) < len(locs):  # its name failed: a stand-in (never shown) stands for it
        where = f"{zlib.crc32(path.encode()):08x}-{line}-{column}"  # one per file and place
        value = {**value, "metadata": {"name": f"invalid-name-{where}"}}
    if model is Workload and not isinstance(kept.get("project"), str):
        # its project is missing or failed: a stand-in (never checked) lets its other
        # references be checked all the same
        kept["project"] = f"no-project-line-{line}"
        failed.add("project")
    across: list[Issue] = []
    for _ in range(2):  # the fields of a failed check across fields are left out in turn
        lenient = {**value, "spec": kept}
        try:
            document = model.model_validate(
                lenient,
                by_alias=True,
                by_name=False,
                context={FAILED: frozenset(failed), WRITTEN: True},
            )
        except ValidationError as err:
            found = err.errors(include_url=False)
            checks = [e for e in found if _across_fields(e)]
            if across or len(checks) < len(found):  # a default that does not validate alone
                return None, across or describe_errors(checks, lenient, model)
            across = describe_errors(checks, lenient, model)
            spilled = {str(i.loc[1]) for i in across if len(i.loc) >= 2 and i.loc[0] == "spec"}
            kept = {k: v for k, v in kept.items() if k not in spilled}
            failed |= spilled
            continue
        assert isinstance(document, (Cluster, Department, Project, Workload))  # KINDS only
        placed = cache.PlacedDocument.model_construct(line=line, column=column, document=document)
        return (placed, frozenset(f"spec.{k}" for k in failed)), across
    return None, across


def _left_out(
    spec: dict[object, object], locs: list[Loc], model: type[BaseModel]
) -> tuple[dict[object, object], set[str]]:
    """``spec`` without what failed at ``locs`` (below spec), and the dotted paths of what
    was left out: a field of a list's item alone when the item can do without it (it has
    a default, or is an unknown key), else the whole top field."""
    whole: set[str] = set()
    in_items: dict[tuple[str, int], set[str]] = {}  # (top field, index) -> fields left out
    for loc in locs:
        field = _item_field(spec, loc, model)
        if field is None:
            whole.add(str(loc[0]))
        else:
            in_items.setdefault(field[:2], set()).add(field[2])
    kept = {k: v for k, v in spec.items() if k not in whole}
    failed = set(whole)
    for (top, index), names in in_items.items():
        items, item = kept.get(top), _item(spec, top, index)
        if isinstance(items, list) and item is not None:  # its list not left out whole
            items = kept[top] = list(items)  # a copy: the document's value stays as written
            items[index] = {k: v for k, v in item.items() if k not in names}
            failed |= {f"{top}.{index}.{name}" for name in names}
    return kept, failed


def _item_field(
    spec: dict[object, object], loc: Loc, model: type[BaseModel]
) -> tuple[str, int, str] | None:
    """(top field, index, field) when ``loc`` (below spec) is a field of a mapping in a
    list, such as ``nodePools.1.nodes``, that the item can do without: an unknown key, or
    a field with a default."""
    if len(loc) < 3 or not isinstance(loc[1], int) or not isinstance(loc[2], str):
        return None
    top, index, name = str(loc[0]), loc[1], loc[2]
    item = model_at(model, ("spec", top, index))
    if item is None or _item(spec, top, index) is None:
        return None
    fields = {info.alias or key: info for key, info in item.model_fields.items()}
    if name in fields and fields[name].is_required():
        return None
    return top, index, name


def _item(spec: dict[object, object], top: str, index: int) -> dict[object, object] | None:
    """The mapping at ``spec[top][index]``, if that is one."""
    items = spec.get(top)
    item = items[index] if isinstance(items, list) and 0 <= index < len(items) else None
    return item if isinstance(item, dict) else None


def _across_fields(error: ErrorDetails) -> bool:
    """Whether a validation error comes from a check across fields (``fields.at``)."""
    return error["type"] == "value_error" and error["msg"].removeprefix("Value error, ")[:1] == "@"


def identity(kind: str, value: dict[object, object]) -> tuple[str, str] | None:
    """(kind, name) of a document that failed validation, when readable: references to it
    are then not reported as unknown on top of its own errors."""
    metadata = value.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str):
        return None
    if kind == "Workload":
        spec = value.get("spec")
        project = spec.get("project") if isinstance(spec, dict) else None
        return (kind, f"{project}/{name}") if isinstance(project, str) else None
    return kind, name


# the fields of a document that name another one (or a GPU type or pool): checked on a
# document that failed its schema too, as they do not depend on its other values
_REFERENCE_FIELDS = ("spec.project", "spec.department", "spec.parent")
_REFERENCE_LISTS = ("spec.clusters.", "spec.gpuTypes.", "spec.nodePools.")


def _names_another(field: str) -> bool:
    """Whether a diagnostic's field names another document, a GPU type or a pool."""
    return field in _REFERENCE_FIELDS or _names_declared(field)


def _names_declared(field: str) -> bool:
    """Whether a diagnostic's field names what clusters declare, a GPU type or a pool (a
    quota's entries name a GPU type each: ``spec.quota.0.gpuType``)."""
    return field.startswith(_REFERENCE_LISTS) or (
        field.startswith("spec.quota.") and field.endswith(".gpuType")
    )


def references(
    desired: DesiredState,
    shadows: list[tuple[str, cache.PlacedDocument, frozenset[str]]],
    broken: list[tuple[str, str]],
    checked: Collection[Diagnostic],
) -> list[Diagnostic]:
    """The references of documents that failed their schema, checked with the fields that
    failed left out (one more validation, only when some document failed): the errors of
    the fields that are fine come at once, not after the others are fixed.

    Also the references of the documents that loaded to what clusters declare, which
    ``checked`` (their validation beside the documents that failed) held back while a
    cluster failed: its shadow declares them. Their other references count a document
    that failed as declared either way, only worded otherwise (did you mean …?): they
    stand as ``checked`` gave them."""
    if not shadows:
        return []
    fuller: DesiredState | None = None  # a copy, made once
    standing: dict[tuple[str, int, int], frozenset[str]] = {}  # where -> the fields that failed
    for path, item, failed in shadows:
        doc, ref = item.document, SourceRef(path, item.line, item.column)
        if (doc.kind, document_name(doc)) in (fuller or desired).sources:
            continue  # a duplicate: reported as one, and the first stands
        if fuller is None:
            fuller = desired.with_document(doc, ref)
        else:
            fuller.put(doc, ref)
        standing[(ref.path, ref.line, ref.column)] = failed
    if fuller is None:
        return []
    still_broken = [b for b in broken if b not in fuller.sources]
    found, seen = [], set(checked)
    for d in validate(fuller, broken=still_broken):
        if d.severity != "error" or d.field is None or not _names_another(d.field):
            continue
        left_out = standing.get((d.path, d.line, d.column))
        if left_out is None:  # a document that loaded: what its first validation held back
            if _names_declared(d.field) and d not in seen:
                found.append(d)
        elif not _judges(d.field, left_out):
            found.append(d)
    return found


def _judges(field: str, left_out: frozenset[str]) -> bool:
    """Whether a check at ``field`` may judge a value that failed (at its default in the
    shadow): one at that value, within it, or at what holds it (a check of a whole pool
    reads each of its fields)."""
    return any(
        field == f or field.startswith(f + ".") or f.startswith(field + ".") for f in left_out
    )
