"""The value types of the spec language, each with the bounds that keep everything finite.

A spec reaches a solver (counts must stay small enough to enumerate), a scheduler's
command line and a job script (text must be printable), and dates (durations must stay
within the calendar). The bounds are generous for any real cluster and stop what is only
a typo or an attack: ``nodes: 100000000`` would build a simulator of a hundred million
nodes, ``gpusPerNode: 3000`` would make the packing patterns explode, a quota of 2^63
overflows the solver's integers, ``walltime: .inf`` has no end date, and a checkpoint
signal of ``'USR1; rm -rf ~'`` or ``"USR1\\n"`` would reach a job script.

Every bound is checked at ``cp validate`` time, with the field's position in the file.
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from specs.durations import HINT, MAX_SECONDS, format_duration, parse_duration

# ------------------------------------------------------------------ names and text

NAME = r"^[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?$"
Name = Annotated[
    str, StringConstraints(pattern=NAME), WithJsonSchema({"type": "string", "pattern": NAME})
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# an argument may hold a program (python -c '...'): lines and tabs, nothing else unprintable
_ARG_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _printable(text: str, pattern: re.Pattern[str] = _CONTROL) -> str:
    if (found := pattern.search(text)) is not None:
        raise ValueError(
            f"contains the control character {found.group()!r}; only printable text may reach "
            "a job (remove escapes and control codes)"
        )
    return text


def visible(text: str) -> str:
    """``text`` on one line, with every control character spelled out (``\\n``,
    ``\\x1b``): for text from outside (an environment variable, a cluster's error) that a
    terminal or a log shows, where a line break could forge a record and an escape rewrite
    the screen."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _argument(text: str) -> str:
    return _printable(text, _ARG_CONTROL)


# text that ends up in a scheduler's command line, a job script or an object's labels
Text = Annotated[str, StringConstraints(max_length=4096), AfterValidator(_printable)]
# one element of a workload's argv: written into the job script quoted, never parsed by a
# shell; newlines and tabs are fine there (a program passed to python -c)
Argument = Annotated[str, StringConstraints(max_length=65536), AfterValidator(_argument)]
Argv = Annotated[list[Argument], Field(min_length=1, max_length=1024)]

# ------------------------------------------------------------------ counts

MAX_GPUS_PER_NODE = 128  # the largest nodes sold carry 16 GPUs; MIG slices multiply that by 8
MAX_NODES_PER_POOL = 100_000
MAX_REPLICAS = 10_000
MAX_QUOTA = 10_000_000
MAX_RANK = 1_000_000

GpuCount = Annotated[int, Field(ge=0, le=MAX_GPUS_PER_NODE)]
NodeCount = Annotated[int, Field(ge=0, le=MAX_NODES_PER_POOL)]
Replicas = Annotated[int, Field(ge=1, le=MAX_REPLICAS)]


def _some_gpus(count: int) -> int:
    if count < 1:
        raise ValueError(
            "a node pool needs at least 1 GPU per node: pools are GPU nodes, and no workload "
            "asking for GPUs could run on this one (leave nodes without GPUs out of the specs)"
        )
    return count


# a pool's nodes: GPU nodes by definition (a workload of gpus: 0 runs beside GPU work on them)
PoolGpus = Annotated[
    int,
    Field(ge=0, le=MAX_GPUS_PER_NODE),
    AfterValidator(_some_gpus),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_GPUS_PER_NODE}),
]
QuotaGpus = Annotated[int, Field(ge=0, le=MAX_QUOTA)]
Rank = Annotated[int, Field(ge=-MAX_RANK, le=MAX_RANK)]
Weight = Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False)]
Amount = Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)]  # money, GPU-hours, GiB

# ------------------------------------------------------------------ durations

_DURATION_SCHEMA = WithJsonSchema(
    {
        "type": "string",
        "description": "90s, 45m, 2h59m, 3d or Slurm's D-HH:MM:SS",
        "examples": ["45m", "2h59m", "3d", "1-12:00:00"],
    }
)


def _positive(seconds: int) -> int:
    if seconds <= 0:
        raise ValueError("must be positive (at least 1s); a zero duration would never run")
    return seconds


def _duration(value: object, info: ValidationInfo) -> int:
    """Seconds, from a spelling with a unit. A bare number in a spec has none: Slurm reads
    ``--time=90`` as minutes, and read as seconds the job was killed after 90 s, so it is
    refused there. Our own dumps read back (the load cache, the store's spec versions, a
    snapshot's copy) hold whole seconds, and are not validated as written."""
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and written(info)
        # .inf keeps its own message: a unit would not make it finite
        and (isinstance(value, int) or math.isfinite(value))
    ):
        raise ValueError(_no_unit(value, info.field_name))
    if isinstance(value, str) and value.strip().isdigit() and written(info):
        # Slurm's plain minutes: a third reading
        raise ValueError(_no_unit(int(value), info.field_name))
    return parse_duration(value)


def _no_unit(value: float, field: str | None) -> str:
    if not 0 < value <= MAX_SECONDS:  # (an int too large for a float compares all the same)
        return f"a bare number has no unit; {HINT}"
    if field == "half_life" and float(value).is_integer():  # a fair-share memory: days
        n = int(value)
        return f"{n} has no unit; write {n}d, {n}h or {n}m"
    if float(value).is_integer():
        n = int(value)
        longer = format_duration(n * 60)
        hint = f"{n}m or {n}s" if longer == f"{n}m" else f"{n}m, {n}s or {longer}"
    else:
        hint = HINT.removeprefix("write ")
    return f"{value} has no unit (minutes? seconds?); write {hint}"


Duration = Annotated[int, BeforeValidator(_duration), _DURATION_SCHEMA]
PositiveDuration = Annotated[
    int, BeforeValidator(_duration), AfterValidator(_positive), _DURATION_SCHEMA
]

# ------------------------------------------------------------------ signals

# what a job may be sent ahead of its end so that it checkpoints (Slurm --signal, timeout,
# Kubernetes preStop): the catchable signals people use for it
SIGNALS = ("USR1", "USR2", "TERM", "INT", "HUP", "QUIT", "ALRM", "URG", "WINCH", "XCPU")


def _signal(value: object) -> str:
    text = value if isinstance(value, str) else ""
    name = text.strip().upper().removeprefix("SIG")
    if name not in SIGNALS or text != text.strip():
        raise ValueError(
            f"{str(value)[:40]!r} is not a checkpoint signal; use one of {', '.join(SIGNALS)}"
        )
    return name


Signal = Annotated[
    str,
    BeforeValidator(_signal),
    WithJsonSchema({"type": "string", "enum": list(SIGNALS)}),
]


def at(field: str, message: str) -> ValueError:
    """An error of a check across fields, pointed at ``field`` (a dotted camelCase path
    below the model that raises it; specs/diagnostics.py moves the error there)."""
    return ValueError(f"@{field}: {message}")


def raise_all(found: list[ValueError], model: str) -> None:
    """Raise every error a model's checks across fields found (pydantic takes one
    ``ValueError`` per validator; a ``ValidationError`` carries them all)."""
    if len(found) == 1:
        raise found[0]
    if found:
        raise ValidationError.from_exception_data(
            model,
            [
                InitErrorDetails(
                    type=PydanticCustomError("value_error", "{message}", {"message": str(e)}),
                    loc=(),
                    input=None,
                )
                for e in found
            ],
        )


# the validation context's key for the fields of a document's spec that failed their
# schema and stand at their defaults (specs/broken_docs.py): checks across fields leave
# them out rather than judge the default
FAILED = "failed"


# the validation context's key marking a document as people write it (a spec file read by
# specs/loader.py), not one of our own dumps read back: only the former is held to the
# spellings of the spec language where a dump differs (durations: whole seconds there)
WRITTEN = "written"


def written(info: ValidationInfo) -> bool:
    """Whether the document being validated was written by people (see ``WRITTEN``)."""
    context = info.context
    return isinstance(context, dict) and context.get(WRITTEN) is True


def failed_fields(info: ValidationInfo) -> frozenset[str]:
    """The spec fields (camelCase) that failed and stand at their defaults, if any."""
    context = info.context
    failed = context.get(FAILED) if isinstance(context, dict) else None
    return failed if isinstance(failed, frozenset) else frozenset()
