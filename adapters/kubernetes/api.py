"""The adapter's one door to the API server: the official client, retries, raw JSON.

Every call goes through :meth:`KubeAPI.call`, which retries what errors.py calls
temporary (429 with its Retry-After, 5xx, 409 Conflict, 410 Gone, a refused connection)
a few times with exponential backoff and then raises the TemporaryError; anything else is
a PermanentError at once. Lists are read as raw JSON, page by page (500 a page), because
the client's model objects cost about 80% of a list's time; a list whose continue token
expired (410) starts again from the top. Creates return whether the object was made or
was there already (409 AlreadyExists: our names are deterministic, so that is a rerun).

The connection is made on first use, from the cluster's ``kubernetes`` settings: the
kubeconfig file (``kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``) and its
``context``, or the pod's service account when there is no kubeconfig at all.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from adapters.base import TemporaryError
from adapters.kubernetes.errors import already_exists, classify, not_found
from specs.reach import KubernetesSettings

Obj = dict[str, Any]
PAGE = 500
TIMEOUT = (5.0, 60.0)  # connect, read (seconds)


def connect(settings: KubernetesSettings) -> client.ApiClient:
    """An ApiClient for the cluster the settings name (raises ConfigException if none)."""
    path = settings.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    path = os.path.expanduser(path.split(os.pathsep)[0])
    cfg = client.Configuration()
    if settings.kubeconfig and not Path(path).exists():
        raise ConfigException(f"{path} does not exist (spec.kubernetes.kubeconfig)")
    if settings.kubeconfig or Path(path).exists():
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, context=settings.context, client_configuration=cfg
        )
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        raise ConfigException(
            f"no kubeconfig ({path} does not exist; set spec.kubernetes.kubeconfig or "
            "KUBECONFIG) and not running inside a cluster"
        )
    cfg.retries = 1  # urllib3's own retries; ours (with backoff) are in KubeAPI.call
    return client.ApiClient(cfg)


def _expired(exc: BaseException) -> bool:
    """410 Gone: a continue token (or resourceVersion) too old; the list must start over."""
    return isinstance(exc, ApiException) and exc.status == 410


class KubeAPI:
    """Core and batch calls with retries. ``factory`` makes the ApiClient on first use."""

    def __init__(
        self,
        factory: Callable[[], client.ApiClient],
        *,
        attempts: int = 4,
        backoff: float = 0.25,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._factory = factory
        self._client: client.ApiClient | None = None
        self.attempts = attempts
        self.backoff = backoff
        self.sleep = sleep

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self._api())

    @property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self._api())

    def _api(self) -> client.ApiClient:
        if self._client is None:
            try:
                self._client = self._factory()
            except Exception as exc:
                raise classify(exc, "connect") from exc
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()  # type: ignore[no-untyped-call]
            self._client = None

    # ------------------------------------------------------------------ the retry loop

    def call(self, where: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, retried while the failure is temporary."""
        kwargs.setdefault("_request_timeout", TIMEOUT)
        for attempt in range(self.attempts):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if already_exists(exc) or not_found(exc) or _expired(exc):
                    raise  # the caller's answer, not a failure
                error = classify(exc, where)
                if not isinstance(error, TemporaryError) or attempt == self.attempts - 1:
                    raise error from exc
                self.sleep(min(error.delay, self.backoff * 2**attempt))
        raise AssertionError("unreachable")

    def raw(self, where: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        """A call whose JSON answer is parsed here rather than into client models."""
        resp = self.call(where, fn, *args, _preload_content=False, **kwargs)
        try:
            return dict(json.loads(resp.data))
        finally:
            resp.release_conn()

    # ------------------------------------------------------------------ reads

    def list_all(self, where: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Obj]:
        """Every item of a list call, page by page; restarted when a continue token expires."""
        for _ in range(3):
            items: list[Obj] = []
            token: str | None = None
            try:
                while True:
                    page = self.raw(where, fn, *args, limit=PAGE, _continue=token, **kwargs)
                    items += page.get("items") or []
                    token = (page.get("metadata") or {}).get("continue") or None
                    if not token:
                        return items
            except Exception as exc:
                if not _expired(exc):
                    raise
        raise TemporaryError(f"{where}: the list kept expiring (410 Gone); try again")

    def get(self, where: str, fn: Callable[..., Any], *args: Any) -> Obj | None:
        try:
            return self.raw(where, fn, *args)
        except Exception as exc:
            if not_found(exc):
                return None
            raise

    def nodes(self) -> list[Obj]:
        return self.list_all("list nodes", self.core.list_node)

    def pods(
        self, label_selector: str = "", field_selector: str = "", resource_version: str = ""
    ) -> list[Obj]:
        """Pods of every namespace; ``resource_version="0"``: from the watch cache."""
        extra = {"resource_version": resource_version} if resource_version else {}
        return self.list_all(
            "list pods",
            self.core.list_pod_for_all_namespaces,
            label_selector=label_selector,
            field_selector=field_selector,
            **extra,
        )

    def pods_in(self, namespace: str, label_selector: str) -> list[Obj]:
        return self.list_all(
            f"list pods in {namespace}",
            self.core.list_namespaced_pod,
            namespace,
            label_selector=label_selector,
        )

    def jobs(self, label_selector: str) -> list[Obj]:
        return self.list_all(
            "list jobs", self.batch.list_job_for_all_namespaces, label_selector=label_selector
        )

    def pod(self, namespace: str, name: str) -> Obj | None:
        return self.get(
            f"read pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace
        )

    def job(self, namespace: str, name: str) -> Obj | None:
        return self.get(
            f"read job {namespace}/{name}", self.batch.read_namespaced_job, name, namespace
        )

    # ------------------------------------------------------------------ writes

    def create(self, body: Obj) -> bool:
        """Create a Pod or a Job; False when one of that name was there already."""
        meta = body["metadata"]
        ns, name, kind = meta["namespace"], meta["name"], body["kind"]
        fn = self.batch.create_namespaced_job if kind == "Job" else self.core.create_namespaced_pod
        try:
            self.raw(f"create {kind.lower()} {ns}/{name}", fn, ns, body)
        except Exception as exc:
            if already_exists(exc):
                return False
            raise
        return True

    def delete_pod(self, namespace: str, name: str) -> bool:
        return self._delete(
            f"delete pod {namespace}/{name}", self.core.delete_namespaced_pod, name, namespace
        )

    def delete_job(self, namespace: str, name: str) -> bool:
        """Deleted with Foreground propagation: the Job stays (being deleted) until its
        pods are gone. Without a policy batch/v1 would orphan the pods."""
        return self._delete(
            f"delete job {namespace}/{name}",
            self.batch.delete_namespaced_job,
            name,
            namespace,
            propagation_policy="Foreground",
        )

    def _delete(self, where: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> bool:
        try:
            self.raw(where, fn, *args, **kwargs)
        except Exception as exc:
            if not_found(exc):
                return False
            raise
        return True

    def has_namespace(self, name: str) -> bool:
        return self.get(f"read namespace {name}", self.core.read_namespace, name) is not None

    def ensure_namespace(self, name: str, labels: dict[str, str]) -> bool:
        """Create the namespace if it is missing; True if this call made it."""
        if self.has_namespace(name):
            return False
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels},
        }
        try:
            self.raw(f"create namespace {name}", self.core.create_namespace, body)
        except Exception as exc:
            if already_exists(exc):
                return False
            raise
        return True

    def may(self, verb: str, resource: str, namespace: str | None = None) -> bool:
        """Whether these credentials may ``verb`` the ``resource`` ("pods", "jobs.batch",
        "namespaces") in ``namespace`` (None: cluster-wide), as the API server's authorizer
        answers a SelfSubjectAccessReview."""
        name, _, group = resource.partition(".")
        attrs: Obj = {"verb": verb, "resource": name, "group": group}
        if namespace is not None:
            attrs["namespace"] = namespace
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        }
        review = client.AuthorizationV1Api(self._api())
        answer = self.raw(
            f"may I {verb} {resource}", review.create_self_subject_access_review, body
        )
        return bool((answer.get("status") or {}).get("allowed"))
