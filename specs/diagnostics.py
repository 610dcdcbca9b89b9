"""Spec problems as diagnostics people can act on: ``path:line:col: error: field: message``.

Loading never stops at the first problem: every stage collects :class:`Diagnostic` values
and the loader raises one :class:`SpecError` carrying all of them, sorted by position, so a
user fixes a whole spec repo in one round trip (Terraform's tfdiags). This module also words
pydantic's validation errors in spec terms — camelCase field paths, the offending value,
and the fix — because pydantic's own messages speak of Python types and patterns.

Exceptions::

    SpecError        a spec repo cannot be loaded; ``.diagnostics`` holds every error
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from specs.reach import DNS_LABEL, ENV_NAME

Severity = Literal["error", "warning"]
Loc = tuple[str | int, ...]


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem at one place; ``line`` and ``column`` are 1-based."""

    path: str
    line: int
    column: int
    message: str
    field: str | None = (
        None  # dotted camelCase path inside the document, e.g. spec.nodePools.0.name
    )
    severity: Severity = "error"

    def __str__(self) -> str:
        where = f"{self.field}: " if self.field else ""
        return f"{self.path}:{self.line}:{self.column}: {self.severity}: {where}{self.message}"


def sort_diagnostics(found: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sorted by position, then text; unlike the dataclass order this never compares None."""
    return sorted(found, key=lambda d: (d.path, d.line, d.column, d.field or "", d.message))


class SpecError(Exception):
    """The specs cannot be loaded. ``diagnostics`` holds every error, sorted by position;
    ``warnings`` the warnings found on the way (documents skipped, work that cannot start)."""

    def __init__(self, diagnostics: Iterable[Diagnostic], warnings: Iterable[Diagnostic] = ()):
        self.diagnostics: list[Diagnostic] = sort_diagnostics(diagnostics)
        self.warnings: list[Diagnostic] = sort_diagnostics(warnings)
        count = len(self.diagnostics)
        summary = f"{count} error{'s' if count != 1 else ''} in the specs"
        super().__init__("\n".join([summary, *(str(d) for d in self.diagnostics)]))


def closest(word: str, candidates: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The candidate ``word`` was most likely meant to be, if any is close enough."""
    options = sorted(set(candidates))
    folded = {c.lower().replace("_", "").replace("-", ""): c for c in options}
    # Case and snake_case slips (gpus_per_node, GPUs) are the commonest typos: match them exactly.
    exact = folded.get(word.lower().replace("_", "").replace("-", ""))
    if exact is not None and exact != word:
        return exact
    close = difflib.get_close_matches(word, options, n=1, cutoff=cutoff)
    return close[0] if close else None


def edits(a: str, b: str) -> int:
    """How many letters to insert, delete, replace or swap with a neighbour to turn ``a``
    into ``b`` (optimal string alignment). For near misses of one fixed word, where
    difflib's ratio favours long words sharing a prefix over a typo of a short one."""
    before, row = list(range(len(b) + 1)), list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        earlier, before, row = before, row, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(before[j] + 1, row[j - 1] + 1, before[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], earlier[j - 2] + 1)
    return row[len(b)]


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` to end a message about a key, kind or keyword; else ``""``."""
    guess = closest(word, candidates)
    return f"; did you mean '{guess}'?" if guess else ""


def name_hint(word: str, candidates: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` after an unknown name. Stricter than for keys: names like
    h100 and v100 are one letter apart yet both real, a wrong guess would mislead."""
    guess = closest(word, candidates, cutoff=0.8)
    return f" (did you mean '{guess}'?)" if guess else ""


def workload_hint(word: str, names: Iterable[str]) -> str:
    """:func:`name_hint` for a workload's ``PROJECT/NAME``; a bare name is matched against
    the names within each project too (``train`` -> ``chem/train``), the slip of someone
    who has not learnt that a workload's identity includes its project."""
    known = set(names)
    if "/" not in word:
        owned = sorted(n for n in known if n.partition("/")[2] == word)
        if owned:
            return f" (did you mean {' or '.join(repr(n) for n in owned[:3])}?)"
    return name_hint(word, known)


def dotted(loc: Loc) -> str:
    return ".".join(str(part) for part in loc)


# ------------------------------------------------------------------ pydantic errors


@dataclass(frozen=True)
class Issue:
    """A pydantic error restated for a spec author.

    ``loc`` is the path into the document (camelCase keys and list indexes, union
    branches removed); ``at_key`` says the key itself is wrong (an unknown key, a bad
    map key) rather than its value.
    """

    loc: Loc
    message: str
    at_key: bool = False


# Errors raised by whole-model validators carry the model's loc; point at the field a user
# edits instead. (Budget's check concerns two fields alike, so it stays on the budget key.)

_NAME_RULE = (
    "use 1-63 lowercase letters, digits, '-', '_' or '.', "
    "starting and ending with a letter or digit"
)
_ENV_RULE = "letters, digits and '_', not starting with a digit (as a shell writes one)"
_NAMESPACE_RULE = (
    "use 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit"
)
_YAML11_BOOLS = {"yes", "no", "on", "off", "y", "n"}  # booleans in YAML 1.1, text in 1.2
_SHAPES = {
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "a whole number",
    "float_type": "a number",
    "bool_type": "true or false",
}


def describe_errors(
    errors: Sequence[ErrorDetails], raw: object, model: type[BaseModel]
) -> list[Issue]:
    """Turn one document's pydantic errors into issues, keeping only the union branch that
    matches what the user wrote (a quota mapping, not "should be a valid list")."""
    cleaned = [_clean(err, raw) for err in errors]
    plain = [(err, loc, key) for err, loc, key, branch in cleaned if branch is None]
    branched: dict[Loc, dict[str, list[tuple[ErrorDetails, Loc, bool]]]] = {}
    for err, loc, key, branch in cleaned:
        if branch is not None:
            prefix, tag = branch
            branched.setdefault(prefix, {}).setdefault(tag, []).append((err, loc, key))

    issues = [_issue(err, loc, key, raw, model) for err, loc, key in plain]
    for prefix, branches in branched.items():
        # A branch whose only complaint is "wrong shape" is the one the user did not mean.
        meant = [
            found
            for found in branches.values()
            if not all(loc == prefix and err["type"] in _SHAPES for err, loc, _ in found)
        ]
        if meant:
            issues.extend(
                _issue(e, loc, key, raw, model) for found in meant for e, loc, key in found
            )
        else:
            shapes = sorted(
                {_SHAPES[e["type"]] for found in branches.values() for e, _, _ in found}
            )
            value = _value_at(raw, prefix)
            issues.append(Issue(prefix, f"expected {' or '.join(shapes)}, got {_show(value)}"))
    return issues


def _clean(
    err: ErrorDetails, raw: object
) -> tuple[ErrorDetails, Loc, bool, tuple[Loc, str] | None]:
    """Strip pydantic's union-branch tags and ``[key]`` markers from a loc."""
    loc: list[str | int] = []
    at_key = err["type"] == "extra_forbidden"
    branch: tuple[Loc, str] | None = None
    value = raw
    for part in err["loc"]:
        if part == "[key]":
            at_key = True
            continue
        if (child := _child(value, part)) is not _ABSENT:
            loc.append(part)
            value = child
        elif isinstance(part, str) and "[" in part and branch is None:
            # A union member tag such as "list[...GpuTypeQuota]": not a key the user wrote.
            branch = (tuple(loc), part)
        else:
            loc.append(part)
            value = None
    return err, tuple(loc), at_key, branch


def _issue(err: ErrorDetails, loc: Loc, at_key: bool, raw: object, model: type[BaseModel]) -> Issue:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err["input"]
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        allowed = sorted(aliases_of(model_at(model, loc[:-1])))
        hint = did_you_mean(key, allowed)
        if not hint and allowed:
            hint = f"; valid keys here: {', '.join(allowed)}"
        return Issue(loc, f"unknown key '{key}'{hint}", at_key=True)
    if kind == "missing":
        return Issue(loc, f"missing required key '{loc[-1] if loc else '?'}'; add it")
    if kind in ("value_error", "assertion_error"):
        message = str(ctx.get("error", err["msg"])).removeprefix("Value error, ")
        if message.startswith("@") and ": " in message:  # a check across fields (fields.at)
            target, message = message[1:].split(": ", 1)
            loc = _deepest_written(raw, loc, _parse_loc(target))
        return Issue(loc, message)
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        if pattern == DNS_LABEL:  # a Kubernetes namespace: no '_' or '.'
            what, rule = "namespace", _NAMESPACE_RULE
        elif pattern == ENV_NAME:
            what, rule = "environment variable name", _ENV_RULE
        elif "a-z0-9" in pattern:
            what, rule = "name", _NAME_RULE
        else:
            what, rule = "value", f"it must match {pattern}"
        return Issue(loc, f"{_show(value)} is not a valid {what}: {rule}", at_key=at_key)
    if kind == "literal_error":
        options = [
            o.strip(" '") for o in str(ctx.get("expected", "")).replace(" or ", ", ").split(",")
        ]
        hint = did_you_mean(str(value), options) if isinstance(value, str) else ""
        return Issue(loc, f"{_show(value)} is not one of {', '.join(options)}{hint}")
    if kind in _SHAPES or kind.endswith(("_parsing", "_type")) or kind == "int_from_float":
        expected = _SHAPES.get(kind) or _expected_from(kind)
        hint = ""
        if kind == "bool_type" and isinstance(value, str) and value.lower() in _YAML11_BOOLS:
            hint = "; YAML 1.2 reads yes, no, on and off as text: write true or false"
        return Issue(loc, f"expected {expected}, got {_show(value)}{hint}", at_key=at_key)
    bounds = {
        "greater_than_equal": ("at least", "ge"),
        "greater_than": ("greater than", "gt"),
        "less_than_equal": ("at most", "le"),
        "less_than": ("less than", "lt"),
    }
    if kind in bounds:
        words, bound = bounds[kind]
        return Issue(loc, f"must be {words} {ctx.get(bound)}, got {_show(value)}")
    if kind == "finite_number":
        return Issue(loc, f"must be a finite number, got {_show(value)}")
    if kind == "too_short":
        n = ctx.get("min_length", 1)
        return Issue(loc, "needs at least one entry" if n == 1 else f"needs at least {n} entries")
    if kind == "too_long":
        return Issue(loc, f"has more than the {ctx.get('max_length')} entries allowed here")
    return Issue(loc, str(err["msg"]), at_key=at_key)


def _parse_loc(text: str) -> Loc:
    return tuple(int(part) if part.isdigit() else part for part in text.split("."))


def _deepest_written(raw: object, loc: Loc, below: Loc) -> Loc:
    """``loc`` extended by as much of ``below`` as the user wrote (an omitted field has no
    position of its own: the error then points at what holds it)."""
    value = _value_at(raw, loc)
    for part in below:
        child = _child(value, part)
        if child is _ABSENT:
            break
        loc, value = (*loc, part), child
    return loc


def _expected_from(kind: str) -> str:
    if kind.startswith("int") or kind == "int_from_float":
        return "a whole number"
    if kind.startswith("float"):
        return "a number"
    if kind.startswith("bool"):
        return "true or false"
    return kind.split("_")[0]


def _show(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):  # as the file spells it
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _value_at(raw: object, loc: Loc) -> object:
    for part in loc:
        raw = _child(raw, part)
        if raw is _ABSENT:
            return None
    return raw


_ABSENT = object()


def _child(value: object, part: str | int) -> object:
    """``value[part]`` in a built YAML value (mapping key or list index), else ``_ABSENT``."""
    if isinstance(value, dict):
        return value.get(part, _ABSENT)
    if isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
        return value[part]
    return _ABSENT


# ------------------------------------------------------------------ model walking


def aliases_of(model: type[BaseModel] | None) -> set[str]:
    if model is None:
        return set()
    return {info.alias or name for name, info in model.model_fields.items()}


def model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The spec model that holds the keys at ``loc`` (for suggestions), if any."""
    current: object = model
    for part in loc:
        current = _step(current, part)
        if current is None:
            return None
    return next((m for o in _options(current) if (m := _as_model(o)) is not None), None)


def _step(annotation: object, part: str | int) -> object:
    for option in _options(annotation):
        origin = get_origin(option)
        model = _as_model(option)
        if model is not None and isinstance(part, str):
            for name, info in model.model_fields.items():
                if (info.alias or name) == part:
                    return info.annotation
        elif origin is list and isinstance(part, int):
            return get_args(option)[0]
        elif origin is dict and isinstance(part, str):
            return get_args(option)[1]
    return None


def _options(annotation: object) -> list[object]:
    """The alternatives of a (possibly Annotated / Optional / Union) annotation."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _options(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [o for arg in get_args(annotation) for o in _options(arg)]
    return [annotation]


def _as_model(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None
