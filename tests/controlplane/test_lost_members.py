"""A running gang that may not run with fewer replicas (minReplicas = replicas) but lost
some: a pod deleted by hand (user trial on Kubernetes). KAI completes such a gang (kai-17:
the missing task is placed, by preemption if need be); the plan said it "grows to 2 of 2
replicas" as if it were elastic."""

from __future__ import annotations

from datetime import timedelta

from controlplane.reconcile import plan
from specs.actions import Op, ReasonCode
from tests.builders import NOW, cluster, desired, project, workload
from tests.controlplane.test_interrupted_replacement import POOLS, _job, _world


def test_a_fixed_gang_that_lost_a_replica_completes_its_gang() -> None:
    d = desired(
        [cluster(pools=POOLS), project("p", gpus=16), workload("w", "p", gpus=4, replicas=2)]
    )
    world = _world(_job("7", d.workloads["p/w"].spec.digest, timedelta(hours=1), ["a100-02"]))
    [grown] = plan(d, world, now=NOW).actions
    assert (grown.op, grown.job, len(grown.replicas or [])) == (Op.RESIZE, "7", 2)
    assert grown.reason.code is ReasonCode.ELASTIC_EXPAND
    assert grown.reason.message.startswith(
        "completes its gang again: 2 of 2 replicas (it may not run with fewer)"
    ), grown.reason.message
    # an elastic one grows, as before
    elastic = desired(
        [
            cluster(pools=POOLS),
            project("p", gpus=16),
            workload("w", "p", gpus=4, replicas=2, minReplicas=1),
        ]
    )
    digest = elastic.workloads["p/w"].spec.digest
    [more] = plan(
        elastic, _world(_job("7", digest, timedelta(hours=1), ["a100-02"])), now=NOW
    ).actions
    assert more.reason.message.startswith("grows to 2 of 2 replicas"), more.reason.message
