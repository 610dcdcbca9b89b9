"""The kubelet the local control plane lacks, for tests and benchmarks (kwok-style).

Without a kubelet a bound pod stays Pending forever and a deleted one stays Terminating
forever (the API server only marks a bound pod for deletion; the kubelet finishes it).
:class:`FakeKubelet` plays the kubelet's part that the API shows, in a thread:

* a Pending pod bound to an existing node is admitted if its requests fit next to the
  pods running there (else it fails, phase Failed, reason ``OutOf<resource>``, as the
  real kubelet's admission does), then reported Running with a ``startTime``;
* a pod annotated ``controlplane.test/run-seconds: "N"`` ends N seconds after it
  started: Succeeded, or Failed with ``controlplane.test/exit-code`` if that is non-zero;
* a pod being deleted is removed for good (grace period 0), after ``deletion_delay``
  seconds (the time a real container takes to stop within its grace period).

One list + watch of bound pods in all namespaces, as raw JSON, relisted on 410 Gone; a
watch request lasts one second, so :meth:`stop` returns quickly.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from adapters.kubernetes.observation import quantity, timestamp

log = logging.getLogger(__name__)
RUN_SECONDS = "controlplane.test/run-seconds"
EXIT_CODE = "controlplane.test/exit-code"
BOUND = "spec.nodeName!="
Pod = dict[str, Any]


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def requests_of(pod: Pod) -> dict[str, int]:
    """A pod's requests per resource (limits where no request is given), summed over containers."""
    total: dict[str, int] = {}
    for c in pod["spec"].get("containers") or []:
        res = c.get("resources") or {}
        for key, value in ((res.get("limits") or {}) | (res.get("requests") or {})).items():
            total[key] = total.get(key, 0) + quantity(value)
    return total


class FakeKubelet:
    def __init__(
        self,
        api: client.ApiClient,
        *,
        check_capacity: bool = True,
        deletion_delay: float = 0.0,
        watch_timeout: int = 1,
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.check_capacity = check_capacity
        self.deletion_delay = deletion_delay
        self.watch_timeout = watch_timeout
        self.pods: dict[str, Pod] = {}  # uid -> the pod as last seen
        self.capacity: dict[str, dict[str, int]] = {}  # node -> allocatable
        self.deleting: dict[str, float] = {}  # uid -> when its deletion was first seen
        self.rv: str | None = None
        self.stats = {"started": 0, "rejected": 0, "finished": 0, "deleted": 0, "relists": 0}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> FakeKubelet:
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="fake-kubelet", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> FakeKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.rv is None:
                    self._relist()
                self._watch()
                self._tick()
            except ApiException as exc:
                if exc.status != 410:
                    log.warning("fake kubelet: API error %s %s", exc.status, exc.reason)
                    self._stop.wait(0.5)
                self.rv = None
            except Exception as exc:  # the API server restarting, a dropped connection
                log.warning("fake kubelet: %s: %s", type(exc).__name__, exc)
                self.rv = None
                self._stop.wait(0.5)

    def _relist(self) -> None:
        resp: Any = self.core.list_pod_for_all_namespaces(
            field_selector=BOUND, _preload_content=False
        )
        body = json.loads(resp.data)
        resp.release_conn()
        self.pods = {p["metadata"]["uid"]: p for p in body["items"]}
        self.rv = body["metadata"]["resourceVersion"]
        self.stats["relists"] += 1
        self._nodes()
        for pod in sorted(self.pods.values(), key=lambda p: p["metadata"]["creationTimestamp"]):
            self._handle(pod)

    def _watch(self) -> None:
        # a raw watch: the client's Watch(deserialize=False) fails on ERROR events (37.0.2)
        resp: Any = self.core.list_pod_for_all_namespaces(
            field_selector=BOUND,
            watch=True,
            resource_version=self.rv,
            timeout_seconds=self.watch_timeout,
            _request_timeout=self.watch_timeout + 10,
            _preload_content=False,
        )
        try:
            for line in iter_resp_lines(resp):  # type: ignore[no-untyped-call]
                if not line.strip():
                    continue
                event = json.loads(line)
                pod = event["object"]
                if event["type"] == "ERROR":
                    raise ApiException(status=pod.get("code"), reason=pod.get("message"))
                self.rv = pod["metadata"]["resourceVersion"]
                uid = pod["metadata"]["uid"]
                if event["type"] == "DELETED":
                    self.pods.pop(uid, None)
                    self.deleting.pop(uid, None)
                    continue
                self.pods[uid] = pod
                self._handle(pod)
                if self._stop.is_set():
                    break
        finally:
            resp.close()
            resp.release_conn()

    def _tick(self) -> None:
        """What time alone changes: run-seconds running out, delayed deletions, new nodes."""
        for pod in list(self.pods.values()):
            status = pod.get("status") or {}
            if (
                pod["metadata"].get("deletionTimestamp")
                or RUN_SECONDS in (pod["metadata"].get("annotations") or {})
                or (
                    status.get("phase") == "Pending"
                    and pod["spec"]["nodeName"] not in self.capacity
                )
            ):
                self._handle(pod)

    # ------------------------------------------------------------------ one pod

    def _handle(self, pod: Pod) -> None:
        meta, status = pod["metadata"], pod.get("status") or {}
        now = time.time()
        try:
            if meta.get("deletionTimestamp"):
                first = self.deleting.setdefault(meta["uid"], now)
                if now - first >= self.deletion_delay:
                    self._finish_deletion(pod)
                return
            phase = status.get("phase", "Pending")
            if phase == "Pending":
                node = pod["spec"]["nodeName"]
                if node not in self.capacity:
                    self._nodes()
                if node not in self.capacity:
                    return  # no such node: a real pod would wait for podgc
                why = self._does_not_fit(pod) if self.check_capacity else None
                if why is not None:
                    self._patch(pod, {"phase": "Failed", "reason": why[0], "message": why[1]})
                    self.stats["rejected"] += 1
                else:
                    self._patch(pod, self._running(pod, now))
                    self.stats["started"] += 1
            elif phase == "Running" and RUN_SECONDS in (meta.get("annotations") or {}):
                started = timestamp(status.get("startTime"))
                seconds = float(meta["annotations"][RUN_SECONDS])
                if started is not None and now >= started.timestamp() + seconds:
                    code = int((meta.get("annotations") or {}).get(EXIT_CODE, "0"))
                    self._patch(pod, self._ended(pod, now, code))
                    self.stats["finished"] += 1
        except ApiException as exc:
            if exc.status not in (404, 409):  # gone or changed meanwhile: the next event retries
                raise

    def _finish_deletion(self, pod: Pod) -> None:
        meta = pod["metadata"]
        options = client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=client.V1Preconditions(uid=meta["uid"])
        )
        try:
            self.core.delete_namespaced_pod(meta["name"], meta["namespace"], body=options)
            self.stats["deleted"] += 1
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise

    def _patch(self, pod: Pod, status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        resp: Any = self.core.patch_namespaced_pod_status(
            meta["name"], meta["namespace"], {"status": status}, _preload_content=False
        )
        updated = json.loads(resp.data)
        resp.release_conn()
        self.pods[updated["metadata"]["uid"]] = updated

    def _nodes(self) -> None:
        resp: Any = self.core.list_node(_preload_content=False)
        items = json.loads(resp.data)["items"]
        resp.release_conn()
        self.capacity = {
            n["metadata"]["name"]: {
                k: quantity(v)
                for k, v in ((n.get("status") or {}).get("allocatable") or {}).items()
            }
            for n in items
        }

    def _does_not_fit(self, pod: Pod) -> tuple[str, str] | None:
        node = pod["spec"]["nodeName"]
        used: dict[str, int] = {}
        for other in self.pods.values():  # running pods hold their resources, also while deleted
            if (
                other["spec"].get("nodeName") == node
                and (other.get("status") or {}).get("phase") == "Running"
            ):
                for key, value in requests_of(other).items():
                    used[key] = used.get(key, 0) + value
        capacity = self.capacity.get(node, {})
        for key, ask in sorted(requests_of(pod).items()):
            if ask and used.get(key, 0) + ask > capacity.get(key, 0):
                return (
                    f"OutOf{key}",
                    f"Pod Node didn't have enough resource: {key}, requested: {ask}, "
                    f"used: {used.get(key, 0)}, capacity: {capacity.get(key, 0)}",
                )
        return None

    # ------------------------------------------------------------------ statuses

    @staticmethod
    def _running(pod: Pod, now: float) -> dict[str, Any]:
        ts = _rfc3339(now)
        uid = pod["metadata"]["uid"]
        return {
            "phase": "Running",
            "startTime": ts,
            "hostIP": "127.0.0.1",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": ts}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "fake://" + c.get("image", ""),
                    "containerID": f"fake://{uid}/{c['name']}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": ts}},
                }
                for c in pod["spec"]["containers"]
            ],
        }

    @staticmethod
    def _ended(pod: Pod, now: float, code: int) -> dict[str, Any]:
        ts = _rfc3339(now)
        started = (pod.get("status") or {}).get("startTime") or ts
        return {
            "phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "fake://" + c.get("image", ""),
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": code,
                            "reason": "Completed" if code == 0 else "Error",
                            "startedAt": started,
                            "finishedAt": ts,
                        }
                    },
                }
                for c in pod["spec"]["containers"]
            ],
        }
