"""Durations as people write them in specs: ``90s``, ``45m``, ``2h59m``, ``3d`` or Slurm's ``D-HH:MM:SS``.

Everything inside the project works in whole seconds; this module is the only place that
knows the spellings, so specs, snapshots and the Slurm adapter agree on them.
"""

from __future__ import annotations

import re

_UNIT_SECONDS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_HUMAN = re.compile(r"(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
# Slurm: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_SLURM = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")

HINT = "write it like 90s, 45m, 2h59m, 3d or D-HH:MM:SS"
# the longest duration a spec may give: ten years (anything longer is a typo, and keeps
# every date computed from it within the calendar)
MAX_SECONDS = 3650 * 86400


def parse_duration(text: object) -> int:
    """Return the number of whole seconds ``text`` stands for; raise ValueError with a fix hint.

    A number is taken as seconds: what our own dumps hold. Spec files may not say one
    (specs/fields.py refuses it there, as it has no unit)."""
    if isinstance(text, bool):
        raise ValueError(f"expected a duration, got {text!r}; {HINT}")
    if isinstance(text, (int, float)):
        if text != text or text in (float("inf"), float("-inf")):
            raise ValueError(f"a duration must be finite, got {text}; {HINT}")
        if text < 0:
            raise ValueError(f"a duration cannot be negative ({text}); {HINT}")
        return _bounded(int(text), text)
    s = str(text).strip()
    if not s:
        raise ValueError(f"empty duration; {HINT}")
    if len(s) > 32:
        raise ValueError(f"{s[:20]!r}... is not a duration; {HINT}")
    m = _HUMAN.fullmatch(s.lower())
    if m and any(m.groups()) and s != s.lower():  # 1M: a minute, or a month meant?
        months = " (a minute; there is no unit of months)" if "M" in s else ""
        raise ValueError(f"{s!r}: units are lower case; did you mean {s.lower()!r}{months}?")
    if m and any(m.groups()):
        seconds = sum(
            int(v) * _UNIT_SECONDS[u] for v, u in zip(m.groups(), "wdhms", strict=True) if v
        )
        return _bounded(seconds, text)
    m = _SLURM.fullmatch(s)
    if m:
        days, a, b, c = m.groups()
        if days is not None:  # D-HH[:MM[:SS]]
            seconds = int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
        elif c is not None:  # HH:MM:SS
            seconds = int(a) * 3600 + int(b) * 60 + int(c)
        elif b is not None:  # MM:SS
            seconds = int(a) * 60 + int(b)
        else:
            seconds = int(a) * 60  # bare number: Slurm minutes
        return _bounded(seconds, text)
    raise ValueError(f"{text!r} is not a duration; {HINT}")


class TooLong(ValueError):
    """A duration beyond ``MAX_SECONDS``."""


def _bounded(seconds: int, text: object) -> int:
    if seconds > MAX_SECONDS:
        raise TooLong(f"{text!r} is longer than 3650 days, the most a duration may be")
    return seconds


def format_duration(seconds: int) -> str:
    """Compact human spelling (``2h59m``); the inverse of :func:`parse_duration`."""
    if seconds == 0:
        return "0s"
    parts = []
    rest = seconds
    for unit in "dhms":
        n, rest = divmod(rest, _UNIT_SECONDS[unit])
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts)


def format_slurm_time(seconds: int) -> str:
    """Slurm's ``D-HH:MM:SS`` (what ``sbatch --time`` takes), rounded up to whole minutes."""
    minutes = -(-seconds // 60)
    days, minutes = divmod(minutes, 1440)
    hours, minutes = divmod(minutes, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:00"
