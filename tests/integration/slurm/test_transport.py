"""Transports: the argv ssh gets, and the same adapter code path through a stand-in ssh.

No real ssh server is available where these tests run (no sshd, no keys), so the SSH
transport is checked two ways: the exact argv it builds, and a fake ``ssh`` program
that does what sshd does with the command string — hand it to a shell — on this
host. The second runs the real adapter against the real local Slurm through the SSH
code path, which proves that the quoting round-trips.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.base import TemporaryError
from adapters.slurm import SlurmAdapter, SSHTransport
from adapters.slurm.localcluster import LocalSlurm
from specs.models import Cluster

pytestmark = pytest.mark.slurm
Helper = Callable[..., Any]  # the builders conftest hands out as fixtures


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
