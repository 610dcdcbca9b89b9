"""The files people hand the control plane: a snapshot (``--observed``) and a plan file
(``cp plan --out``), read whole or refused with a StateFileError that says what is wrong
and how to make a good one."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from pydantic import ValidationError

from controlplane import collector
from controlplane.errors import StateFileError
from controlplane.plan import Plan
from specs.snapshot import Snapshot
from specs.yaml_nodes import compose, locate


def read_snapshot(path: Path) -> Snapshot:
    """A snapshot file (JSON or YAML), or a StateFileError saying what is wrong with it,
    and where (``file:line:col``), since people write and edit them by hand."""
    text: str | None = None
    try:
        text = path.read_text()
        with collector.building():
            if path.suffix in (".yaml", ".yml"):
                return Snapshot.model_validate(yaml.safe_load(text))
            return Snapshot.model_validate_json(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValidationError, ValueError) as exc:
        problem = _first_problem(exc)
        where = _position(text, exc) if text is not None else None
        if where is None:
            said = f"{path} is not a snapshot ({problem})"
        else:
            line, column, syntax = where
            problem = syntax if syntax and isinstance(exc, yaml.YAMLError) else problem
            said = f"{path}:{line}:{column}: not a snapshot ({problem})"
        raise StateFileError(f"{said}; write one with `cp observe`") from None


def _position(text: str, exc: BaseException) -> tuple[int, int, str | None] | None:
    """The 1-based line and column of a snapshot's first problem (JSON is YAML here), with
    the composer's words for a syntax error; None where the text gives no place."""
    composed = compose(text)
    if composed.syntax_error is not None:
        line, column, problem = composed.syntax_error
        return line + 1, column + 1, problem
    if not isinstance(exc, ValidationError) or not composed.documents:
        return None
    loc = tuple(p for p in exc.errors()[0]["loc"] if isinstance(p, str | int))
    return *locate(composed.documents[0], loc), None


def read_plan(path: Path) -> Plan:
    """A plan file from ``cp plan --out``, refused if it is not one or was edited since."""
    try:
        plan = Plan.from_json(path.read_text())
    except (OSError, UnicodeDecodeError, ValidationError, ValueError) as exc:
        raise StateFileError(
            f"{path} is not a plan ({_first_problem(exc)}); make one with `cp plan --out FILE`"
        ) from None
    if plan.digest is None:
        raise StateFileError(
            f"{path} carries no content digest (made by an older "
            "controlplane, or edited); run `cp plan --out` again"
        )
    if not plan.intact:
        raise StateFileError(
            f"{path} was changed after it was made (its content no longer "
            "matches its digest); nothing was applied: run `cp plan --out` "
            "again"
        )
    return plan


def _first_problem(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{where}: {err['msg']}" if where else err["msg"]
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON at line {exc.lineno}, column {exc.colno}"
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
