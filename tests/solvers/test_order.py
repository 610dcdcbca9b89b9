"""KAI's ordering rules (solvers/order.py) as literal keys: ``victim_queue_order`` is
worked out by the search's fast form (``victim_queue_keys``), so it is checked here
against written-out keys, not against itself."""

from __future__ import annotations

from solvers.order import queue_order, victim_queue_order
from solvers.problem import Queue

Q = Queue("project:p", "p", "project", None, deserved=8.0, limit=None, weight=1.0, priority=100)


def test_victim_queue_order_reads_the_queue_order_backwards() -> None:
    # above deserved (1), rank 100, has a share, (12 - 4) / 10 with the victims taken,
    # 12 / 10 before, the share, creation rank
    assert victim_queue_order(Q, allocated=12, taken=4, share=10, rank=3) == (
        1,
        -100,
        0,
        0.8,
        1.2,
        10,
        3,
    )
    # within deserved: 0 first; no share at all: allocation scaled far above any share
    assert victim_queue_order(Q, allocated=6, taken=2, share=0, rank=1) == (
        0,
        -100,
        1,
        4000,
        6000,
        0,
        1,
    )
    assert victim_queue_order(Q, allocated=0, taken=0, share=0, rank=1)[2] == 0


def test_queue_order_counts_the_job_against_deserved() -> None:
    assert queue_order(Q, allocated=6, request=2, share=10, rank=2) == (0, -100, 0, 0.8, 0.6, 10, 2)
    assert queue_order(Q, allocated=6, request=4, share=10, rank=2)[0] == 1
    assert queue_order(Q, allocated=3, request=1, share=0, rank=2) == (0, -100, 1, 3000, 3000, 0, 2)
