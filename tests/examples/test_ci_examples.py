"""The CI examples cannot rot: their plan and apply steps run here, as the CI would run
them, on a real git repository (a bare origin, a clone, a branch that cuts a department's
quota) against the simulator, with a SQLite store standing in for the shared PostgreSQL
one (the store is tested on PostgreSQL in tests/integration/postgres).

GitHub's and GitLab's comment APIs cannot run here, so a small local HTTP server plays
them (only the calls the examples make: list, create and update a pull request's comments
or a merge request's notes); everything else is real: bash, git, curl, python3, cp.
Steps that only install the package are skipped (it is installed in this environment,
and linked as the examples' `.venv/bin/cp`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster, department, project, workload
from tests.builders.cli import write_specs
from tests.builders.git import GIT_ENV, git

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "ci"
CP = Path(sys.executable).parent / "controlplane"
POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 6}]


def org(arts_quota: int) -> list[dict[str, Any]]:
    """48 GPUs: arts runs 36; science wants 20 and holds its deserved 12."""
    return [
        cluster(pools=POOLS),
        department("arts", gpus=arts_quota),
        department("science", gpus=12),
        project("paint", gpus=arts_quota // 2, department="arts"),
        project("film", gpus=arts_quota // 2, department="arts"),
        project("chem", gpus=12, department="science"),
        *[workload(f"p{i}", "paint", gpus=4, priority=i) for i in range(5)],
        *[workload(f"f{i}", "film", gpus=4, priority=i) for i in range(4)],
        *[workload(f"c{i}", "chem", gpus=4) for i in range(5)],
    ]


# ------------------------------------------------------------------ the fake forge


class Forge(BaseHTTPRequestHandler):
    """GitHub's issue comments and GitLab's merge request notes, in memory."""

    comments: dict[str, list[dict[str, Any]]]  # thread path -> comments
    calls: list[tuple[str, str]]

    def log_message(self, *args: object) -> None:
        pass

    def _authorised(self) -> bool:
        auth = self.headers.get("Authorization", "") or self.headers.get("PRIVATE-TOKEN", "")
        return bool(auth)

    def _reply(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> tuple[str, int | None]:
        path = self.path.split("?")[0]
        gh = re.fullmatch(r"/repos/[^/]+/[^/]+/issues/comments/(\d+)", path)
        if gh:
            return "github-comment", int(gh.group(1))
        gl = re.fullmatch(r"(/projects/\d+/merge_requests/\d+/notes)/(\d+)", path)
        if gl:
            return gl.group(1), int(gl.group(2))
        return path, None

    def do_GET(self) -> None:
        thread, _ = self._route()
        self.calls.append(("GET", thread))
        self._reply(200, self.comments.get(thread, []))

    def do_POST(self) -> None:
        if not self._authorised():
            return self._reply(401, {})
        thread, _ = self._route()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        comment = {"id": 1000 + sum(map(len, self.comments.values())), "body": body["body"]}
        self.comments.setdefault(thread, []).append(comment)
        self.calls.append(("POST", thread))
        self._reply(201, comment)

    def _update(self) -> None:
        if not self._authorised():
            return self._reply(401, {})
        _, ident = self._route()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        for thread in self.comments.values():
            for c in thread:
                if c["id"] == ident:
                    c["body"] = body["body"]
                    self.calls.append(("UPDATE", str(ident)))
                    return self._reply(200, c)
        self._reply(404, {})

    do_PATCH = _update
    do_PUT = _update


@pytest.fixture
def forge() -> Iterator[tuple[str, type[Forge]]]:
    handler = type("Handler", (Forge,), {"comments": {}, "calls": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()


# ------------------------------------------------------------------ the repository


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A clone of a bare origin whose main holds the specs (arts at 36 GPUs), with the
    examples' `.venv/bin/cp` linked to this environment's."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    clone = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    git(clone, "checkout", "-q", "-b", "main")
    (clone / ".gitignore").write_text(".venv/\n.cp/\nplan.md\nerrors.txt\nbody.json\n")
    write_specs(clone / "specs", org(36))
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "the org")
    git(clone, "push", "-q", "origin", "main")
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "cp").symlink_to(CP)
    return clone


def run_script(clone: Path, script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A step as both CIs run it: bash with errexit and pipefail, in the checkout."""
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=clone,
        env={**os.environ, **GIT_ENV, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def github_steps(job: str) -> list[tuple[str, str, dict[str, str]]]:
    """(name, script, env without the ${{ }} expressions) of a job's run steps."""
    doc = yaml.safe_load((EXAMPLES / "github" / "controlplane.yaml").read_text())
    out = []
    for step in doc["jobs"][job]["steps"]:
        if "run" in step and step.get("name") != "install":
            env = {k: v for k, v in step.get("env", {}).items() if "${{" not in str(v)}
            out.append((step["name"], step["run"], env))
    return out


def gitlab_script(job: str) -> list[str]:
    doc = yaml.safe_load((EXAMPLES / "gitlab" / ".gitlab-ci.yml").read_text())
    return list(doc[job]["script"])


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def open_branch(clone: Path) -> None:
    """What runs today on main, then a branch that cuts arts from 36 to 20 GPUs."""
    db = f"sqlite:///{clone.parent / 'store.db'}"
    ok(run_script(clone, 'cp apply specs --auto-approve --db "$CP_DB"', github_env(db)))
    git(clone, "checkout", "-q", "-b", "cut-arts")
    write_specs(clone / "specs", org(20))
    git(clone, "commit", "-q", "-am", "arts: 36 -> 20")
    git(clone, "push", "-q", "origin", "cut-arts")


def github_env(db: str) -> dict[str, str]:
    return {"CP_DB": db, "SPECS": "specs", "PATH": f".venv/bin:{os.environ['PATH']}"}


def merge(clone: Path) -> None:
    git(clone, "checkout", "-q", "main")
    git(clone, "merge", "-q", "--no-ff", "-m", "Merge cut-arts", "cut-arts")
    git(clone, "push", "-q", "origin", "main")


def sim_jobs(clone: Path) -> list[dict[str, Any]]:
    """The simulated cluster's jobs: kept beside the store (CP_DB, outside the checkout)."""
    state = json.loads((clone.parent / "simulator" / "sim.json").read_text())
    return list(state["state"]["jobs"])


# ------------------------------------------------------------------ GitHub


def test_github_plan_comments_once_and_merge_applies_the_reviewed_plan(
    work: Path, forge: tuple[str, type[Forge]]
) -> None:
    url, api = forge
    db = f"sqlite:///{work.parent / 'store.db'}"
    open_branch(work)
    env = {
        **github_env(db),
        "GITHUB_API_URL": url,
        "GITHUB_REPOSITORY": "org/specs",
        "GITHUB_OUTPUT": str(work.parent / "output"),
        "BASE_REF": "main",
        "PR": "7",
        "GH_TOKEN": "token",
    }
    for _ in range(2):  # two pushes to the pull request: one comment, updated
        for _name, script, _ in github_steps("plan"):
            ok(run_script(work, script, env))
    [comment] = api.comments["/repos/org/specs/issues/7/comments"]
    assert comment["body"].startswith("<!-- controlplane plan -->\n**Plan: ")  # summary first
    assert "| department `arts` | quota.gpus | 36 | 20 |" in comment["body"]
    assert "**reclaimed**" in comment["body"]
    assert [c for c in api.calls if c[0] != "GET"] == [
        ("POST", "/repos/org/specs/issues/7/comments"),
        ("UPDATE", str(comment["id"])),
    ]
    reviewed = re.search(r"controlplane plan `([0-9a-f]+)`", comment["body"])
    assert reviewed is not None

    merge(work)
    [(_, apply_step, _)] = github_steps("apply")
    before = {j["id"] for j in sim_jobs(work)}
    out = ok(run_script(work, apply_step, {**env, "EVENT": "push"}))
    assert f"plan {reviewed.group(1)}" in out
    gone = before - {j["id"] for j in sim_jobs(work)}
    assert len(gone) == 2  # the two reclaimed arts jobs
    settled = run_script(work, 'cp plan specs --detailed-exitcode --db "$CP_DB"', env)
    assert settled.returncode == 0, settled.stdout


def test_github_apply_refuses_what_was_not_reviewed(
    work: Path, forge: tuple[str, type[Forge]]
) -> None:
    url, _ = forge
    db = f"sqlite:///{work.parent / 'store.db'}"
    open_branch(work)
    env = {
        **github_env(db),
        "GITHUB_API_URL": url,
        "GITHUB_REPOSITORY": "org/specs",
        "BASE_REF": "main",
        "PR": "8",
        "GH_TOKEN": "token",
        "EVENT": "push",
    }
    for _name, script, _ in github_steps("plan"):
        ok(run_script(work, script, env))
    # a commit pushed after the last plan: the merged specs are not what was reviewed
    write_specs(work / "specs", org(20)[:-1])
    git(work, "commit", "-q", "-am", "one workload less")
    merge(work)
    [(_, apply_step, _)] = github_steps("apply")
    res = run_script(work, apply_step, env)
    assert res.returncode == 1 and "no reviewed plan for these specs" in res.stderr
    # "Run workflow" by hand applies the merged specs afresh
    ok(run_script(work, apply_step, {**env, "EVENT": "workflow_dispatch"}))


def test_github_apply_refuses_when_the_clusters_moved_on(
    work: Path, forge: tuple[str, type[Forge]]
) -> None:
    url, _ = forge
    db = f"sqlite:///{work.parent / 'store.db'}"
    open_branch(work)
    env = {
        **github_env(db),
        "GITHUB_API_URL": url,
        "GITHUB_REPOSITORY": "org/specs",
        "BASE_REF": "main",
        "PR": "9",
        "GH_TOKEN": "token",
        "EVENT": "push",
    }
    for _name, script, _ in github_steps("plan"):
        ok(run_script(work, script, env))
    # meanwhile one of chem's jobs ends (and the simulator forgets it)
    state_file = work.parent / "simulator" / "sim.json"  # beside the store
    state = json.loads(state_file.read_text())
    state["state"]["jobs"] = [j for j in state["state"]["jobs"] if j["workload"] != "chem/c0"]
    state_file.write_text(json.dumps(state))
    merge(work)
    [(_, apply_step, _)] = github_steps("apply")
    res = run_script(work, apply_step, env)
    assert res.returncode == 1 and "another state of the clusters" in res.stderr


def test_github_plan_posts_spec_errors_and_fails(
    work: Path, forge: tuple[str, type[Forge]]
) -> None:
    url, api = forge
    db = f"sqlite:///{work.parent / 'store.db'}"
    git(work, "checkout", "-q", "-b", "broken")
    (work / "specs" / "bad.yaml").write_text(
        "apiVersion: controlplane/v1\nkind: Project\nmetadata: {name: x}\nspec: {quota: 3}\n"
    )
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "broken")
    env = {
        **github_env(db),
        "GITHUB_API_URL": url,
        "GITHUB_REPOSITORY": "org/specs",
        "BASE_REF": "main",
        "PR": "10",
        "GH_TOKEN": "token",
    }
    (plan_name, plan_step, _), (_, comment_step, _) = github_steps("plan")
    assert plan_name == "plan"
    ok(run_script(work, plan_step, env))
    res = run_script(work, comment_step, env)
    assert res.returncode == 1  # the job fails after posting the errors
    [comment] = api.comments["/repos/org/specs/issues/10/comments"]
    assert "no plan (the error below)" in comment["body"] and "bad.yaml:4:" in comment["body"]


def test_github_plan_fails_on_a_usage_error(work: Path, forge: tuple[str, type[Forge]]) -> None:
    """A usage error (an option the installed cp does not know) exits 2, as "changes
    pending" does with --detailed-exitcode: the job passed with an empty comment (user
    trial). The example tells them apart by what was printed. The cp here is a stand-in
    that answers as an older cp without the option does (click's usage error)."""
    url, api = forge
    db = f"sqlite:///{work.parent / 'store.db'}"
    shim = work / ".venv" / "bin" / "cp"
    shim.unlink()
    shim.write_text(
        '#!/bin/sh\necho "Usage: cp plan [OPTIONS] [DIR]" >&2\n'
        'echo "Error: No such option: --detailed-exitcode" >&2\nexit 2\n'
    )
    shim.chmod(0o755)
    env = {
        **github_env(db),
        "GITHUB_API_URL": url,
        "GITHUB_REPOSITORY": "org/specs",
        "BASE_REF": "main",
        "PR": "11",
        "GH_TOKEN": "token",
    }
    (_, plan_step, _), (_, comment_step, _) = github_steps("plan")
    ok(run_script(work, plan_step, env))
    assert run_script(work, comment_step, env).returncode == 1
    [comment] = api.comments["/repos/org/specs/issues/11/comments"]
    assert "no plan (the error below)" in comment["body"]
    assert "No such option: --detailed-exitcode" in comment["body"]


# ------------------------------------------------------------------ GitLab


def test_gitlab_plan_notes_once_and_merge_applies_the_reviewed_plan(
    work: Path, forge: tuple[str, type[Forge]]
) -> None:
    url, api = forge
    db = f"sqlite:///{work.parent / 'store.db'}"
    open_branch(work)
    env = {
        **github_env(db),
        "CI_API_V4_URL": url,
        "CI_PROJECT_ID": "42",
        "CI_MERGE_REQUEST_IID": "3",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
        "CP_GITLAB_TOKEN": "token",
    }
    for _ in range(2):
        for line in gitlab_script("plan"):
            ok(run_script(work, line, env))
    [note] = api.comments["/projects/42/merge_requests/3/notes"]
    assert "| department `arts` | quota.gpus | 36 | 20 |" in note["body"]
    assert [c[0] for c in api.calls if c[0] != "GET"] == ["POST", "UPDATE"]
    merge(work)
    for line in gitlab_script("apply"):
        ok(run_script(work, line, {**env, "CI_PIPELINE_SOURCE": "push"}))
    settled = run_script(work, 'cp plan specs --detailed-exitcode --db "$CP_DB"', env)
    assert settled.returncode == 0, settled.stdout
