"""Transports without a cluster: the argv ssh gets, and the local transport's environment
and failures. (tests/integration/slurm/test_transport.py drives the real adapter through
the SSH code path against the local Slurm.)"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from adapters.base import PermanentError, TemporaryError
from adapters.slurm import LocalTransport, SSHTransport


def test_ssh_argv_quotes_every_element_for_the_remote_shell() -> None:
    ssh = SSHTransport("login1.example.org")
    argv = ["sbatch", "--comment=cp:v1;workload=a/b", "--job-name=x y", "/w/s.sh"]
    cmd = ssh.command(argv, {"TZ": "UTC", "SLURM_CONF": "/etc/slurm/slurm.conf"})
    assert cmd[:6] == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "--"]
    assert cmd[6] == "login1.example.org" and len(cmd) == 8
    # what the remote shell will split the command string into
    assert shlex.split(cmd[7]) == ["env", "SLURM_CONF=/etc/slurm/slurm.conf", "TZ=UTC", *argv]

    custom = SSHTransport("-oProxyCommand=evil", ssh=("/usr/bin/ssh",), options=["-p", "2222"])
    cmd = custom.command(["squeue"])
    # "--" keeps a host name that starts with '-' from being read as an ssh option
    assert cmd == ["/usr/bin/ssh", "-p", "2222", "--", "-oProxyCommand=evil", "squeue"]


def test_ssh_file_write_is_one_quoted_remote_command() -> None:
    cmd = SSHTransport("h").script_command("/work dir/cp.a.b.p'1.sh")
    remote = cmd[-1]
    assert cmd[-2] == "h"
    assert "'/work dir/cp.a.b.p'\"'\"'1.sh.tmp'" in remote and remote.startswith(
        "mkdir -p '/work dir'"
    )


def test_local_transport_ignores_slurm_defaults_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SBATCH_PARTITION", "somewhere-else")
    monkeypatch.setenv("SQUEUE_STATES", "RUNNING")
    done = LocalTransport().run(["env"], env={"TZ": "UTC"})
    assert "SBATCH_PARTITION" not in done.stdout and "SQUEUE_STATES" not in done.stdout
    assert "TZ=UTC" in done.stdout.splitlines()


def test_local_transport_leaves_an_outer_allocation_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """`cp apply` run inside a Slurm allocation (salloc, an interactive session, `cp watch`
    as a job): sbatch exported the allocation's SLURM_*/SRUN_* variables into every job it
    submitted, and a gang's srun died on them ("SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and
    SLURM_MEM_PER_NODE are mutually exclusive"; user trial). Only SLURM_CONF, which says
    which cluster the commands talk to, is kept."""
    outer = {
        "SLURM_JOB_ID": "42",
        "SLURM_MEM_PER_NODE": "1024",
        "SLURM_NODELIST": "a100-1",
        "SRUN_CPUS_PER_TASK": "4",
        "SALLOC_PARTITION": "debug",
    }
    for name, value in outer.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/slurm.conf")
    seen = dict(
        line.split("=", 1)
        for line in LocalTransport().run(["env"]).stdout.splitlines()
        if "=" in line
    )
    assert not set(outer) & set(seen), sorted(set(outer) & set(seen))
    assert seen["SLURM_CONF"] == "/etc/slurm/slurm.conf"


def test_local_transport_failures() -> None:
    with pytest.raises(PermanentError, match="not found on PATH"):
        LocalTransport().run(["no-such-slurm-command"])
    with pytest.raises(TemporaryError, match="timed out"):
        LocalTransport().run(["sleep", "5"], timeout=0.2)


def _seen(transport: LocalTransport) -> dict[str, str]:
    lines = transport.run(["env"]).stdout.splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_local_transport_passes_a_small_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """sbatch exports the environment it runs in into every job: `CP_DB` with its password,
    cloud credentials and the control plane's own virtualenv first on PATH reached every
    job (user trial on a real cluster). Only a login's basics go through, PATH without
    this process's virtualenv."""
    own = str(Path(sys.prefix) / "bin")
    monkeypatch.setattr(sys, "prefix", sys.prefix)  # a virtualenv: prefix != base_prefix
    monkeypatch.setattr(sys, "base_prefix", "/not/" + sys.prefix)
    secrets = {
        "CP_DB": "postgresql://cp:s3cret@db/cp",
        "AWS_SECRET_ACCESS_KEY": "s3cret",
        "VIRTUAL_ENV": sys.prefix,
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", f"{own}:/usr/local/bin:/usr/bin:/bin")
    monkeypatch.setenv("HOME", "/home/ops")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("MODULEPATH", "/etc/modules")
    seen = _seen(LocalTransport())
    assert not set(secrets) & set(seen) and "MODULEPATH" not in seen
    assert seen["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert (seen["HOME"], seen["LC_ALL"]) == ("/home/ops", "C.UTF-8")
    # a site names what its jobs need beside these (the cluster's slurm.exportEnv)
    assert _seen(LocalTransport(passed=("MODULEPATH",)))["MODULEPATH"] == "/etc/modules"
