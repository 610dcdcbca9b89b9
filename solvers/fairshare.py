"""Fair-share division of GPUs over the department/project tree (Run:ai / KAI semantics).

Level by level from the top, a parent's fair share is divided among its children:

1. every child first gets ``min(deserved, requestable)`` (requestable = min(request, limit)),
   even if that oversubscribes the parent — then nothing is left for step 2;
2. what remains goes to children by priority (rank), highest level first; within a level
   it is split in rounds in proportion to each unsatisfied child's over-quota weight
   (bent by past usage when ``k`` > 0). A child whose remaining request fits takes it all;
   the others take ``floor(share)`` and remember the fraction;
3. GPUs still left are handed out one each, largest remembered fraction first
   (ties: earlier-created, then name). Fractions less than :data:`NEAR` apart are a tie
   that the queue using the GPU now wins (it holds the most beyond its share so far):
   past usage bends the fractions a hair every minute, and the queue holding a leftover
   GPU uses it, so without this a leftover GPU went round the queues, one reclaim per
   reconcile, for ever.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

NEAR = 0.1  # of a GPU: fractions closer than this are a tie (step 3)


@dataclass
class ShareNode:
    """One queue (department or project) as the division sees it."""

    id: str
    deserved: float
    limit: float | None  # None = unlimited
    weight: float
    priority: int
    request: float  # allocated + pending GPUs of the whole subtree
    usage: float = 0.0  # past usage normalised by cluster capacity (time-based fairshare)
    k: float | None = None  # how strongly usage bends this queue's weight (None: the division's k)
    order: tuple[int, str] = (0, "")  # creation order, then name: breaks ties
    held: float = 0.0  # GPUs the subtree holds now: beyond its share, wins a tie (step 3)
    children: list[ShareNode] = field(default_factory=list)
    fair_share: float = 0.0

    @property
    def requestable(self) -> float:
        return self.request if self.limit is None else min(self.request, self.limit)

    def satisfied(self) -> bool:
        if self.request <= self.fair_share:
            return True
        return self.limit is not None and self.limit <= self.fair_share

    def remaining_request(self) -> float:
        return max(0.0, self.requestable - self.fair_share)


def divide(total: float, nodes: list[ShareNode], k: float = 1.0) -> float:
    """Set ``fair_share`` on ``nodes`` (siblings) out of ``total``; return what is left over."""
    for n in nodes:
        n.fair_share = min(n.deserved, n.requestable)
    remaining = total - sum(n.fair_share for n in nodes)
    if remaining <= 0:
        return 0.0
    for priority in sorted({n.priority for n in nodes}, reverse=True):
        if remaining <= 0:
            break
        level = [n for n in nodes if n.priority == priority]
        remaining, fractions = _divide_in_rounds(remaining, level, k)
        if remaining > 0 and fractions:
            remaining = _hand_out_fractions(remaining, fractions)
    return remaining


def _share_weights(level: list[ShareNode], k: float) -> dict[str, float]:
    total_weight = sum(n.weight for n in level if n.remaining_request() > 0)
    if total_weight == 0:
        return {}
    weights = {}
    for n in level:
        if n.satisfied():
            continue
        w = n.weight / total_weight
        # usage above one's normalised weight lowers the share, usage below raises it. KAI's
        # w + k(w - u) with one k for all; a project's own k scales only its usage term, so
        # a project with k = 0 is not penalised for ignoring usage
        bend = k if n.k is None else n.k
        weights[n.id] = max(0.0, w + k * w - bend * n.usage)
    return weights


def _divide_in_rounds(
    amount: float, level: list[ShareNode], k: float
) -> tuple[float, dict[str, tuple[float, ShareNode]]]:
    fractions: dict[str, tuple[float, ShareNode]] = {}
    while True:
        weights = _share_weights(level, k)
        weight_sum = sum(weights.values())
        if weight_sum == 0:
            break
        round_amount = amount
        another_round = False
        for n in level:
            if amount == 0:
                break
            if n.satisfied() or n.weight == 0 or n.id not in weights:
                continue
            share = round_amount * weights[n.id] / weight_sum
            wanted = n.remaining_request()
            if wanted <= share:
                give = wanted
                fractions.pop(n.id, None)
            else:
                give = math.floor(share)  # quotas are granted in whole GPUs
                if share - give > 0:
                    fractions[n.id] = (share - give, n)
            if give == 0:
                continue
            n.fair_share += give
            amount -= give
            another_round = another_round or wanted < share
        if not another_round or amount == 0:
            break
    return amount, fractions


def _hand_out_fractions(amount: float, fractions: dict[str, tuple[float, ShareNode]]) -> float:
    left = sorted(fractions.values(), key=lambda fn: (-fn[0], fn[1].order))
    while amount > 0 and left:
        # among the fractions within NEAR of the largest, the queue holding the most beyond
        # its share so far (using a leftover GPU now) goes first
        near = [fn for fn in left if left[0][0] - fn[0] < NEAR]
        first = min(near, key=lambda fn: (fn[1].fair_share - fn[1].held, -fn[0], fn[1].order))
        left.remove(first)
        give = min(1.0, amount)
        first[1].fair_share += give
        amount -= give
    return amount


def compute_fair_shares(roots: list[ShareNode], total: float, k: float = 1.0) -> dict[str, float]:
    """Divide ``total`` over the forest ``roots`` recursively; return fair share by node id."""
    out: dict[str, float] = {}

    def walk(siblings: list[ShareNode], amount: float) -> None:
        divide(amount, siblings, k)
        for n in siblings:
            out[n.id] = n.fair_share
            if n.children:
                walk(n.children, n.fair_share)

    walk(roots, total)
    return out
