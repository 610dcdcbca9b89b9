"""Which Kubernetes API failures are worth a retry and which are not.

The API server says it precisely: every error is an HTTP status with a ``metav1.Status``
body whose ``reason`` names the case. What the adapter makes of them:

===========================================  =========================================
failure                                      becomes
===========================================  =========================================
cannot connect, timeout, TLS failure         TemporaryError (the cluster is unreachable)
a certificate the kubeconfig's CA does not   PermanentError: the server answered, with
trust (CERTIFICATE_VERIFY_FAILED)            a certificate no retry makes trusted
429 TooManyRequests                          TemporaryError, delay from Retry-After
500, 502, 503, 504 (also 504 "Too large      TemporaryError
resource version")
409 Conflict (a stale write)                 TemporaryError: re-read and retry
410 Gone / Expired (a stale list or watch)   TemporaryError: start the list again
403 in a namespace being terminated, or a    TemporaryError: the namespace or its
service account not made yet                 service account is on its way
401, 403 (RBAC), 400, 404, 422 Invalid       PermanentError with the server's message
409 AlreadyExists                            not an error for a create with our
                                             deterministic name: see :func:`already_exists`
===========================================  =========================================

Callers retry temporary errors a few times with backoff (adapters/kubernetes/api.py)
before giving up with the TemporaryError, so a reconcile never stalls for long on a
cluster that is down.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import HTTPError

from adapters.base import AdapterError, PermanentError, TemporaryError

_TEMPORARY_STATUS = {409, 410, 429, 500, 502, 503, 504}


def status_body(exc: ApiException) -> dict[str, Any]:
    """The metav1.Status the server sent (empty when the body is not one)."""
    try:
        body = json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def reason(exc: ApiException) -> str:
    return str(status_body(exc).get("reason") or "")


def message(exc: ApiException) -> str:
    """The server's words, plus the fields it names for a 422 (the message alone can be a
    dump of the whole object)."""
    body = status_body(exc)
    text = str(body.get("message") or exc.reason or f"HTTP {exc.status}")
    causes = [
        f"{c.get('field')}: {c.get('message')}"
        for c in (body.get("details") or {}).get("causes") or []
        if c.get("field")
    ]
    if causes and exc.status == 422:
        text = "; ".join(causes)
    return text if len(text) <= 500 else text[:497] + "..."


def already_exists(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and exc.status == 409 and reason(exc) == "AlreadyExists"


def not_found(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and exc.status == 404


def retry_after(exc: ApiException) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if value is None:
        value = (status_body(exc).get("details") or {}).get("retryAfterSeconds")
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def classify(exc: BaseException, where: str) -> AdapterError:
    """The adapter error for a failed call; ``where`` says which (e.g. "create pod ns/x")."""
    if isinstance(exc, AdapterError):
        return exc
    if isinstance(exc, ConfigException):
        return PermanentError(f"kubeconfig: {exc}")
    if isinstance(exc, ApiException):
        text = f"{where}: {exc.status} {reason(exc) or exc.reason}: {message(exc)}"
        if exc.status in _TEMPORARY_STATUS and reason(exc) != "AlreadyExists":
            return TemporaryError(text, delay=retry_after(exc) or 5.0)
        if exc.status == 403 and _settling(exc):
            return TemporaryError(text, delay=2.0)
        return PermanentError(text)
    if "CERTIFICATE_VERIFY_FAILED" in str(exc):  # it answered: with a certificate not ours
        return PermanentError(
            f"{where}: the API server's certificate is not trusted by the kubeconfig's "
            f"certificate-authority (a wrong CA, or another server): {exc}"
        )
    if isinstance(exc, (HTTPError, OSError)):
        return TemporaryError(f"{where}: cannot reach the API server: {exc}", delay=10.0)
    return PermanentError(f"{where}: {type(exc).__name__}: {exc}")


def _settling(exc: ApiException) -> bool:
    """A 403 that goes away by itself: a namespace being deleted, or one so new that its
    default service account (needed by the ServiceAccount admission plugin) is not there."""
    text = message(exc)
    causes = [c.get("reason") for c in (status_body(exc).get("details") or {}).get("causes") or []]
    return (
        "NamespaceTerminating" in causes
        or "being terminated" in text
        or ("serviceaccount" in text and "not found" in text)
    )
