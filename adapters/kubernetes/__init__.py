"""The Kubernetes adapter: observe GPU nodes and pods, execute plan actions as Jobs and pods.

Modules, one concept each: :mod:`~adapters.kubernetes.api` (the official client, retries,
raw JSON lists), :mod:`~adapters.kubernetes.errors` (temporary or permanent),
:mod:`~adapters.kubernetes.identity` (labels, annotations and names that make an object
ours), :mod:`~adapters.kubernetes.request` (an action as a :class:`PodRequest`),
:mod:`~adapters.kubernetes.manifests` (the Job or pods for it),
:mod:`~adapters.kubernetes.room` (GPUs free on the target nodes before binding),
:mod:`~adapters.kubernetes.observation` (objects to snapshot nodes and jobs),
:mod:`~adapters.kubernetes.adapter` (:class:`KubernetesAdapter`); for tests and
benchmarks, :mod:`~adapters.kubernetes.localcluster` (a local API server from the
scripts in ``local/``) and :mod:`~adapters.kubernetes.fakekubelet` (the kubelet it lacks).

Only this package imports the ``kubernetes`` client (an import-linter contract).
"""

from adapters.kubernetes.adapter import KubernetesAdapter
from adapters.kubernetes.identity import Identity, identity_of, submission_name
from adapters.kubernetes.request import PodRequest

__all__ = ["Identity", "KubernetesAdapter", "PodRequest", "identity_of", "submission_name"]
