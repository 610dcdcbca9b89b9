"""Transports: the argv ssh gets, and the same adapter code path through a stand-in ssh.

No real ssh server is available where these tests run (no sshd, no keys), so the SSH
transport is checked two ways: the exact argv it builds, and a fake ``ssh`` program
that does what sshd does with the command string — hand it to a shell — on this
host. The second runs the real adapter against the real local Slurm through the SSH
code path, which proves that the quoting round-trips.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.base import PermanentError, TemporaryError
from adapters.slurm import LocalTransport, SlurmAdapter, SSHTransport
from adapters.slurm.localcluster import LocalSlurm
from specs.models import Cluster

pytestmark = pytest.mark.slurm
Helper = Callable[..., Any]  # the builders conftest hands out as fixtures


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


@pytest.fixture
def fake_ssh(tmp_path: Path) -> Path:
    """An ``ssh`` that runs the command string with sh on this host, as sshd would remotely."""
    script = tmp_path / "fake-ssh"
    log = tmp_path / "ssh.log"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, subprocess, sys\n"
        "args = sys.argv[1:]\n"
        "host, command = args[args.index('--') + 1], args[args.index('--') + 2:]\n"
        "if host == 'unreachable':\n"
        "    sys.stderr.write('ssh: connect to host unreachable port 22: No route to host\\n'); sys.exit(255)\n"
        f"open({str(log)!r}, 'a').write(json.dumps(args) + '\\n')\n"
        "sys.exit(subprocess.run(['sh', '-c', ' '.join(command)]).returncode)\n"
    )
    script.chmod(0o755)
    return script


def test_adapter_over_ssh_takes_the_same_code_path(
    clean_slurm: LocalSlurm,
    cluster_spec: Cluster,
    fake_ssh: Path,
    tmp_path: Path,
    make_action: Helper,
) -> None:
    doc = cluster_spec.model_dump(by_alias=True)
    doc["spec"]["slurm"] = {"slurmConf": str(clean_slurm.slurm_conf), "sshHost": "login1"}
    spec = Cluster.model_validate(doc)
    chosen = SlurmAdapter(spec, work_dir=tmp_path).transport
    assert isinstance(chosen, SSHTransport) and chosen.host == "login1"  # from the spec
    adapter = SlurmAdapter(
        spec,
        work_dir=tmp_path / "remote work",
        transport=SSHTransport("login1", ssh=(str(fake_ssh),)),
    )
    assert len(adapter.observe().nodes) == 6
    weird = ["a b", "c;d", "$(echo pwned)"]
    result = adapter.execute(make_action(command=["echo", *weird]), plan_id="p 1")
    assert result.ok and result.job and result.job.isdigit()
    assert adapter.execute(make_action(command=["echo", *weird]), plan_id="p 1").job == result.job
    script = (tmp_path / "remote work" / "cp.chem.md-run.p_1.sh").read_text()
    assert "exec echo 'a b' 'c;d' '$(echo pwned)'" in script
    calls = [json.loads(line) for line in (tmp_path / "ssh.log").read_text().splitlines()]
    assert any("SLURM_CONF=" in " ".join(c) and "sbatch" in " ".join(c) for c in calls)

    unreachable = SlurmAdapter(
        spec, work_dir=tmp_path, transport=SSHTransport("unreachable", ssh=(str(fake_ssh),))
    )
    with pytest.raises(TemporaryError, match="No route to host"):
        unreachable.observe()


def test_local_transport_ignores_slurm_defaults_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SBATCH_PARTITION", "somewhere-else")
    monkeypatch.setenv("SQUEUE_STATES", "RUNNING")
    done = LocalTransport().run(["env"], env={"TZ": "UTC"})
    assert "SBATCH_PARTITION" not in done.stdout and "SQUEUE_STATES" not in done.stdout
    assert "TZ=UTC" in done.stdout.splitlines()


def test_local_transport_failures() -> None:
    with pytest.raises(PermanentError, match="not found on PATH"):
        LocalTransport().run(["no-such-slurm-command"])
    with pytest.raises(TemporaryError, match="timed out"):
        LocalTransport().run(["sleep", "5"], timeout=0.2)
