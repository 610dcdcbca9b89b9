"""A run's usage as snapshot records: its GPU-hours cut at month boundaries (budgets are
monthly) and where its GPU type's price changed (each piece at the price of its day)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from controlplane.store import pricebook
from specs.snapshot import UsageRecord

if TYPE_CHECKING:
    from controlplane.store.runs import Run


def monthly(row: Run, book: pricebook.Book) -> list[UsageRecord]:
    """The run's GPU-hours, cut at month boundaries (a budget is per calendar month) and
    where its GPU type's price changed (each piece at the price of its day)."""
    out = []
    start, end = row.started_at, row.ended_at or row.last_seen  # aware, as read
    while start < end:
        month_end = min(end, next_month(start))
        for low, stop, price in pricebook.stretches(
            book, row.cluster, row.gpu_type, start, month_end, row.price
        ):
            out.append(
                UsageRecord(
                    project=row.project,
                    gpu_hours=row.gpus * (stop - low).total_seconds() / 3600,
                    ended_at=stop,
                    gpu_type=row.gpu_type,
                    cluster=row.cluster,
                    price=price,
                    started_at=low,
                )
            )
        start = month_end
    return out


def next_month(dt: datetime) -> datetime:
    """The start of the month after ``dt``'s, in its zone."""
    year, month = (dt.year + 1, 1) if dt.month == 12 else (dt.year, dt.month + 1)
    return datetime(year, month, 1, tzinfo=dt.tzinfo)
