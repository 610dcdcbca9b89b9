"""The words every reason is made of: GPU counts, shapes, ordinals, times, pools."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the words need only a queue's name, kind and quota
    from solvers.problem import PoolKey


# ------------------------------------------------------------------ words


def gpus(x: float | None) -> str:
    """GPU counts as people write them: ``8``, not ``8.0``; ``-`` for none."""
    if x is None:
        return "-"
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"


def gpu_count(x: float) -> str:
    """``1 GPU``, ``2 GPUs``, ``0.50 GPUs``."""
    return f"{gpus(x)} GPU" if x == 1 else f"{gpus(x)} GPUs"


def shape(count: int, per_replica: int) -> str:
    unit = "GPU" if per_replica == 1 else "GPUs"
    return f"{count} x {per_replica} {unit}" if count > 1 else f"{per_replica} {unit}"


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th ... 11th, 12th, 13th ... 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pools(keys: Iterable[PoolKey]) -> str:
    return ", ".join(sorted({f"{c}/{p}" for c, p in keys}))
