"""Hostile and broken input: every case is a located or one-line error, never a crash.

Each case runs the real ``cp`` in a child process with a time limit (10 s) and an
address-space limit (2 GiB), so a hang, a memory blow-up or a segfault fails the test
instead of taking the suite down. The contract checked every time: exit code 1, the error
on stderr in one line per problem (``file:line:col: error: ...`` for spec problems,
``error: ...`` naming the file and what to do for state problems), no Python traceback.
"""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.builders import cluster, project, workload

CP = str(Path(sys.executable).parent / "controlplane")
MEMORY = 2 * 1024**3
Setup = Callable[[Path], None]


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run(
    *args: str | Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 10,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CP, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_limits,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        check=False,
    )


def specs(root: Path, *docs: dict[str, object], name: str = "specs.yaml") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return root


def base(root: Path, **workload_spec: object) -> Path:
    return specs(root, cluster(), project("p", gpus=8), workload("w", "p", **workload_spec))


def assert_clean_failure(res: subprocess.CompletedProcess[str], *expected: str) -> None:
    """Exit 1, every expected fragment on stderr, no traceback, no crash."""
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, res.stderr
    for text in expected:
        assert text in res.stderr, (text, res.stderr)


# ------------------------------------------------------------------ spec files


def test_deep_block_nesting_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "deep.yaml").write_text("- " * 30_000 + "x\n")
    assert_clean_failure(run("validate", tmp_path), "deep.yaml:1:1: error:", "nest")


def test_deep_flow_and_mapping_nesting_are_located_errors(tmp_path: Path) -> None:
    (tmp_path / "flow.yaml").write_text("[" * 30_000 + "]" * 30_000 + "\n")
    (tmp_path / "maps.yaml").write_text("a: " * 20_000 + "x\n")
    res = run("validate", tmp_path)
    assert_clean_failure(res, "flow.yaml:1:1: error:", "maps.yaml:")


def test_a_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    base(tmp_path)
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    assert_clean_failure(run("validate", tmp_path), "zero.yaml:1:1: error:", "not a regular file")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    base(tmp_path)
    os.mkfifo(tmp_path / "x.yaml")
    assert_clean_failure(run("validate", tmp_path), "x.yaml:1:1: error:", "not a regular file")


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    base(tmp_path)
    with (tmp_path / "huge.yaml").open("w") as f:
        f.truncate(64 * 1024**2)  # sparse: 64 MiB of NULs without writing them
    assert_clean_failure(run("validate", tmp_path), "huge.yaml:1:1: error:", "MiB")


def test_too_many_documents_is_an_error(tmp_path: Path) -> None:
    base(tmp_path)
    (tmp_path / "many.yaml").write_text("---\n{}\n" * 120_000)
    assert_clean_failure(run("validate", tmp_path), "many.yaml", "documents")


@pytest.mark.parametrize(
    ("pool", "field"),
    [({"nodes": 100_000_000}, "nodes"), ({"gpusPerNode": 3000}, "gpusPerNode")],
)
def test_pool_counts_are_bounded(tmp_path: Path, pool: dict[str, int], field: str) -> None:
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2, **pool}]
    specs(tmp_path, cluster(pools=pools), project("p"), workload("w", "p", gpus=1))
    assert_clean_failure(run("plan", tmp_path), "specs.yaml:", f"spec.nodePools.0.{field}")


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"replicas": 1_000_000_000}, "spec.replicas", "at most"),
        ({"walltime": float("inf")}, "spec.walltime", "finite"),
        ({"walltime": "0s"}, "spec.walltime", "positive"),
        ({"command": []}, "spec.command", "at least one entry"),
        (
            {"walltime": "1h", "checkpoint": {"signal": "USR1; rm -rf ~"}},
            "spec.checkpoint.signal",
            "signal",
        ),
        (
            {"walltime": "1h", "checkpoint": {"signal": "USR1\n"}},
            "spec.checkpoint.signal",
            "signal",
        ),
        ({"walltime": "1h", "checkpoint": {"grace": "2h"}}, "spec.checkpoint.grace", "walltime"),
        ({"walltime": "1h", "checkpoint": {"total": "0s"}}, "spec.checkpoint.total", "positive"),
        # segments without a walltime: the total was dropped, one job ran unbounded (trial)
        ({"checkpoint": {"total": "2d"}}, "spec.checkpoint.total", "set walltime"),
        ({"command": ["python", "a\x07b"]}, "spec.command.1", "control character"),
    ],
)
def test_workload_fields_are_checked_at_validate(
    tmp_path: Path, spec: dict[str, object], field: str, words: str
) -> None:
    base(tmp_path, **spec)
    assert_clean_failure(run("validate", tmp_path), "specs.yaml:", field, words)


def test_huge_numbers_are_spec_errors(tmp_path: Path) -> None:
    text = yaml.safe_dump_all(
        [cluster(), project("p", gpus=8), workload("w", "p")], sort_keys=False
    )
    text = text.replace("gpus: 8", "gpus: " + "9" * 5000, 1)
    text = text.replace("gpusPerNode: 8", "gpusPerNode: 99999999999999999999999", 1)
    (tmp_path / "specs.yaml").write_text(text)
    assert_clean_failure(
        run("validate", tmp_path), "spec.quota.gpus", "spec.nodePools.0.gpusPerNode"
    )


def test_a_quota_above_two_to_the_63_is_a_spec_error(tmp_path: Path) -> None:
    specs(tmp_path, cluster(), project("p", gpus=2**63 + 5), workload("w", "p"))
    assert_clean_failure(run("plan", tmp_path), "spec.quota.gpus")


# ------------------------------------------------------------------ state files


def _applied(root: Path) -> Path:
    base(root)
    assert run("apply", root, "--auto-approve").returncode == 0
    return root


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda db: db.write_bytes(db.read_bytes()[:1000]), "not a usable database"),
        (lambda db: db.write_bytes(b"garbage " * 200), "not a usable database"),
        (lambda db: db.write_bytes(b""), "cp store init"),
    ],
    ids=["truncated", "garbage", "empty"],
)
def test_a_broken_database_is_one_line_and_never_recreated(
    tmp_path: Path, damage: Callable[[Path], object], words: str
) -> None:
    root = _applied(tmp_path)
    db = root / ".cp" / "controlplane.db"
    damage(db)
    before = db.read_bytes()
    res = run("history", root)
    assert_clean_failure(res, str(db), words)
    assert db.read_bytes() == before, "a broken store is left for the user to inspect"


def test_a_database_that_lost_its_tables_needs_store_init(tmp_path: Path) -> None:
    root = _applied(tmp_path)
    db = root / ".cp" / "controlplane.db"
    with sqlite3.connect(db) as conn:
        for (table,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table'"
        ).fetchall():
            conn.execute(f'DROP TABLE "{table}"')
    assert_clean_failure(run("plan", root), "cp store init")
    init = run("store", "init", root)
    assert init.returncode == 0, init.stderr
    assert run("plan", root).returncode == 0


def test_database_paths_and_urls_that_cannot_work(tmp_path: Path) -> None:
    root = base(tmp_path)
    (root / "dbdir").mkdir()
    cases = [
        (["--db", f"sqlite:///{root / 'dbdir'}"], "dbdir"),
        (["--db", "notaurl"], "notaurl"),
        (["--db", "mysql://u@localhost/x"], "mysql"),
        (["--db", f"sqlite:///{root / 'missing' / 'dir' / 'x.db'}"], "does not exist"),
        (["--db", "postgresql+psycopg://u@127.0.0.1:9/x?connect_timeout=2"], "127.0.0.1:9"),
    ]
    for extra, words in cases:
        res = run("history", root, *extra)
        assert_clean_failure(res, words)
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (root / "missing").exists(), "--db never creates directories"


def test_a_read_only_database_is_one_line(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # root writes through file modes: use a read-only URL instead
        root = _applied(tmp_path)
        db = root / ".cp" / "controlplane.db"
        res = run("apply", root, "--auto-approve", "--db", f"sqlite:///file:{db}?mode=ro&uri=true")
    else:
        root = _applied(tmp_path)
        db = root / ".cp" / "controlplane.db"
        db.chmod(0o444)
        res = run("apply", root, "--auto-approve")
    assert_clean_failure(res, "read-only")


@pytest.mark.parametrize(
    "content", [b"", b"{not json", b'{"nextId": 3}'], ids=["empty", "garbage", "shape"]
)
def test_a_broken_simulator_state_is_one_line(tmp_path: Path, content: bytes) -> None:
    root = _applied(tmp_path)
    state = root / ".cp" / "simulator" / "sim.json"
    state.write_bytes(content)
    assert_clean_failure(run("plan", root), str(state))


def test_garbage_plan_and_snapshot_files_are_one_line(tmp_path: Path) -> None:
    root = base(tmp_path)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{ this is not a plan")
    assert_clean_failure(run("apply", garbage, "--dir", root), "garbage.json")
    assert_clean_failure(run("plan", root, "--observed", garbage), "garbage.json")
    assert_clean_failure(run("show", garbage, "--dir", root), "garbage.json")


def test_now_far_in_the_future_is_a_usage_error_and_breaks_nothing(tmp_path: Path) -> None:
    root = _applied(tmp_path)
    res = run("plan", root, "--now", "9999-12-31T23:59:59")
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert run("plan", root).returncode == 0
