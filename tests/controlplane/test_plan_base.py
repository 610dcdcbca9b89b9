"""``cp plan --base REF``: the impact of a change to the specs, for the pull request that
makes it. A real git repository per test: specs committed on main, a branch that cuts a
department's quota, the plan of the branch against main, merge, apply, settle."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, department, project, workload
from tests.builders.cli import cp, ok, write_specs
from tests.builders.git import git, spec_repo

Capsys = pytest.CaptureFixture[str]
ROOT = Path(__file__).resolve().parents[2]
NOW = "2026-11-22T10:00:00+00:00"
POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 6}]


def org(arts_quota: int) -> list[dict[str, Any]]:
    """48 GPUs; department arts (projects paint, film) runs 36; science (chem) wants 20."""
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


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return spec_repo(tmp_path / "repo", lambda specs: write_specs(specs, org(36)))


def review_the_cut(repo: Path, capsys: Capsys) -> dict[str, Any]:
    """What runs today applied; a branch that cuts arts from 36 to 20 GPUs planned for
    review (``--base main``: its JSON returned), then merged into main."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    git(repo, "checkout", "-q", "-b", "cut-arts")
    write_specs(specs, org(20))
    git(repo, "commit", "-q", "-am", "arts: 36 -> 20")
    reviewed = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "cut-arts")
    return reviewed


def test_a_department_quota_cut_reviewed_merged_and_applied(repo: Path, capsys: Capsys) -> None:
    specs = repo / "specs"
    # what runs today: arts holds 36 GPUs, science its 12, two of chem's jobs wait
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    # a branch cuts arts from 36 to 20
    git(repo, "checkout", "-q", "-b", "cut-arts")
    write_specs(specs, org(20))
    git(repo, "commit", "-q", "-am", "arts: 36 -> 20")

    md = ok(cp(capsys, "plan", specs, "--base", "main", "--markdown", "--now", NOW)).out
    assert "| department `arts` | quota.gpus | 36 | 20 |" in md
    assert "| project `paint` | quota.gpus | 18 | 10 |" in md
    data = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()
    policy = data["policy"]
    assert policy["against"].startswith("main (plan ")
    shares = {(s["kind"], s["name"]): s for s in policy["shares"]}
    arts = shares["department", "arts"]
    assert arts["fairShareBefore"] > arts["fairShareAfter"]
    assert (
        shares["department", "science"]["fairShareAfter"]
        > shares["department", "science"]["fairShareBefore"]
    )
    reclaimed = sorted(w["workload"] for w in policy["workloads"] if w["head"] == "reclaimed")
    assert reclaimed and all(w.startswith(("arts", "paint/", "film/")) for w in reclaimed)
    for w in reclaimed:
        assert f"`{w}` | unchanged | **reclaimed**" in md
    starts = [w["workload"] for w in policy["workloads"] if w["head"] == "starts"]
    assert starts == ["chem/c3", "chem/c4"]
    # the plan's own actions agree with the impact it reports
    preempted = sorted(a["workload"] for a in data["actions"] if a["op"] == "preempt")
    assert preempted == reclaimed

    # merged: the plan on main now does what the review showed, and then nothing
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "cut-arts")
    applied = ok(cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", NOW)).json()
    done = sorted(a["workload"] for a in applied["actions"] if a["op"] == "preempt")
    assert done == reclaimed
    settled = cp(capsys, "plan", specs, "--detailed-exitcode", "--now", NOW)
    assert settled.code == 0, settled.out


def test_apply_reviewed_takes_the_plan_the_review_showed_not_a_later_one(
    repo: Path, capsys: Capsys
) -> None:
    """A read-only command after the merge (`cp status`, `cp explain`, a plain `cp plan`)
    stores a plan of the same specs; `apply --reviewed` took that newest one, which no
    reviewer saw, and acted on clusters that had moved on since the review (user trial).
    It takes the newest plan made with --base (refused, as before, once stale)."""
    specs = repo / "specs"
    reviewed = review_the_cut(repo, capsys)
    later = "2026-11-22T11:00:00+00:00"
    for command in (["status", specs], ["plan", specs], ["explain", "chem/c0", specs]):
        ok(cp(capsys, *command, "--now", later))
    applied = cp(capsys, "apply", specs, "--reviewed", "--auto-approve", "--json", "--now", later)
    assert ok(applied).json()["plan"] == reviewed["id"]


def test_apply_reviewed_takes_the_last_plan_made_for_review_not_the_latest_dated(
    repo: Path, capsys: Capsys
) -> None:
    """A reviewer's what-if (`cp plan --base main --now` an hour ahead) made before the
    pull request's own comment was the plan `apply --reviewed` took on merge, being dated
    latest: it preempted work a minRuntime kept at the comment's time (user trial). The
    plan made last for these specs is the one the review shows."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    git(repo, "checkout", "-q", "-b", "cut-arts")
    write_specs(specs, org(20))
    git(repo, "commit", "-q", "-am", "arts: 36 -> 20")
    ahead = "2026-11-22T12:00:00+00:00"
    what_if = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", ahead)).json()
    shown = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()
    assert what_if["id"] != shown["id"]
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "cut-arts")
    applied = cp(capsys, "apply", specs, "--reviewed", "--json", "--now", NOW)
    assert ok(applied).json()["plan"] == shown["id"]


def test_the_plan_last_applied_is_the_one_applied_last_not_the_latest_made(
    repo: Path, capsys: Capsys
) -> None:
    """A pull request's plan made at 10:00, a scheduled apply of main at 10:30 (nothing to
    do), the merge's reviewed apply at 11:00: every later plan reported the pull request's
    change again "against the plan last applied", taking the 10:30 plan, made later (user
    trial)."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    git(repo, "checkout", "-q", "-b", "cut-arts")
    write_specs(specs, org(20))
    git(repo, "commit", "-q", "-am", "arts: 36 -> 20")
    ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", "2026-11-22T10:00:00Z"))
    git(repo, "checkout", "-q", "main")
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-11-22T10:30:00Z"))
    git(repo, "merge", "-q", "--ff-only", "cut-arts")
    ok(cp(capsys, "apply", specs, "--reviewed", "--now", "2026-11-22T11:00:00Z"))
    after = ok(cp(capsys, "plan", specs, "--json", "--now", "2026-11-22T11:10:00Z")).json()
    assert "policy" not in after or not after["policy"].get("changes"), after.get("policy")


def test_a_reviewed_plan_applied_before_another_is_not_applied_already(
    repo: Path, capsys: Capsys
) -> None:
    """Pull request A reviewed, merged and applied; B the same; then B reverted on main,
    the specs A's again: `apply --reviewed` found A's plan, said "applied already" and
    exited 0, while the clusters ran B's version (user trial). The clusters have followed
    other specs since: it is refused, saying so."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    for branch, quota, at in (("a", 20, "10:00"), ("b", 28, "11:00")):
        git(repo, "checkout", "-q", "-b", branch)
        write_specs(specs, org(quota))
        git(repo, "commit", "-q", "-am", f"arts: {quota}")
        ok(cp(capsys, "plan", specs, "--base", "main", "--now", f"2026-11-22T{at}:00Z"))
        git(repo, "checkout", "-q", "main")
        git(repo, "merge", "-q", "--ff-only", branch)
        ok(cp(capsys, "apply", specs, "--reviewed", "--now", f"2026-11-22T{at}:01Z"))
    git(repo, "revert", "--no-edit", "HEAD")  # A's specs again
    refused = cp(capsys, "apply", specs, "--reviewed", "--json", "--now", "2026-11-22T12:00:00Z")
    assert refused.code != 0, refused.out
    error = refused.json()["error"]
    assert "applied since" in error["message"], error


def test_a_reviewed_apply_after_a_watch_applied_the_merged_specs_does_nothing(
    repo: Path, capsys: Capsys
) -> None:
    """The watch the README keeps beside the CI pulled the merge and applied it before the
    merge job ran; the merge job's `apply --reviewed` was refused ("made against another
    state of the clusters"), a failed CI run, though the clusters followed exactly the
    merged specs (trialC). It does nothing, names the plan that applied them, exits 0."""
    specs = repo / "specs"
    reviewed = review_the_cut(repo, capsys)
    watch = ok(cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", NOW)).json()
    assert watch["actions"], watch  # the watch's cycle carried the cut out
    merge_job = cp(capsys, "apply", specs, "--reviewed", "--auto-approve", "--now", NOW)
    assert merge_job.code == 0, merge_job.err
    assert f"plan {watch['plan']}" in merge_job.out and "already" in merge_job.out
    again = ok(cp(capsys, "apply", specs, "--reviewed", "--json", "--now", NOW)).json()
    assert again["plan"] == reviewed["id"] and again["actions"] == []
    assert again["followedBy"] == watch["plan"]
    settled = cp(capsys, "plan", specs, "--detailed-exitcode", "--now", NOW)
    assert settled.code == 0, settled.out


def test_a_pull_request_that_removes_a_cluster_shows_its_work_held(
    repo: Path, capsys: Capsys
) -> None:
    """A pull request deleting a Cluster that runs work: `--base` observed both sides'
    clusters, so the comment said "no changes", named no unreachable cluster and counted
    the cluster's GPUs in the fair shares; after the merge `apply --reviewed` was refused
    as stale, its observation (without the cluster) differing from the comment's (user
    trial). The pull request's side is planned as merged: the cluster gone, its work held."""
    specs = repo / "specs"
    two = [*org(36), cluster("west", pools=POOLS), workload("w", "chem", gpus=4, clusters=["west"])]
    write_specs(specs, two)
    git(repo, "commit", "-q", "-am", "west")
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    git(repo, "checkout", "-q", "-b", "drop-west")
    write_specs(specs, [d for d in two if d["metadata"]["name"] not in ("west", "w")])
    git(repo, "commit", "-q", "-am", "west goes")
    shown = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()
    assert "west" in shown["unreachable"], shown.get("unreachable")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "drop-west")
    applied = cp(capsys, "apply", specs, "--reviewed", "--json", "--now", NOW)
    assert ok(applied).json()["plan"] == shown["id"]


def test_a_plain_plan_of_the_same_moment_does_not_hide_the_reviewed_one(
    repo: Path, capsys: Capsys
) -> None:
    """A plain `cp plan` and the pull request's `cp plan --base` at the same --now had the
    same id (the same specs, observation, actions and time): the second was not stored, so
    `apply --reviewed` found no reviewed plan after the merge (user trial). And the base
    plan the comment names is stored, for `cp show`."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    git(repo, "checkout", "-q", "-b", "cut-arts")
    write_specs(specs, org(20))
    git(repo, "commit", "-q", "-am", "arts: 36 -> 20")
    plain = ok(cp(capsys, "plan", specs, "--json", "--now", NOW)).json()
    shown = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()
    assert plain["id"] != shown["id"]
    base_id = shown["policy"]["against"].split("(plan ")[1].rstrip(")")
    assert ok(cp(capsys, "show", base_id, specs, "--json")).json()["id"] == base_id
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "cut-arts")
    applied = cp(capsys, "apply", specs, "--reviewed", "--json", "--now", NOW)
    assert ok(applied).json()["plan"] == shown["id"]


def test_the_change_that_fixes_a_broken_base_is_applied_as_reviewed(
    repo: Path, capsys: Capsys
) -> None:
    """main's specs broken (a quota written as a word); the pull request fixing them got
    its comment (the base does not load: these specs planned alone), but that plan was not
    kept as reviewed, so the merge's `apply --reviewed` said the specs "changed after the
    last plan of the pull request" (user trial)."""
    specs = repo / "specs"
    broken = org(36)
    broken[1]["spec"]["quota"]["gpus"] = "lots"
    write_specs(specs, broken)
    git(repo, "commit", "-q", "-am", "a typo")
    git(repo, "checkout", "-q", "-b", "fix")
    write_specs(specs, org(36))
    git(repo, "commit", "-q", "-am", "the fix")
    shown = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()
    assert shown["policy"]["base"] == "main" and "does not load" in shown["policy"]["against"]
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "fix")
    applied = cp(capsys, "apply", specs, "--reviewed", "--json", "--now", NOW)
    assert ok(applied).json()["plan"] == shown["id"]


def test_the_base_plan_knows_the_version_a_revert_returns_to(repo: Path, capsys: Capsys) -> None:
    """main carries an edit not applied yet (paint/p0: 4 -> 2 GPUs) and a pull request
    reverts it. The observation held the old versions of running jobs only where the
    pull request's specs differ from them, so main's plan read job p0 as running "a
    version the store does not hold" and had it wait, where main's own plan replaces it
    (user trial)."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    edited = org(36)
    p0 = next(d for d in edited if d["metadata"]["name"] == "p0")
    p0["spec"]["gpus"] = 2
    write_specs(specs, edited)
    git(repo, "commit", "-q", "-am", "p0: 2 GPUs")
    git(repo, "checkout", "-q", "-b", "revert")
    write_specs(specs, org(36))
    git(repo, "commit", "-q", "-am", "p0: 4 GPUs again")
    shown = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()
    base_id = shown["policy"]["against"].split("(plan ")[1].rstrip(")")
    base = ok(cp(capsys, "show", base_id, specs, "--json")).json()
    assert ("submit", "paint/p0") in {(a["op"], a["workload"]) for a in base["actions"]}, base
    told = [w["reason"]["message"] for w in base["pending"] if w["workload"] == "paint/p0"]
    assert not any("does not hold" in m for m in told), told
    # the comment's row says what main would do and why, not an empty "why" (user trial)
    [row] = [w for w in shown["policy"]["workloads"] if w["workload"] == "paint/p0"]
    assert (row["base"], row["head"]) == ("replaced", "unchanged"), row
    assert row["reason"]["message"].startswith("without the change: the spec changed"), row


def test_the_plan_that_acts_on_a_cut_shows_the_policy_change(repo: Path, capsys: Capsys) -> None:
    """Without --base, the plan compares the quota table with the plan last applied."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    write_specs(specs, org(20))
    md = ok(cp(capsys, "plan", specs, "--markdown", "--now", NOW)).out
    assert "Against the plan last applied" in md
    assert "| department `arts` | quota.gpus | 36 | 20 |" in md
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    assert "Against" not in ok(cp(capsys, "plan", specs, "--now", NOW)).out


def test_against_the_plan_last_applied_names_budget_and_fairshare_changes(
    repo: Path, capsys: Capsys
) -> None:
    """Only the quota table's columns were compared: a raised budget that let waiting work
    start, or a new halfLife, went unmentioned (user trial)."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    docs = org(36)
    docs[3] = project("paint", gpus=18, department="arts", budget={"gpuHoursPerMonth": 100})
    docs[5] = project("chem", gpus=12, department="science", fairshare={"halfLife": "14d"})
    write_specs(specs, docs)
    policy = ok(cp(capsys, "plan", specs, "--json", "--now", NOW)).json()["policy"]
    assert [(c["name"], c["field"], c["before"], c["after"]) for c in policy["changes"]] == [
        ("chem", "fairshare.halfLife", "7d", "14d"),
        ("paint", "budget.gpuHoursPerMonth", None, 100),
    ]
    text = ok(cp(capsys, "plan", specs, "--now", NOW)).out
    assert "budget.gpuHoursPerMonth" in text and "fairshare.halfLife" in text


def test_against_the_plan_last_applied_names_per_type_quota_changes(
    repo: Path, capsys: Capsys
) -> None:
    """A quota rewritten per GPU type with the same sums (deserved and limit) showed no
    change at all, though the per-type limit took work back (user trial): only the sums
    were compared. Each type's figures are compared too."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    docs = org(36)
    chem = project("chem", gpus=12, department="science")
    chem["spec"]["quota"] = [
        {"gpuType": "a100_80", "gpus": 8, "limit": 12, "overQuotaWeight": 0.5},
        {"gpuType": "v100", "gpus": 4, "overQuotaWeight": 0.5},
    ]
    docs[5] = chem
    write_specs(specs, docs)
    policy = ok(cp(capsys, "plan", specs, "--json", "--now", NOW)).json()["policy"]
    rows = [(c["name"], c["field"], c["before"], c["after"]) for c in policy["changes"]]
    assert ("chem", "quota[a100_80].limit", None, 12) in rows, rows
    assert ("chem", "quota[v100].gpus", None, 4) in rows, rows
    assert not [r for r in rows if not r[1].startswith("quota[")], rows
    # a department's too (its figures were compared only where the earlier plan had some:
    # a department without budget or fairshare has none)
    docs[1] = department("arts", gpus=36)
    docs[1]["spec"]["quota"] = [{"gpuType": "a100_80", "gpus": 36, "limit": 40}]
    write_specs(specs, docs)
    policy = ok(cp(capsys, "plan", specs, "--json", "--now", NOW)).json()["policy"]
    rows = [(c["name"], c["field"], c["before"], c["after"]) for c in policy["changes"]]
    assert ("arts", "quota[a100_80].limit", None, 40) in rows, rows
    # the table shows the brackets (rich read "[a100_80]" as markup and dropped it)
    text = ok(cp(capsys, "plan", specs, "--now", NOW)).out
    assert "quota[a100_80].limit" in text, text


def test_a_renamed_project_is_compared_with_its_old_name(tmp_path: Path, capsys: Capsys) -> None:
    """Project paint renamed canvas (renamedFrom) with its budget raised in the same commit
    read as one project removed and one added, the budget unmentioned (user trial); with
    --base, its workloads read "not in the specs" on each side."""
    docs = org(36)
    specs = write_specs(tmp_path / "specs", docs)
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    renamed = [
        project(
            "canvas",
            gpus=18,
            department="arts",
            renamedFrom=["paint"],
            budget={"gpuHoursPerMonth": 100},
        )
        if d["metadata"]["name"] == "paint"
        else {**d, "spec": {**d["spec"], "project": "canvas"}}
        if d["kind"] == "Workload" and d["spec"]["project"] == "paint"
        else d
        for d in docs
    ]
    write_specs(specs, renamed)
    policy = ok(cp(capsys, "plan", specs, "--json", "--now", NOW)).json()["policy"]
    assert [(c["name"], c["field"], c["before"], c["after"]) for c in policy["changes"]] == [
        ("canvas", "name", "paint", "canvas"),
        ("canvas", "budget.gpuHoursPerMonth", None, 100),
    ]
    [share] = policy["shares"]  # the queue, under its new name, before and after
    assert share["name"] == "canvas" and share["fairShareBefore"] == share["fairShareAfter"]
    base = write_specs(tmp_path / "base", docs)
    diff = ok(cp(capsys, "plan", specs, "--base-dir", base, "--json", "--now", NOW)).json()
    changes = [(c["name"], c["field"]) for c in diff["policy"]["changes"]]
    assert changes == [("canvas", "name"), ("canvas", "budget.gpuHoursPerMonth")]
    assert diff["policy"]["workloads"] == [], "each workload under its two names is one"


def test_against_the_plan_last_applied_names_queues_added_and_removed(
    repo: Path, capsys: Capsys
) -> None:
    """Without --base, a department removed and a project added were left out, and only
    the fair share of a queue whose own figures changed was shown: a department's cut
    moved its projects' shares unseen (user trial). Now as --base shows them: a queue
    added or removed is a row, and the queues under a changed one show their shares."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    docs = org(20)  # arts cut from 36 to 20
    docs += [department("spare", gpus=0), project("newproj", gpus=0, department="science")]
    write_specs(specs, docs)
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    write_specs(specs, [d for d in docs if d["metadata"]["name"] != "spare"])
    policy = ok(cp(capsys, "plan", specs, "--json", "--now", NOW)).json()["policy"]
    assert [(c["kind"], c["name"], c["field"], c["after"]) for c in policy["changes"]] == [
        ("department", "spare", "", None)
    ]
    write_specs(specs, org(36))  # arts back to 36, newproj gone
    policy = ok(cp(capsys, "plan", specs, "--json", "--now", NOW)).json()["policy"]
    rows = {(c["kind"], c["name"], c["field"]) for c in policy["changes"]}
    assert ("project", "newproj", "") in rows and ("department", "arts", "quota.gpus") in rows
    shares = {(s["kind"], s["name"]) for s in policy["shares"]}
    assert {("project", "paint"), ("project", "film")} <= shares, "under arts"


def test_a_queue_added_shows_its_figures(repo: Path, capsys: Capsys) -> None:
    """A department added with a rank above everybody's, a quota and a limit, and a project
    under it with a budget: the comment read "added | none | present" for each, none of
    their figures shown, the rank nowhere (user trial)."""
    specs = repo / "specs"
    git(repo, "checkout", "-q", "-b", "lab")
    docs = [
        *org(36),
        department("lab", gpus=8, limit=8, rank=150),
        project("lp", gpus=8, department="lab", budget={"gpuHoursPerMonth": 100}),
    ]
    write_specs(specs, docs)
    git(repo, "commit", "-q", "-am", "a lab")
    policy = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()
    rows = {(c["kind"], c["name"], c["field"]): c["after"] for c in policy["policy"]["changes"]}
    assert rows[("department", "lab", "")] == "present"
    assert rows[("department", "lab", "rank")] == 150
    assert rows[("department", "lab", "quota.limit")] == 8
    assert rows[("project", "lp", "budget.gpuHoursPerMonth")] == 100
    # two queues added: two changes, not one per figure (code review)
    md = ok(cp(capsys, "plan", specs, "--base", "main", "--markdown", "--now", NOW)).out
    assert "2 policy changes" in md, md[:400]
    # and the section the headline points to counts them the same (it said 7: trialR)
    figures = len(policy["policy"]["changes"])
    assert f"Policy changes (2; {figures} figures)" in md, md
    cut = ok(cp(capsys, "plan", specs, "--base", "main", "--markdown", "--max-chars", "1600",
                "--now", NOW)).out  # fmt: skip
    assert "more policy figures" in cut and "more policy changes" not in cut, cut


def test_base_errors_are_one_line(repo: Path, capsys: Capsys, tmp_path: Path) -> None:
    specs = repo / "specs"
    res = cp(capsys, "plan", specs, "--base", "no-such-branch", "--now", NOW)
    assert res.code == 1 and "'no-such-branch' is not a git commit" in res.err
    elsewhere = write_specs(tmp_path / "plain", org(36))
    res = cp(capsys, "plan", elsewhere, "--base", "main", "--now", NOW)
    assert res.code == 1 and "not in a git repository" in res.err
    # a base whose specs do not load (the pull request that fixes a broken main): the
    # working specs are planned alone, and a warning names the ref and the file; it was an
    # error, so the fix got no plan and CI blamed it (user trial)
    (specs / "broken.yaml").write_text("kind: Project\nmetadata: {name: x}\nspec: {quota: 3}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "broken")
    (specs / "broken.yaml").unlink()
    res = cp(capsys, "plan", specs, "--base", "HEAD", "--now", NOW)
    assert res.code == 0 and "HEAD:specs/broken.yaml:" in res.err
    assert "the base HEAD does not load" in res.err and "planned alone" in res.err
    comment = ok(cp(capsys, "plan", specs, "--base", "HEAD", "--markdown", "--now", NOW)).out
    assert "the base HEAD does not load" in comment and "to submit" in comment
    # at the top, not only in the folded warnings: the comment otherwise reads as a plan
    # with no impact (user trial)
    top = comment.split("<details")[0]
    assert "> **Warning:** " in top and "the base HEAD does not load" in top, top
    doc = ok(cp(capsys, "plan", specs, "--base", "HEAD", "--json", "--now", NOW)).json()
    assert any("the base HEAD does not load" in w["message"] for w in doc["warnings"])
    # kept as the plan reviewed against the base, with no difference to show
    assert doc["policy"]["base"] == "HEAD" and not doc["policy"]["changes"], doc["policy"]


def test_base_dir_compares_two_directories(tmp_path: Path, capsys: Capsys) -> None:
    old = write_specs(tmp_path / "old", org(36))
    docs = org(36)
    docs[1] = department("arts", gpus=36, limit=40)
    new = write_specs(tmp_path / "new", docs)
    data = ok(cp(capsys, "plan", new, "--base-dir", old, "--json", "--now", NOW)).json()
    [change] = data["policy"]["changes"]
    assert (change["name"], change["field"], change["before"], change["after"]) == (
        "arts",
        "quota.limit",
        None,
        40,
    )


def test_a_policy_figure_left_out_is_shown_at_its_default(tmp_path: Path, capsys: Capsys) -> None:
    """A halfLife removed read "14d -> none", as if usage no longer decayed; it decays by
    the default 7d (user trial). Writing a default out changes nothing."""
    spelled = {"halfLife": "7d", "k": 1.0}
    old = write_specs(
        tmp_path / "old",
        [cluster(), project("a", fairshare={"halfLife": "14d"}), project("b", fairshare=spelled)],
    )
    new = write_specs(tmp_path / "new", [cluster(), project("a"), project("b")])
    data = ok(cp(capsys, "plan", new, "--base-dir", old, "--json", "--now", NOW)).json()
    changes = [(c["name"], c["field"], c["before"], c["after"]) for c in data["policy"]["changes"]]
    assert changes == [("a", "fairshare.halfLife", "14d", "7d")]


def test_an_interrupted_reviewed_apply_is_resumed_by_the_same_command(
    repo: Path, capsys: Capsys
) -> None:
    """`cp apply --reviewed` stopped after its first action said "the same `cp apply`
    again goes on from here"; the same command then found "no reviewed plan for these
    specs", since only plans not yet applied were looked for, and the half-applied plan
    could not be resumed (user trial on Slurm: both evictions done, no submission). A
    finished one, run again (a CI job retried), says it was applied."""
    from controlplane import review, workflow

    specs = repo / "specs"
    reviewed = review_the_cut(repo, capsys)
    assert len(reviewed["actions"]) >= 2

    asked = iter([False, True])  # stop after the first action
    loaded = workflow.load(specs)
    plan = review.reviewed_plan(specs, loaded, None)
    at = datetime.fromisoformat(NOW)  # the clock the other applies run at
    stopped = workflow.apply_saved(plan, specs, loaded, now=at, stop=lambda: next(asked, True))
    assert stopped.stopped and [o.status for o in stopped.outcomes] == ["done"]

    resumed = ok(cp(capsys, "apply", specs, "--reviewed", "--json", "--now", NOW)).json()
    assert resumed["plan"] == reviewed["id"] and resumed["resumed"]
    statuses = [a["status"] for a in resumed["actions"]]
    assert statuses[0] == "skipped" and set(statuses[1:]) == {"done"}
    again = ok(cp(capsys, "apply", specs, "--reviewed", "--json", "--now", NOW)).json()
    assert again["plan"] == reviewed["id"] and again["alreadyApplied"]


def test_a_stale_reviewed_plan_says_how_to_get_a_fresh_one(repo: Path, capsys: Capsys) -> None:
    """The advice was "run `cp plan` again", but `--reviewed` passes plain plans over."""
    specs = repo / "specs"
    review_the_cut(repo, capsys)
    later = "2026-11-22T11:00:00+00:00"
    # the clusters moved on, by a plan of other specs (the same specs applied by another
    # plan would leave nothing to do: test_a_reviewed_apply_after_a_watch_applied_...)
    write_specs(specs, [d for d in org(20) if d["metadata"]["name"] != "c4"])
    moved = ok(cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", later)).json()
    assert moved["actions"]
    git(repo, "checkout", "-q", "--", "specs")
    refused = cp(capsys, "apply", specs, "--reviewed", "--json", "--now", later).json()
    assert refused["error"]["kind"] == "stale-plan"
    assert "cp plan --base REF" in refused["error"]["message"]
    assert "run `cp plan` again" not in refused["error"]["message"]


def test_a_pull_request_that_shrinks_a_simulated_pool_shows_what_it_ends(
    repo: Path, capsys: Capsys
) -> None:
    """The simulator's hardware follows its Cluster spec, and both sides of `--base` were
    planned on the pull request's hardware: a PR removing a node read "no changes", exit 0,
    with no policy change (user trial). The base is planned on its own hardware, the pool's
    size is a policy change, and the work on the node that leaves is named."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    observed = ok(cp(capsys, "observe", specs, "--now", NOW)).json()
    on = {
        r["node"]: j["workload"]
        for c in observed["clusters"]
        for j in c["jobs"]
        if j["state"] == "RUNNING"
        for r in j["replicas"]
    }
    last = sorted(on)[-1]  # the pool's last node goes
    git(repo, "checkout", "-q", "-b", "shrink")
    docs = org(36)
    docs[0] = cluster(pools=[{**POOLS[0], "nodes": 5}])
    write_specs(specs, docs)
    git(repo, "commit", "-q", "-am", "a100: 6 -> 5 nodes")

    policy = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()[
        "policy"
    ]
    assert {
        "kind": "cluster",
        "name": "sim",
        "field": "nodePools[a100].nodes",
        "before": 6,
        "after": 5,
    } in policy["changes"]
    # its work moves off the node (here it waits for room: the pool is full), and keeps
    # running meanwhile: nothing ends it before then
    moving = {
        w["workload"]: w
        for w in policy["workloads"]
        if "leaves the cluster" in (w.get("reason") or {}).get("message", "")
    }
    assert on[last] in moving, policy["workloads"]
    assert moving[on[last]]["base"] == "unchanged"
    md = ok(cp(capsys, "plan", specs, "--base", "main", "--markdown", "--now", NOW)).out
    assert f"node {last} of sim leaves once empty" in md and on[last] in md


def test_a_workload_on_one_side_only_is_not_called_unchanged(repo: Path, capsys: Capsys) -> None:
    """A new workload read "unchanged -> starts", a removed waiting one "waits ->
    unchanged" with an empty reason (user trial)."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    git(repo, "checkout", "-q", "-b", "swap")
    docs = [d for d in org(36) if d["metadata"]["name"] != "c4"]  # c4 waits on main
    docs.append(workload("c9", "chem", gpus=1))
    write_specs(specs, docs)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c4 out, c9 in")
    policy = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()[
        "policy"
    ]
    fates = {w["workload"]: (w["base"], w["head"]) for w in policy["workloads"]}
    assert fates["chem/c4"] == ("waits", "not in the specs")
    assert fates["chem/c9"][0] == "not in the specs"
    assert "unchanged" not in fates["chem/c9"]


def test_fewer_replicas_of_a_running_elastic_job_shrink_it(repo: Path, capsys: Capsys) -> None:
    """An edit lowering an elastic workload's replicas read "grows" beside "1 of the 3
    running replicas stops", and was not counted as disturbing running work (user trial):
    a resize was told a shrink by its reason (reclaim, priority), not by what it does."""
    specs = repo / "specs"
    base = [cluster(pools=POOLS), project("e", gpus=8)]
    write_specs(specs, [*base, workload("wide", "e", gpus=1, replicas=3, minReplicas=1)])
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "an elastic job")
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    git(repo, "checkout", "-q", "-b", "narrow")
    write_specs(specs, [*base, workload("wide", "e", gpus=1, replicas=2, minReplicas=1)])
    git(repo, "commit", "-q", "-am", "wide: 3 -> 2 replicas")
    plan = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()
    [resize] = [a for a in plan["actions"] if a["op"] == "resize"]
    assert resize["workload"] == "e/wide" and resize["shrink"] is True
    fates = {w["workload"]: (w["base"], w["head"]) for w in plan["policy"]["workloads"]}
    assert fates["e/wide"] == ("unchanged", "shrinks")
    md = ok(cp(capsys, "plan", specs, "--markdown", "--now", NOW)).out
    assert "1 running workload disturbed" in md.splitlines()[0], md


def test_the_summary_counts_the_fair_shares_that_moved(tmp_path: Path, capsys: Capsys) -> None:
    """The comment's summary said "5 fair shares moved" over a table in which three of
    the five stayed as they were (20 -> 20): only their allocations moved (trialC)."""
    quickstart = ROOT / "examples" / "quickstart"
    root = spec_repo(
        tmp_path / "repo",
        lambda specs: shutil.copytree(quickstart, specs, ignore=shutil.ignore_patterns(".cp")),
        "quickstart",
    )
    specs = root / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    git(root, "checkout", "-q", "-b", "pr")
    product = specs / "workloads" / "product.yaml"
    docs = product.read_text().replace("gpus: 4, walltime: 12h", "gpus: 6, walltime: 12h")
    product.write_text("\n---\n".join(d for d in docs.split("\n---\n") if "ctr-retrain" not in d))
    git(root, "commit", "-q", "-am", "reindex on 6 GPUs, no ctr-retrain")
    shares = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()
    rows = shares["policy"]["shares"]
    moved = sum(r["fairShareBefore"] != r["fairShareAfter"] for r in rows)
    assert 0 < moved < len(rows)  # some queues see only their allocation change
    md = ok(cp(capsys, "plan", specs, "--base", "main", "--markdown", "--now", NOW)).out
    summary = next(line for line in md.splitlines() if line.startswith("**Against main"))
    assert f" {moved} fair share{'s' if moved != 1 else ''} moved" in summary, summary
    only = len(rows) - moved
    assert f"{only} allocation{'s' if only != 1 else ''} changed" in summary, summary


def test_apply_reviewed_after_a_plain_plan_says_what_a_reviewed_plan_is(
    repo: Path, capsys: Capsys
) -> None:
    """After ``cp plan specs`` (no ``--base``), ``cp apply specs --reviewed`` said the specs
    "changed after the last plan of the pull request", which they had not, and did not
    say that only a plan made with ``--base`` is a reviewed one (user trial)."""
    specs = repo / "specs"
    ok(cp(capsys, "plan", specs, "--now", NOW))
    res = cp(capsys, "apply", specs, "--reviewed", "--now", NOW)
    assert res.code == 1 and "no reviewed plan for these specs" in res.err
    said = " ".join(res.err.split())
    assert "cp plan --base REF" in said and "a plain `cp plan` is not one" in said, said
    assert "changed after" not in said


def test_a_reviewed_plan_pruned_is_said_so(repo: Path, capsys: Capsys) -> None:
    """A pull request left open longer than the history kept: `apply --reviewed` said only
    that no plan was made for review (trial Z)."""
    specs = repo / "specs"
    review_the_cut(repo, capsys)
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-11-23T10:00:00+00:00"))
    ok(cp(capsys, "store", "prune", specs, "--older-than", "1d"))
    refused = cp(capsys, "apply", specs, "--reviewed", "--auto-approve")
    assert refused.code == 1 and "were pruned from the history" in refused.err, refused.err
