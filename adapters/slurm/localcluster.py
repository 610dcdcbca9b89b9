"""Start and stop the throw-away local Slurm cluster the integration tests and benchmarks use.

The shell scripts in ``local/`` do the work (install Slurm + munge with apt when missing,
write the config, start munged/slurmctld/slurmd, wait until every node is usable); this
module is their Python handle so pytest fixtures and benchmarks share one way to call
them. It is a development tool, not part of the adapter's runtime path.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SCRIPTS = Path(__file__).with_name("local")
DEFAULT_PORT_BASE = 26817


class LocalSlurmError(RuntimeError):
    pass


@dataclass
class LocalSlurm:
    state_dir: Path
    port_base: int = DEFAULT_PORT_BASE
    extra_env: dict[str, str] = field(default_factory=dict)
    # MariaDB + slurmdbd beside the cluster (sacct, sshare, fair-share); min_job_age: how
    # long slurmctld remembers an ended job (small: only accounting knows of ended jobs)
    accounting: bool = False
    min_job_age: int | None = None

    @property
    def slurm_conf(self) -> Path:
        return self.state_dir / "etc" / "slurm.conf"

    def _env(self) -> dict[str, str]:
        env = {"LOCAL_SLURM_PORT_BASE": str(self.port_base)}
        if self.accounting:
            env["LOCAL_SLURM_ACCOUNTING"] = "1"
        if self.min_job_age is not None:
            env["LOCAL_SLURM_MIN_JOB_AGE"] = str(self.min_job_age)
        return os.environ | env | self.extra_env

    def start(self, *, fresh: bool = False, timeout: float = 300.0) -> dict[str, str]:
        """Start (or keep) the cluster; return the environment lines it printed (SLURM_CONF)."""
        # munged refuses a socket unless every folder above it is a+x
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir.chmod(0o755)
        env = self._env() | ({"LOCAL_SLURM_FRESH": "1"} if fresh else {})
        try:
            done = subprocess.run(
                ["bash", str(SCRIPTS / "start-local-slurm.sh"), str(self.state_dir)],
                check=False,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise LocalSlurmError(f"start-local-slurm.sh took longer than {timeout:g}s") from exc
        if done.returncode != 0:
            raise LocalSlurmError(
                f"start-local-slurm.sh failed ({done.returncode}):\n{done.stderr}"
            )
        exports: dict[str, str] = {}
        for line in done.stdout.splitlines():
            key, sep, value = line.removeprefix("export ").partition("=")
            if sep:
                exports[key] = value
        return exports

    def stop(self, *, purge: bool = False, timeout: float = 120.0) -> None:
        argv = ["bash", str(SCRIPTS / "stop-local-slurm.sh"), str(self.state_dir)]
        subprocess.run(
            [*argv, "--purge"] if purge else argv,
            check=False,
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def stop_controller(self, timeout: float = 20.0) -> None:
        """Kill only slurmctld (for tests of an unreachable controller); start() brings it back."""
        pid_file = self.state_dir / "run" / "slurmctld.pid"
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _running(pid):
            os.kill(pid, signal.SIGKILL)

    def processes(self) -> list[str]:
        """Live (non-zombie) processes whose command line, cwd or environment refer to the state dir.

        The environment catches helpers such as slurmctld's ``slurmscriptd``, whose
        command line names nothing.
        """
        needle = str(self.state_dir)
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or not _running(int(proc.name)):
                continue
            try:
                cmdline = (
                    (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
                cwd = os.readlink(proc / "cwd")
                environ = (proc / "environ").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if needle in cmdline or cwd.startswith(needle) or needle in environ:
                found.append(f"{proc.name}: {cmdline.strip()}")
        return found


def _running(pid: int) -> bool:
    """The pid exists and is not a zombie (this sandbox's init reaps orphans late)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
