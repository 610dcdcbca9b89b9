"""Start and stop the throw-away local Kubernetes control plane of the tests and benchmarks.

The shell scripts in ``local/`` do the work: ``build-k8s.sh`` builds kube-apiserver,
kube-controller-manager and kube-scheduler v1.20 from Debian's source package, once per
machine, into a cache outside the repository keyed on the script's own hash (about four
minutes cold on two cores, then instant); ``start-local-k8s.sh`` runs etcd, the API
server and the controller manager on 127.0.0.1 (no kubelet, no scheduler: the control
plane binds pods itself); ``stop-local-k8s.sh`` stops them by pid file. This module is
their Python handle, plus fake GPU nodes (a Node object with ``nvidia.com/gpu`` in its
status, Ready, untainted). A development tool, not part of the adapter's runtime path.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client, config

SCRIPTS = Path(__file__).with_name("local")
GPU_PRODUCT = "nvidia.com/gpu.product"


class LocalKubernetesError(RuntimeError):
    pass


def build(timeout: float = 1800.0) -> Path:
    """The folder of binaries: built (once, cached) if missing."""
    try:
        done = subprocess.run(
            ["bash", str(SCRIPTS / "build-k8s.sh")],
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise LocalKubernetesError(f"build-k8s.sh took longer than {timeout:g}s") from exc
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise LocalKubernetesError(
            f"build-k8s.sh failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    return Path(lines[-1])


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports() -> tuple[int, int]:
    """An API server port and an etcd client port whose +1 (etcd's peer port) is free too."""
    rng = random.Random()
    for _ in range(200):
        # clear of the Slurm test clusters' port bases (26817, 46817 and their nodes)
        api, etcd = rng.randrange(30000, 36000), rng.randrange(36000, 40000, 2)
        if _free(api) and _free(etcd) and _free(etcd + 1):
            return api, etcd
    raise LocalKubernetesError("no free ports between 30000 and 40000")


@dataclass
class LocalKubernetes:
    state_dir: Path
    port: int = 0  # 0: a free port, chosen at start
    etcd_port: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    def _env(self) -> dict[str, str]:
        return (
            os.environ
            | {
                "CP_K8S_PORT": str(self.port),
                "CP_K8S_ETCD_PORT": str(self.etcd_port),
            }
            | self.extra_env
        )

    def start(self, *, timeout: float = 1800.0) -> Path:
        """Start the control plane (building the binaries first if the cache has none);
        returns the kubeconfig path."""
        if not self.port or not self.etcd_port:
            self.port, self.etcd_port = free_ports()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                ["bash", str(SCRIPTS / "start-local-k8s.sh"), str(self.state_dir)],
                check=False,
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise LocalKubernetesError(f"start-local-k8s.sh took longer than {timeout:g}s") from exc
        if done.returncode != 0:
            raise LocalKubernetesError(
                f"start-local-k8s.sh failed ({done.returncode}):\n{done.stderr[-3000:]}"
            )
        return self.kubeconfig

    def stop(self, *, timeout: float = 120.0) -> None:
        subprocess.run(
            ["bash", str(SCRIPTS / "stop-local-k8s.sh"), str(self.state_dir)],
            check=False,
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def api_client(self) -> client.ApiClient:
        cfg = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig), client_configuration=cfg
        )
        return client.ApiClient(cfg)

    def processes(self) -> list[str]:
        """Live processes whose command line names the state dir (every component's does)."""
        needle = str(self.state_dir.resolve()) + "/"
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (
                    (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            if needle in cmdline and stat.rsplit(")", 1)[1].split()[0] != "Z":
                found.append(f"{proc.name}: {cmdline.strip()}")
        return found


def add_gpu_node(
    api: client.ApiClient,
    name: str,
    *,
    gpus: int = 8,
    labels: dict[str, str] | None = None,
    resource: str = "nvidia.com/gpu",
    ready: bool = True,
    unschedulable: bool = False,
) -> None:
    """A Node object that looks like a GPU node with a running kubelet: the GPUs in its
    allocatable (quantities as strings), Ready, and without the not-ready taint that
    admission gives every new node (nothing else would ever remove it here)."""
    core = client.CoreV1Api(api)
    meta = client.V1ObjectMeta(name=name, labels=labels or {GPU_PRODUCT: "NVIDIA-A100-SXM4-80GB"})
    core.create_node(client.V1Node(metadata=meta))
    res = {"cpu": "96", "memory": "1Ti", "pods": "110", resource: str(gpus)}
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletNotReady",
        "message": "fake kubelet",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    status = {"capacity": res, "allocatable": res, "conditions": [condition]}
    core.patch_node_status(name, {"status": status})
    core.patch_node(name, {"spec": {"taints": None, "unschedulable": unschedulable or None}})
