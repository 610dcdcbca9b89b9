"""Slurm reservations: the windows in which a node starts none of our jobs.

Sites announce maintenance ahead of time (``scontrol create reservation ... Flags=maint``).
Until the window begins sinfo shows the node ``idle``; once it has, ``maint`` (or
``reserved`` for any other reservation). Our jobs never ask for a reservation
(``--reservation``), so Slurm starts none of them on a reserved node whose time limit
would run into the window: pinned there (``--nodelist``), it waits "ReqNodeNotAvail,
May be reserved for other job" through the whole window. The snapshot carries each
node's windows, and the plan places work where it fits in time.

Slurm 22.05 has no ``scontrol --json``: ``scontrol -o show reservation`` prints one
``Key=Value`` line per reservation (times zone-less, UTC under the adapter's ``TZ``), or
"No reservations in the system". A reservation is taken as holding its whole nodes
(one of some cores or GPUs of a node only, ``CoreCnt``/``TRES``, is rare for
maintenance and read the same, which errs on the side of not pinning work there).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from adapters.slurm import hostlist
from adapters.slurm.parse import parse_time
from specs.snapshot import Reservation

COMMAND = ("scontrol", "-o", "show", "reservation")


@dataclass(frozen=True)
class ReservationRow:
    name: str
    start: datetime
    end: datetime | None
    nodes: tuple[str, ...]
    maintenance: bool


def parse_reservations(text: str) -> list[ReservationRow]:
    """Every reservation that holds nodes, in Slurm's order."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("ReservationName="):
            continue
        fields = dict(token.partition("=")[::2] for token in line.split())
        start = parse_time(fields.get("StartTime", ""))
        if start is None:
            continue
        try:
            nodes = tuple(hostlist.expand(fields.get("Nodes", "").strip()))
        except ValueError:
            continue  # not a node list this parser knows: nothing to pin work away from
        if nodes:
            flags = {f.strip().upper() for f in fields.get("Flags", "").split(",")}
            rows.append(
                ReservationRow(
                    name=fields["ReservationName"],
                    start=start,
                    end=parse_time(fields.get("EndTime", "")),
                    nodes=nodes,
                    maintenance="MAINT" in flags,
                )
            )
    return rows


def node_windows(rows: Iterable[ReservationRow]) -> dict[str, list[Reservation]]:
    """Node name -> its reservations as the snapshot carries them, earliest first."""
    out: dict[str, list[Reservation]] = {}
    for row in rows:
        window = Reservation(
            name=row.name, start=row.start, end=row.end, maintenance=row.maintenance
        )
        for node in row.nodes:
            out.setdefault(node, []).append(window)
    for windows in out.values():
        windows.sort(key=lambda w: (w.start, w.name))
    return out
