"""What a GPU-hour costs: each cluster prices its GPU types (``gpuTypes.<t>.costPerGpuHour``),
and two clusters may price one type differently (an on-premises A100 against a cloud one).
Budgets in cost units and fairshare ``byCost`` count each run at its own cluster's price."""

from __future__ import annotations

from collections.abc import Mapping

from solvers.problem import Problem
from specs.snapshot import UsageRecord


class Prices:
    """Cost per GPU-hour by (cluster, GPU type). A run counts at the price recorded with it,
    the one in force when it ran (usage is charged as it accrues, as Slurm's is: a price
    change does not re-price the past); one recorded without it (a snapshot written by
    hand) at its cluster's price in the specs, and without its cluster at the highest
    price any cluster asks for its type."""

    def __init__(self, on: Mapping[tuple[str, str], float]) -> None:
        self.on = dict(on)
        self.highest: dict[str, float] = {}
        for (_, gpu_type), price in self.on.items():
            self.highest[gpu_type] = max(price, self.highest.get(gpu_type, price))

    @classmethod
    def of(cls, problem: Problem) -> Prices:
        return cls({(p.key[0], p.gpu_type): p.cost_per_gpu_hour for p in problem.pools.values()})

    def __call__(self, record: UsageRecord) -> float:
        if record.price is not None:
            return record.price
        gpu_type = record.gpu_type or ""
        price = self.on.get((record.cluster or "", gpu_type))
        return price if price is not None else self.highest.get(gpu_type, 0.0)
