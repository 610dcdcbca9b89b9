"""What a GPU-hour costs: each cluster prices its GPU types (``gpuTypes.<t>.costPerGpuHour``),
and two clusters may price one type differently (an on-premises A100 against a cloud one).
Budgets in cost units and fairshare ``byCost`` count each run at its own cluster's price."""

from __future__ import annotations

from collections.abc import Mapping

from solvers.problem import Problem
from specs.snapshot import UsageRecord


class Prices:
    """Cost per GPU-hour by (cluster, GPU type). A run on a cluster no longer in the specs
    counts at the price recorded with it; one recorded without its cluster (a snapshot
    written by hand) at the highest price any cluster asks for its type."""

    def __init__(self, on: Mapping[tuple[str, str], float]) -> None:
        self.on = dict(on)
        self.highest: dict[str, float] = {}
        for (_, gpu_type), price in self.on.items():
            self.highest[gpu_type] = max(price, self.highest.get(gpu_type, price))

    @classmethod
    def of(cls, problem: Problem) -> Prices:
        return cls({(p.key[0], p.gpu_type): p.cost_per_gpu_hour for p in problem.pools.values()})

    def __call__(self, record: UsageRecord) -> float:
        gpu_type = record.gpu_type or ""
        price = self.on.get((record.cluster or "", gpu_type), record.price)
        return price if price is not None else self.highest.get(gpu_type, 0.0)
