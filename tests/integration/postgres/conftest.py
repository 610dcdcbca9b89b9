"""A real, throw-away PostgreSQL server for the store tests (Debian's postgresql package).

initdb refuses to run as root, so the server runs as the ``postgres`` system user the
package creates, on a free loopback port, with its data and socket in a temporary folder.
If it cannot start the tests fail; they never skip.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def _tool(name: str) -> str:
    for d in PG_BIN_DIRS:
        if (d / name).exists():
            return str(d / name)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"PostgreSQL's {name} is not installed (scripts/test.sh installs postgresql)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(args: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return args
    return ["runuser", "-u", "postgres", "--", *args]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    base = Path(tempfile.mkdtemp(prefix="cp-pg-"))
    data, sock = base / "data", base / "run"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
    user = "postgres" if os.geteuid() == 0 else getpass.getuser()
    port = _free_port()
    subprocess.run(
        _as_server_user([_tool("initdb"), "-D", str(data), "-U", user, "-A", "trust", "--no-sync"]),
        check=True,
        capture_output=True,
    )
    server = subprocess.Popen(
        _as_server_user(
            [
                _tool("postgres"),
                "-D",
                str(data),
                "-p",
                str(port),
                "-k",
                str(sock),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
            ]
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"postgresql+psycopg://{user}@127.0.0.1:{port}/postgres"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(
                f"postgres exited: {server.stderr.read().decode() if server.stderr else ''}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.2)
    else:
        server.kill()
        pytest.fail("postgres did not start within 30 s")
    time.sleep(0.5)  # accepting TCP a moment before it accepts logins
    try:
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def fresh_db(postgres_url: str) -> Iterator[str]:
    """A database of its own, without tables (what a new shared store looks like)."""
    name = f"cp_{uuid.uuid4().hex[:10]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    yield postgres_url.rsplit("/", 1)[0] + f"/{name}"
    admin.dispose()
