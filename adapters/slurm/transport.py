"""How Slurm commands are run: here (subprocess) or on a login node (``ssh HOST cmd…``).

The adapter builds every command as an argument list and hands it to a transport; no
spec value ever reaches a shell on this machine. ssh, however, always joins its
arguments into one string for the remote shell, so :class:`SSHTransport` quotes each
element with :func:`shlex.quote` itself — the remote side then sees exactly the argv the
adapter built. Both transports raise the adapter error types for failures of the
transport itself (timeout, ssh down, binary missing); a command that ran and failed is
returned as :class:`Completed` for the caller to classify.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from adapters.base import PermanentError, TemporaryError

# Variables that silently change what sbatch/squeue/sinfo do (SBATCH_PARTITION,
# SQUEUE_STATES, SINFO_FORMAT, ...), and those of an allocation the control plane itself
# runs in (salloc, an interactive session, `cp watch` as a job: SLURM_JOB_ID,
# SLURM_MEM_PER_NODE, SRUN_CPUS_PER_TASK, ...), which sbatch would export into every job
# it submits, where a gang's srun dies on them. The adapter states every option it relies
# on, so the control plane's own environment must not add to them; SLURM_CONF, which says
# which cluster the commands talk to, is the one kept.
_SLURM_DEFAULTS_PREFIXES = (
    "SBATCH_",
    "SQUEUE_",
    "SINFO_",
    "SCANCEL_",
    "SCONTROL_",
    "SLURM_",
    "SRUN_",
    "SALLOC_",
)
_KEPT = frozenset({"SLURM_CONF"})
# sbatch exports the environment it runs in into every job (Slurm's --export=ALL), and
# cp's holds what no job should see: CP_DB with the store's password, cloud and cluster
# credentials, its own virtualenv first on PATH. The local tools get a login's basics
# only, and what the cluster spec's slurm.exportEnv names.
_LOGIN = frozenset({"HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "LANGUAGE", "TMPDIR"})
_LOGIN_PREFIXES = ("LC_",)


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@runtime_checkable
class Transport(Protocol):
    """Runs one command (an argv list) where the Slurm client tools live."""

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        timeout: float = 60.0,
    ) -> Completed: ...

    def write_file(self, path: str, text: str, *, timeout: float = 60.0) -> None:
        """Create or replace ``path`` atomically (sbatch must never read half a script)."""
        ...


def _run(
    argv: list[str],
    *,
    env: dict[str, str] | None,
    stdin: str | None,
    timeout: float,
    shown: Sequence[str],
) -> Completed:
    try:
        proc = subprocess.run(
            argv,
            check=False,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            # a command waiting on its stdin would otherwise hang until the timeout
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise TemporaryError(f"{shlex.join(shown)} timed out after {timeout:g}s") from exc
    except FileNotFoundError as exc:
        raise PermanentError(
            f"{argv[0]} not found on PATH (are the Slurm client tools installed?)"
        ) from exc
    except OSError as exc:
        raise TemporaryError(f"{shlex.join(shown)} could not be run: {exc}") from exc
    return Completed(tuple(shown), proc.returncode, proc.stdout, proc.stderr)


@dataclass
class LocalTransport:
    """Slurm's client tools on this machine, with part of this process's environment:
    ``SLURM_CONF``, a login's basics (``PATH`` without this process's virtualenv) and the
    variables named in ``passed``. Every job sbatch submits starts with it."""

    passed: Sequence[str] = ()

    def environment(self, env: Mapping[str, str] | None) -> dict[str, str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if k in _KEPT or (self._passes(k) and not k.startswith(_SLURM_DEFAULTS_PREFIXES))
        }
        if "PATH" in base:
            base["PATH"] = _without_own_virtualenv(base["PATH"])
        return base | dict(env or {})

    def _passes(self, name: str) -> bool:
        return name in _LOGIN or name.startswith(_LOGIN_PREFIXES) or name in self.passed

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        timeout: float = 60.0,
    ) -> Completed:
        return _run(list(argv), env=self.environment(env), stdin=stdin, timeout=timeout, shown=argv)

    def write_file(self, path: str, text: str, *, timeout: float = 60.0) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, target)


def _without_own_virtualenv(path: str) -> str:
    """``path`` less the bin directory of the virtualenv this process runs in, if any (a
    job's ``python3`` must not be the control plane's)."""
    if sys.prefix == sys.base_prefix:
        return path
    own = os.path.realpath(os.path.join(sys.prefix, "bin"))
    return os.pathsep.join(d for d in path.split(os.pathsep) if os.path.realpath(d) != own)


@dataclass
class SSHTransport:
    """The same commands on ``host`` through ``ssh``: for clusters reached via a login node.

    Nothing of this process's environment is forwarded; the adapter passes what the
    remote commands need (``SLURM_CONF``, ``TZ``) explicitly through ``env`` as
    ``env K=V`` in front of the command. ``BatchMode`` makes ssh fail instead of
    prompting for a password, which would hang a reconcile.
    """

    host: str
    ssh: Sequence[str] = ("ssh",)
    options: Sequence[str] = field(
        default_factory=lambda: ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    )

    def command(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        """The local argv that runs ``argv`` on the host (public so it can be unit-tested)."""
        remote = list(argv)
        if env:
            remote = ["env", *(f"{k}={v}" for k, v in sorted(env.items())), *remote]
        # "--" ends ssh's own options, so a host name can never be read as one
        return [*self.ssh, *self.options, "--", self.host, shlex.join(remote)]

    def script_command(self, path: str) -> list[str]:
        """Write stdin to ``path`` on the host atomically (temp file + rename)."""
        tmp = f"{path}.tmp"
        parent = path.rsplit("/", 1)[0] if "/" in path else "."
        shell = (
            f"mkdir -p {shlex.quote(parent)} && cat > {shlex.quote(tmp)} && "
            f"chmod 755 {shlex.quote(tmp)} && mv -f {shlex.quote(tmp)} {shlex.quote(path)}"
        )
        return [*self.ssh, *self.options, "--", self.host, shell]

    def _check_ssh(self, done: Completed) -> Completed:
        # ssh exits 255 for its own failures (unreachable host, auth); those are worth a retry
        if done.returncode == 255:
            raise TemporaryError(f"ssh to {self.host} failed: {done.stderr.strip()}")
        return done

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        timeout: float = 60.0,
    ) -> Completed:
        done = _run(self.command(argv, env), env=None, stdin=stdin, timeout=timeout, shown=argv)
        return self._check_ssh(done)

    def write_file(self, path: str, text: str, *, timeout: float = 60.0) -> None:
        cmd = self.script_command(path)
        done = self._check_ssh(_run(cmd, env=None, stdin=text, timeout=timeout, shown=cmd))
        if not done.ok:
            raise PermanentError(f"cannot write {path} on {self.host}: {done.stderr.strip()}")
