"""Slurm reservations read into the snapshot: the windows in which a node starts no job
of ours (an announced maintenance among them).

The sample is what ``scontrol -o show reservation`` printed (under ``TZ=UTC``) on this
repository's local Slurm 22.05: a maintenance that starts in five minutes (INACTIVE: sinfo
still shows the node idle), one under way (sinfo: ``maint``), a plain reservation under
way (sinfo: ``reserved``), a day-long maintenance of two nodes, and a year-long one made
with ``Duration=UNLIMITED`` and no flags.
"""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.slurm.observation import build_node
from adapters.slurm.parse import parse_sinfo
from adapters.slurm.reservations import node_windows, parse_reservations
from specs.models import NodePool
from specs.snapshot import Reservation

SHOWN = (
    "ReservationName=maint StartTime=2026-11-28T05:53:23 EndTime=2026-11-28T06:53:23 "
    "Duration=01:00:00 Nodes=a100-1 NodeCnt=1 CoreCnt=64 Features=(null) "
    "PartitionName=(null) Flags=MAINT,IGNORE_JOBS,SPEC_NODES TRES=cpu=64 Users=root "
    "Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) "
    "Watts=n/a MaxStartDelay=(null)\n"
    "ReservationName=now1 StartTime=2026-11-28T05:48:23 EndTime=2026-11-28T06:48:23 "
    "Duration=01:00:00 Nodes=v100-1 NodeCnt=1 CoreCnt=32 Features=(null) "
    "PartitionName=(null) Flags=MAINT,IGNORE_JOBS,SPEC_NODES TRES=cpu=32 Users=root "
    "Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) "
    "Watts=n/a MaxStartDelay=(null)\n"
    "ReservationName=plain StartTime=2026-11-28T05:48:23 EndTime=2026-11-28T06:48:23 "
    "Duration=01:00:00 Nodes=v100-2 NodeCnt=1 CoreCnt=32 Features=(null) "
    "PartitionName=(null) Flags=SPEC_NODES TRES=cpu=32 Users=root Groups=(null) "
    "Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a "
    "MaxStartDelay=(null)\n"
    "ReservationName=multi StartTime=2026-11-28T06:48:36 EndTime=2026-11-29T06:48:36 "
    "Duration=1-00:00:00 Nodes=a100-[1-2] NodeCnt=2 CoreCnt=128 Features=(null) "
    "PartitionName=(null) Flags=MAINT,IGNORE_JOBS,SPEC_NODES TRES=cpu=128 Users=root "
    "Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) "
    "Watts=n/a MaxStartDelay=(null)\n"
    "ReservationName=part StartTime=2026-11-28T07:48:36 EndTime=2027-11-28T07:48:36 "
    "Duration=365-00:00:00 Nodes=v100-1 NodeCnt=1 CoreCnt=32 Features=(null) "
    "PartitionName=gpu-v100 Flags= TRES=cpu=32 Users=root Groups=(null) Accounts=(null) "
    "Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)\n"
)
NONE = "No reservations in the system\n"  # rc 0, on stdout

POOLS = [
    NodePool(name="a100", gpu_type="a100_80", gpus_per_node=8, partition="gpu-a100"),
    NodePool(name="v100", gpu_type="v100", gpus_per_node=4, partition="gpu-v100"),
]


def at(
    day: int, hour: int, minute: int, second: int, year: int = 2026, month: int = 11
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_every_reservation_is_read_with_its_window_nodes_and_whether_it_is_maintenance() -> None:
    rows = parse_reservations(SHOWN)
    assert [(r.name, r.start, r.end, r.nodes, r.maintenance) for r in rows] == [
        ("maint", at(28, 5, 53, 23), at(28, 6, 53, 23), ("a100-1",), True),
        ("now1", at(28, 5, 48, 23), at(28, 6, 48, 23), ("v100-1",), True),
        ("plain", at(28, 5, 48, 23), at(28, 6, 48, 23), ("v100-2",), False),
        ("multi", at(28, 6, 48, 36), at(29, 6, 48, 36), ("a100-1", "a100-2"), True),
        ("part", at(28, 7, 48, 36), at(28, 7, 48, 36, year=2027), ("v100-1",), False),
    ]
    assert parse_reservations(NONE) == [] and parse_reservations("") == []


def test_each_node_carries_its_windows_earliest_first() -> None:
    windows = node_windows(parse_reservations(SHOWN))
    assert windows["a100-1"] == [
        Reservation(name="maint", start=at(28, 5, 53, 23), end=at(28, 6, 53, 23), maintenance=True),
        Reservation(name="multi", start=at(28, 6, 48, 36), end=at(29, 6, 48, 36), maintenance=True),
    ]
    assert [w.name for w in windows["v100-1"]] == ["now1", "part"]
    assert [w.name for w in windows["a100-2"]] == ["multi"]


def test_an_announced_maintenance_reaches_the_snapshot_node_that_still_shows_idle() -> None:
    """Until the window begins sinfo says ``idle``: only the reservation tells the plan."""
    (row,) = parse_sinfo(
        "\x1ea100-1\x1fgpu-a100\x1fidle\x1fgpu:a100_80:8(S:0)\x1fup\x1f2-00:00:00\n"
    )
    node = build_node(row, POOLS, node_windows(parse_reservations(SHOWN)))
    assert node.state == "idle" and node.schedulable
    assert [w.name for w in node.reservations] == ["maint", "multi"]
    dumped = node.model_dump(mode="json", by_alias=True)
    assert dumped["reservations"][0] == {
        "name": "maint",
        "start": "2026-11-28T05:53:23Z",
        "end": "2026-11-28T06:53:23Z",
        "maintenance": True,
    }
    plain = build_node(row, POOLS, {})
    assert "reservations" not in plain.model_dump(mode="json", by_alias=True)
