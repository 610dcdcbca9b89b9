"""Room on the nodes before pods are bound there: wait for evicted pods to go, or refuse.

The adapter binds pods with ``spec.nodeName``, and the API server accepts that whatever
the node holds; it is the kubelet that rejects a pod that does not fit (phase Failed,
reason ``OutOfnvidia.com/gpu``). Within one apply the evictions run first, but a deleted
pod keeps its GPUs until its containers have stopped (its grace period: the checkpoint
grace for checkpointable work), so a beneficiary bound at once would be rejected.

So before creating bound pods the adapter asks :meth:`Room.reserve` whether the target
nodes have the GPUs free, counting every pod bound there that has not ended (ours,
others', and those being deleted). If they do not:

* if pods being deleted would make the room, it waits for them to go (polling the node,
  at most ``timeout`` seconds, then a TemporaryError: rerun the apply to continue);
* otherwise the cluster changed since the plan (a pod of somebody else's took the GPUs):
  a PermanentError at once (the same plan would fail again: a new plan is needed, which
  ``cp apply DIR`` or ``cp watch`` makes), nothing is created, and the next plan sees the
  new state.

Each check reads only the target nodes' pods (one small list per node, from the API
server's watch cache, indexed by node; a node that looks short is read again from etcd)
and the nodes' capacities (cached for ``ttl``).
Pods of the same submission (a rerun after a crash mid-gang) are not counted against it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from adapters.base import PermanentError, TemporaryError
from adapters.kubernetes.api import KubeAPI, Obj
from adapters.kubernetes.identity import SUBMISSION
from adapters.kubernetes.observation import holds, pod_gpus, quantity
from adapters.kubernetes.request import PodRequest


@dataclass
class _Held:
    """One pod's claim on a node."""

    owner: tuple[str, str]  # (namespace, submission label, or the pod's own name)
    gpus: int
    leaving: bool  # being deleted


@dataclass
class _Ledger:
    loaded: float
    capacity: dict[str, int] = field(default_factory=dict)  # node -> allocatable GPUs
    held: dict[str, list[_Held]] = field(default_factory=dict)  # node -> claims


class Room:
    def __init__(
        self,
        api: KubeAPI,
        resource: str,
        *,
        timeout: float = 120.0,
        poll: float = 0.2,
        ttl: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api = api
        self.resource = resource
        self.timeout = timeout
        self.poll = poll
        self.ttl = ttl
        self.clock = clock
        self.sleep = sleep
        self._ledger: _Ledger | None = None

    def reserve(self, req: PodRequest) -> None:
        """Return once every bound replica of ``req`` fits (next to what the rest of the
        cluster holds: pods of ``req``'s own submission do not count)."""
        wanted: Counter[str] = Counter()
        for node in req.nodes:
            if node is not None:
                wanted[node] += req.gpus
        if not wanted:
            return  # the scheduler places it
        me = (req.namespace, req.name)
        ledger = self._load(set(wanted))
        deadline = self.clock() + self.timeout
        for node in wanted:
            self._refresh(ledger, node, cached=True)
        while short := self._short(ledger, wanted, me):
            # the watch cache may lag behind a deletion made a moment ago: read for real
            for node in short:
                self._refresh(ledger, node, cached=False)
            short = self._short(ledger, wanted, me)
            if not short:
                return
            node, (free, leaving) = next(iter(sorted(short.items())))
            if free + leaving < wanted[node]:
                raise PermanentError(
                    f"node {node} has {free} GPUs free and the plan puts {wanted[node]} of "
                    f"{req.workload} there: the cluster changed since the plan; plan again"
                )
            if self.clock() > deadline:
                raise TemporaryError(
                    f"node {node}: {leaving} GPUs are still held by pods being deleted after "
                    f"{self.timeout:g}s; rerun `cp apply` to continue",
                    delay=10.0,
                )
            self.sleep(self.poll)

    def _short(
        self, ledger: _Ledger, wanted: Counter[str], me: tuple[str, str]
    ) -> dict[str, tuple[int, int]]:
        """Nodes without room: (GPUs free, GPUs held by pods being deleted) of each."""
        out = {}
        for node, need in wanted.items():
            claims = [h for h in ledger.held.get(node, []) if h.owner != me]
            free = ledger.capacity.get(node, 0) - sum(h.gpus for h in claims)
            if free < need:
                out[node] = (free, sum(h.gpus for h in claims if h.leaving))
        return out

    def _load(self, nodes: set[str]) -> _Ledger:
        """Node capacities, read again after ``ttl`` or when a node is new to us."""
        ledger = self._ledger
        if (
            ledger is None
            or self.clock() - ledger.loaded > self.ttl
            or nodes - set(ledger.capacity)
        ):
            ledger = _Ledger(loaded=self.clock())
            for n in self.api.nodes():
                alloc = (n.get("status") or {}).get("allocatable") or {}
                ledger.capacity[n["metadata"]["name"]] = quantity(alloc.get(self.resource))
            self._ledger = ledger
        return ledger

    def _refresh(self, ledger: _Ledger, node: str, *, cached: bool) -> None:
        """The node's pods. ``cached``: from the API server's watch cache, indexed by node,
        so it costs the same on a cluster of ten pods or of a hundred thousand (but may lag
        a few milliseconds); else a consistent read."""
        ledger.held[node] = []
        version = "0" if cached else ""
        for p in self.api.pods(field_selector=f"spec.nodeName={node}", resource_version=version):
            self._book(ledger, p)

    def _book(self, ledger: _Ledger, pod: Obj) -> None:
        gpus = pod_gpus(pod, self.resource)
        if not gpus or not holds(pod):
            return
        meta = pod["metadata"]
        owner = (meta["namespace"], (meta.get("labels") or {}).get(SUBMISSION) or meta["name"])
        claim = _Held(owner, gpus, leaving=bool(meta.get("deletionTimestamp")))
        ledger.held.setdefault(pod["spec"]["nodeName"], []).append(claim)
