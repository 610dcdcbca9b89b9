"""Whole GPUs left over after the over-quota split go to the largest remembered fractions;
fractions a hair apart (past usage bends them every minute) are a tie the queue holding
more GPUs now wins, so a leftover GPU stays where it runs."""

from __future__ import annotations

from solvers.fairshare import ShareNode, compute_fair_shares


def _projects(usage: dict[str, float], held: dict[str, float]) -> list[ShareNode]:
    return [
        ShareNode(
            id=name,
            deserved=8,
            limit=None,
            weight=1,
            priority=0,
            request=14,
            usage=usage.get(name, 0.0),
            order=(i, name),
            held=held.get(name, 0.0),
        )
        for i, name in enumerate("abc")
    ]


def test_a_hair_of_usage_does_not_move_a_leftover_gpu() -> None:
    """32 GPUs, three projects deserving 8 and wanting 14: 2.67 over quota each, two whole
    GPUs left. ``a`` used a little more than the others, so its fraction is a hair smaller;
    it holds a leftover GPU now and keeps it."""
    usage = {"a": 0.001}
    shares = compute_fair_shares(_projects(usage, {"a": 11, "b": 11, "c": 10}), total=32, k=1)
    assert shares == {"a": 11, "b": 11, "c": 10}
    # with nobody holding anything, the largest fractions win, as before
    shares = compute_fair_shares(_projects(usage, {}), total=32, k=1)
    assert shares == {"a": 10, "b": 11, "c": 11}


def test_fractions_further_apart_than_near_go_by_the_fraction() -> None:
    """Enough usage to move ``a``'s fraction by more than NEAR hands its leftover GPU to
    the others, whoever holds it now: time-based fairshare still moves it, only not by a
    hair every minute."""
    held = {"a": 11, "b": 11, "c": 10}
    usage = {"a": 0.2}
    shares = compute_fair_shares(_projects(usage, held), total=32, k=1)
    assert shares == {"a": 10, "b": 11, "c": 11}


def test_the_tie_goes_to_the_queue_using_the_gpu_not_the_biggest() -> None:
    """A tie goes to the queue holding the leftover GPU now (beyond its share so far), not
    to the one holding the most GPUs. 32 GPUs, ``a`` deserving 9 and the others 8: floors
    11, 10, 10 and one GPU left. ``a`` holds its 11 and no leftover, ``c`` holds 11 with the
    leftover: ``c`` keeps it, though its usage bent its fraction a hair below ``a``'s."""
    nodes = _projects({"c": 0.001}, {"a": 11, "b": 10, "c": 11})
    nodes[0].deserved, nodes[0].request = 9, 15
    shares = compute_fair_shares(nodes, total=32, k=1)
    assert shares == {"a": 11, "b": 10, "c": 11}
