"""Slurm hostlist expressions (``a100-[1-3,07-08],v100-1``) expanded to node names.

Every Slurm command prints node sets in this compressed form; the snapshot needs one
name per replica. ``scontrol show hostnames`` would do it, but one subprocess per job
is too slow for an observe over a thousand jobs, so this is done in-process.
"""

from __future__ import annotations

import itertools
import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in hostlist {text!r}")
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ValueError(f"unbalanced '[' in hostlist {text!r}")
    out.append(text[start:])
    return [part for part in out if part]


def _expand_ranges(body: str, expr: str) -> list[str]:
    values: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise ValueError(f"bad range {item!r} in hostlist {expr!r}")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise ValueError(f"descending range {item!r} in hostlist {expr!r}")
        width = len(lo)  # "07-09" keeps its zero padding: 07 08 09
        values.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return values


def expand(expr: str | None) -> list[str]:
    """All node names of a hostlist expression, in order; empty for ``""``/``(null)``/``None``."""
    if expr is None:
        return []
    expr = expr.strip()
    if expr in ("", "(null)", "None", "N/A"):
        return []
    names: list[str] = []
    for host in _split_top_level(expr):
        # "rack[1-2]-gpu[1-3]" is the product of its bracket groups
        pieces: list[list[str]] = []
        for literal, ranges in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", host):
            if literal:
                pieces.append([literal])
            if ranges:
                pieces.append(_expand_ranges(ranges, expr))
        names.extend("".join(combo) for combo in itertools.product(*pieces))
    return names
