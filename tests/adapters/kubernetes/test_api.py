"""Retries and error classes of the adapter's API door, with scripted failures.

The bodies are the API server's own (metav1.Status, as measured on the local 1.20 server):
409 AlreadyExists vs Conflict, 410 Expired continue tokens, 422 Invalid with causes, 429
with Retry-After, 5xx, 403 in a terminating namespace, and a refused connection.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, NewConnectionError, SSLError

from adapters.base import PermanentError, TemporaryError
from adapters.kubernetes.api import KubeAPI


def api_error(status: int, reason: str, message: str = "", **extra: Any) -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = json.dumps({"kind": "Status", "reason": reason, "message": message, **extra})
    exc.headers = extra.pop("headers", {})
    return exc


class Raw:
    """What ``_preload_content=False`` returns: the body, and a connection to give back."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()
        self.released = False

    def release_conn(self) -> None:
        self.released = True


def scripted(*outcomes: Any) -> Callable[..., Any]:
    """A client method returning (or raising) each outcome in turn."""
    it: Iterator[Any] = iter(outcomes)

    def call(*args: Any, **kwargs: Any) -> Any:
        out = next(it)
        if isinstance(out, BaseException):
            raise out
        return Raw(out) if isinstance(out, dict) else out

    return call


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def api(sleeps: list[float]) -> KubeAPI:
    return KubeAPI(lambda: None, sleep=sleeps.append)  # type: ignore[arg-type,return-value]


def test_429_and_5xx_are_retried_with_backoff(api: KubeAPI, sleeps: list[float]) -> None:
    busy = api_error(429, "TooManyRequests", "slow down", details={"retryAfterSeconds": 0.1})
    fn = scripted(busy, api_error(503, "ServiceUnavailable"), {"items": []})
    assert api.raw("list pods", fn) == {"items": []}
    assert sleeps == [0.1, 0.5], "Retry-After honoured, then exponential backoff"


def test_temporary_failures_give_up_after_a_few_attempts(api: KubeAPI, sleeps: list[float]) -> None:
    fn = scripted(*[api_error(500, "InternalError", "etcdserver: leader changed")] * 4)
    with pytest.raises(TemporaryError, match="list pods: 500 InternalError: etcdserver"):
        api.raw("list pods", fn)
    assert len(sleeps) == 3


def test_a_refused_connection_is_temporary(api: KubeAPI) -> None:
    refused = MaxRetryError(
        None, "/api", NewConnectionError(None, "[Errno 111] Connection refused")
    )  # type: ignore[arg-type]
    with pytest.raises(TemporaryError, match="cannot reach the API server"):
        api.raw("list nodes", scripted(*[refused] * 4))


def test_a_certificate_the_kubeconfig_does_not_trust_is_permanent(
    api: KubeAPI, sleeps: list[float]
) -> None:
    """The server answered, with a certificate signed by another CA than the kubeconfig's:
    no retry mends that (user trial: reported as "cannot reach", temporary, and retried)."""
    untrusted = MaxRetryError(
        None,  # type: ignore[arg-type]
        "/api/v1/nodes",
        SSLError(
            "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self signed "
            "certificate in certificate chain (_ssl.c:1006)"
        ),
    )
    with pytest.raises(PermanentError, match="certificate-authority") as caught:
        api.raw("list nodes", scripted(untrusted))
    assert "not trusted" in str(caught.value) and sleeps == []


def test_rejections_are_permanent_at_once(api: KubeAPI, sleeps: list[float]) -> None:
    invalid = api_error(
        422,
        "Invalid",
        'Pod "x" is invalid: spec.template: Invalid value: core.PodTemplateSpec{...huge...}',
        details={
            "causes": [
                {
                    "field": "spec.containers[0].resources.requests",
                    "message": "must be equal to nvidia.com/gpu limit",
                }
            ]
        },
    )
    with pytest.raises(PermanentError, match=r"requests: must be equal to nvidia.com/gpu limit"):
        api.raw("create pod", scripted(invalid))
    with pytest.raises(PermanentError, match="forbidden"):
        api.raw("create pod", scripted(api_error(403, "Forbidden", 'pods is forbidden: User "x"')))
    assert sleeps == []


def test_a_terminating_namespace_is_temporary(api: KubeAPI) -> None:
    terminating = api_error(
        403,
        "Forbidden",
        "unable to create new content in namespace cp-chem because it is being terminated",
        details={"causes": [{"reason": "NamespaceTerminating"}]},
    )
    with pytest.raises(TemporaryError, match="being terminated"):
        api.raw("create pod", scripted(*[terminating] * 4))


def test_create_of_an_existing_object_is_not_an_error(api: KubeAPI) -> None:
    exists = api_error(409, "AlreadyExists", 'pods "x" already exists')
    stale = api_error(409, "Conflict", "the object has been modified")
    pod = {"kind": "Pod", "metadata": {"name": "x", "namespace": "ns"}}
    api._client = object()  # type: ignore[assignment]
    core = type("Core", (), {"create_namespaced_pod": staticmethod(scripted(exists))})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(KubeAPI, "core", property(lambda self: core))
        assert api.create(pod) is False
        core.create_namespaced_pod = staticmethod(scripted(stale, {"kind": "Pod"}))  # type: ignore[attr-defined]
        assert api.create(pod) is True, "a Conflict is retried"


def test_an_expired_continue_token_restarts_the_list(api: KubeAPI) -> None:
    expired = api_error(410, "Expired", "The provided continue parameter is too old")
    pages = scripted(
        {"items": [1], "metadata": {"continue": "t1"}},
        expired,
        {"items": [1], "metadata": {"continue": "t1"}},
        {"items": [2], "metadata": {}},
    )
    assert api.list_all("list pods", pages) == [1, 2]


def test_a_kubeconfig_that_does_not_exist_is_named(tmp_path: Path) -> None:
    """It read "Invalid kube-config file. No configuration found.": neither which file
    nor that it is missing (user trial on Kubernetes)."""
    from kubernetes.config.config_exception import ConfigException

    from adapters.kubernetes.api import connect
    from specs.reach import KubernetesSettings

    missing = tmp_path / "does-not-exist"
    with pytest.raises(ConfigException, match=f"{missing} does not exist"):
        connect(KubernetesSettings(kubeconfig=str(missing)))
