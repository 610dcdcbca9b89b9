"""What a GPU-hour cost, and since when: the prices observations saw, per (cluster, GPU type).

Slurm charges usage as it accrues, at the billing weights of the day. So does the store:
a change of a GPU type's ``costPerGpuHour`` counts from the first observation that sees
it (as an edit to the specs does), and a run's GPU-hours are cut where the price changed,
each stretch at its own price. Re-pricing what was used before would put a project over
its cost budget, or back under it, for use it made at the old price.

The book is kept in the store's meta table as JSON: ``{"cluster/type": [[since, price],
…]}``, oldest first. Before its first entry a type costs that entry's price (runs from
before the book was kept).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

KEY = "prices"  # the meta row that holds the book

Book = dict[str, list[tuple[datetime, float]]]


def _name(cluster: str, gpu_type: str) -> str:
    return f"{cluster}/{gpu_type}"


def loads(text: str | None) -> Book:
    if not text:
        return {}
    raw: dict[str, list[list[object]]] = json.loads(text)
    return {
        k: [(datetime.fromisoformat(str(t)), float(str(p))) for t, p in v] for k, v in raw.items()
    }


def dumps(book: Book) -> str:
    return json.dumps(
        {k: [[t.isoformat(), p] for t, p in v] for k, v in sorted(book.items())}, sort_keys=True
    )


def noted(book: Book, prices: Mapping[tuple[str, str], float], now: datetime) -> Book:
    """``book`` with each price that differs from the last one known for its (cluster,
    type) entered as of ``now``; None when nothing changed."""
    out = {k: list(v) for k, v in book.items()}
    changed = False
    for (cluster, gpu_type), price in sorted(prices.items()):
        entries = out.setdefault(_name(cluster, gpu_type), [])
        if not entries or (entries[-1][1] != price and entries[-1][0] < now):
            entries.append((now, price))
            changed = True
        elif entries[-1][1] != price:  # seen again as of the same moment: the later word
            entries[-1] = (entries[-1][0], price)
            changed = True
    return out if changed else book


def stretches(
    book: Book,
    cluster: str,
    gpu_type: str | None,
    start: datetime,
    end: datetime,
    fallback: float | None,
) -> list[tuple[datetime, datetime, float | None]]:
    """``[start, end)`` cut where the price of ``gpu_type`` on ``cluster`` changed, each
    piece with the price in force then (``fallback`` where the book knows none)."""
    entries = book.get(_name(cluster, gpu_type or ""), [])
    if not entries:
        return [(start, end, fallback)]
    price = entries[0][1]
    out: list[tuple[datetime, datetime, float | None]] = []
    for since, next_price in entries:
        if since <= start or next_price == price:
            price = next_price
            continue
        if since >= end:
            break
        out.append((start, since, price))
        start, price = since, next_price
    out.append((start, end, price))
    return out
