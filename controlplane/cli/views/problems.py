"""How problems look: one line each for people, one JSON document with ``--json``.

A script that passed ``--json`` reads stdout as JSON whatever happened, so an error is a
document too: ``{"ok": false, "error": {"kind", "message"}}``, and spec problems add
every diagnostic with its file, line and column (``valid: false``). ``kind`` names the
error class in the project's tree (controlplane/errors.py, specs.diagnostics.SpecError,
adapters.base.AdapterError), plus ``usage`` for a mistyped command line.
"""

from __future__ import annotations

import re
from typing import Any

from adapters.base import AdapterError, TemporaryError
from specs.diagnostics import Diagnostic, SpecError


def diagnostic_json(d: Diagnostic) -> dict[str, Any]:
    return {
        "path": d.path,
        "line": d.line,
        "column": d.column,
        "severity": d.severity,
        "field": d.field,
        "message": d.message,
    }


def spec_error_summary(exc: SpecError) -> str:
    n, w = len(exc.diagnostics), len(exc.warnings)
    also = f" (and {w:,} warning{'s' if w != 1 else ''})" if w else ""
    return f"{n:,} error{'s' if n != 1 else ''} in the specs{also}; nothing was planned or applied"


def error_json(exc: BaseException, *, kind: str | None = None) -> dict[str, Any]:
    """The document for ``exc``; ``kind`` overrides the one read off its class."""
    doc: dict[str, Any] = {
        "ok": False,
        "error": {"kind": kind or error_kind(exc), "message": _message(exc)},
    }
    if isinstance(exc, SpecError):
        doc["valid"] = False
        doc["diagnostics"] = [diagnostic_json(d) for d in [*exc.diagnostics, *exc.warnings]]
    if isinstance(exc, AdapterError):
        doc["error"]["retry"] = isinstance(exc, TemporaryError)  # whether trying again may help
    return doc


def error_kind(exc: BaseException) -> str:
    """``StalePlanError`` -> ``stale-plan``; the base classes are ``control-plane``,
    ``adapter`` and ``spec``."""
    if isinstance(exc, SpecError):
        return "spec"
    if isinstance(exc, AdapterError):
        return "adapter"
    name = type(exc).__name__.removesuffix("Error") or "error"
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _message(exc: BaseException) -> str:
    if isinstance(exc, SpecError):
        return "; ".join([spec_error_summary(exc), *getattr(exc, "__notes__", ())])
    formatted = getattr(exc, "format_message", None)  # click's usage errors
    return str(formatted() if callable(formatted) else exc)
