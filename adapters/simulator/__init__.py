"""The embedded simulator: a cluster made from a Cluster spec's node pools.

:mod:`~adapters.simulator.engine` is the pure scheduler (what the reconciler's virtual
world uses); :mod:`~adapters.simulator.adapter` keeps its state in a file for the CLI.
"""

from adapters.simulator.adapter import SimulatorAdapter
from adapters.simulator.engine import SimulatedCluster, node_name, nodes_from_spec

__all__ = ["SimulatedCluster", "SimulatorAdapter", "node_name", "nodes_from_spec"]
