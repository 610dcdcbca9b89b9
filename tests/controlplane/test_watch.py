"""`cp watch` left running: a real process on real files, through edits, a syntax error, a
file emptied for a moment, a lease held by somebody else, and a mass deletion."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from controlplane import watch
from controlplane.lease import here
from controlplane.store import Store, default_url
from controlplane.watch import Watcher, WatchOptions
from tests.builders import cluster, project, workload
from tests.builders.cli import cp, write_specs
from tests.builders.watching import Child

ROOT = Path(__file__).resolve().parents[2]
CP = str(Path(sys.executable).parent / "controlplane")


class Watch(Child):
    """A `cp watch --auto-approve` child process and the lines it prints."""

    def __init__(self, specs: Path, *extra: str) -> None:
        argv = [CP, "watch", str(specs), "--auto-approve", "--interval", "1", "--quiet", "0.5"]
        super().__init__([*argv, *extra])


def jobs(specs: Path, beside: Path | None = None) -> dict[str, str]:
    """Active job id by workload, from the simulator's state file (in the spec directory's
    ``.cp/``, or ``beside`` a store given by --db)."""
    folder = beside or specs / ".cp"
    state = json.loads((folder / "simulator" / "sim.json").read_text())["state"]
    return {
        j["workload"]: j["id"]
        for j in state["jobs"]
        if j["workload"] and j["state"] in ("PENDING", "RUNNING")
    }


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    """32 GPUs, two projects, ten workloads of 2 GPUs in three files: room to spare."""
    root = tmp_path / "q"
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 4}]
    write_specs(
        root, [cluster(pools=pools), project("p", gpus=16), project("q", gpus=16)], "org.yaml"
    )
    files = {"a.yaml": ("p", 4), "b.yaml": ("q", 4), "c.yaml": ("q", 2)}
    for name, (owner, count) in files.items():
        docs = [workload(f"{name[0]}{i}", owner, gpus=2) for i in range(count)]
        write_specs(root / "workloads", docs, name)
    return root


def applied(line: str) -> bool:
    return "applied:" in line


def test_watch_survives_a_minute_of_real_life(specs: Path) -> None:
    watch = Watch(specs)
    try:
        watch.wait_for(applied)
        running = jobs(specs)
        assert len(running) == 10

        # an edit: a new workload is started
        extra = specs / "workloads" / "extra.yaml"
        extra.write_text(yaml.safe_dump(workload("extra", "p", gpus=1), sort_keys=False))
        watch.wait_for(lambda line: applied(line) and "1 to submit" in line)
        assert "p/extra" in jobs(specs)

        # a syntax error: reported, nothing applied, the loop goes on
        broken = extra.read_text()
        extra.write_text(broken + "spec: [unclosed\n")
        watch.wait_for(lambda line: "specs do not load" in line)
        extra.write_text(broken)

        # a file emptied for a moment, as an editor saving it: nothing is cancelled (2 of 10
        # workloads: the prune guard would let it through; waiting for quiet files holds)
        blinking = specs / "workloads" / "c.yaml"
        content = blinking.read_text()
        for _ in range(3):
            blinking.write_text("")
            time.sleep(0.3)
            blinking.write_text(content)
            time.sleep(1.5)
        watch.wait_for(lambda line: "no changes" in line)
        assert {k: v for k, v in jobs(specs).items() if k in running} == running

        # the lease held by another live process: reported and retried, never fatal
        holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        store = Store(default_url(specs))
        assert store.acquire_lease(f"{here()}:{holder.pid}") is None
        try:
            line = watch.wait_for(lambda line: "another reconciler is applying" in line)
            assert f":{holder.pid} until" in line and "retrying in" in line
        finally:
            store.release_lease(f"{here()}:{holder.pid}")
            holder.kill()
            holder.wait()
        extra.unlink()  # and one more real change once the lease is free: a prune
        watch.wait_for(lambda line: applied(line) and "1 to cancel" in line, timeout=40)

        # half a minute more of edits and blinks: each lands, nothing else moves
        for i in range(6):
            extra.write_text(yaml.safe_dump(workload(f"more{i}", "q", gpus=2), sort_keys=False))
            watch.wait_for(lambda line: applied(line) and "1 to submit" in line)
            blinking.write_text("")
            time.sleep(0.3)
            blinking.write_text(content)
            extra.unlink()
            watch.wait_for(lambda line: applied(line) and "1 to cancel" in line)
            assert {k: v for k, v in jobs(specs).items() if k in running} == running

        # the final state matches the specs, and the loop is still there
        assert set(jobs(specs)) == set(running)
        assert watch.proc.poll() is None
    finally:
        code = watch.stop()
    assert code == 0
    assert (
        subprocess.run(
            [CP, "plan", str(specs), "--detailed-exitcode"], capture_output=True, check=False
        ).returncode
        == 0
    )


def test_a_mass_deletion_is_shown_not_applied(specs: Path) -> None:
    watch = Watch(specs)
    try:
        watch.wait_for(applied)
        before = jobs(specs)
        (specs / "workloads" / "a.yaml").unlink()  # 4 of 10 running workloads
        line = watch.wait_for(lambda line: "NOT applied" in line)
        assert "would cancel 4 of 10 running workloads" in line and "--allow-mass-prune" in line
        assert jobs(specs) == before
    finally:
        assert watch.stop() == 0
    # one cycle for cron: a plan held back needs a person, so it is not exit 0 (user trial)
    once = subprocess.run(
        [CP, "watch", str(specs), "--once", "--quiet", "0", "--auto-approve"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert once.returncode == 1 and "NOT applied" in once.stdout, once.stdout + once.stderr
    assert jobs(specs) == before
    allowed = Watch(specs, "--allow-mass-prune")
    try:
        allowed.wait_for(lambda line: applied(line) and "4 to cancel" in line)
    finally:
        assert allowed.stop() == 0


# ------------------------------------------------------------------ the loop's rules


def test_backoff_doubles_per_failure_in_a_row_and_is_capped(tmp_path: Path) -> None:
    watcher = Watcher(tmp_path, WatchOptions(interval=30), print)
    delays = []
    for failures in range(8):
        watcher.failures = failures
        delays.append(watcher.delay())
    assert delays == [30, 30, 60, 120, 240, 480, 600, 600]


def test_a_cycle_waits_until_the_spec_files_are_quiet(tmp_path: Path) -> None:
    spec = tmp_path / "a.yaml"
    spec.write_text("x: 1\n")
    watcher = Watcher(tmp_path, WatchOptions(quiet=1.0), print)
    started = time.monotonic()
    watcher.settle()
    assert time.monotonic() - started >= 0.9  # the file was written just now
    old = time.time() - 60
    os.utime(spec, (old, old))
    os.utime(tmp_path, (old, old))
    started = time.monotonic()
    watcher.settle()
    assert time.monotonic() - started < 0.5


def test_a_spec_file_dated_in_the_future_does_not_stall_the_loop(tmp_path: Path) -> None:
    """A spec file an hour ahead of this clock (clock skew on NFS, a tarball, rsync -t
    from a host ahead, touch -d) read as written "-3600 s ago": the loop waited an hour
    for it to be quiet, and said nothing (user trial). A date ahead says nothing about
    when it was written: quiet is then no change for --quiet seconds."""
    spec = tmp_path / "a.yaml"
    spec.write_text("x: 1\n")
    ahead = time.time() + 3600
    os.utime(spec, (ahead, ahead))
    watcher = Watcher(tmp_path, WatchOptions(quiet=0.2), print)
    settled = threading.Thread(target=watcher.settle, daemon=True)
    started = time.monotonic()
    settled.start()
    settled.join(timeout=30)  # a guard against the old hour-long wait, not a speed target
    stalled = settled.is_alive()
    watcher.stop()
    assert not stalled, "settle still waits for a file dated an hour ahead"
    assert time.monotonic() - started >= 0.2  # it did wait for the files to be quiet


def test_a_cycle_held_off_by_writes_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spec file rewritten more often than --quiet (an editor's autosave, a sync tool)
    held the loop off with nothing in the log: a stalled loop looked like a quiet one
    (user trial). Held off for more than ten times --quiet, it says so, once."""
    spec = tmp_path / "a.yaml"
    spec.write_text("x: 1\n")
    said: list[str] = []
    watcher = Watcher(tmp_path, WatchOptions(quiet=0.1), said.append)
    stop_at = time.monotonic() + 1.6
    read_dates = watch.spec_dates

    def rewritten(spec_dir: Path) -> dict[str, float]:
        """The file is written again just before each look, for 1.6 s: a writer a busy
        machine cannot delay into a quiet gap (a writer thread's sleeps could: CI)."""
        if time.monotonic() < stop_at:
            spec.write_text("x: 1\n")
        return read_dates(spec_dir)

    monkeypatch.setattr(watch, "spec_dates", rewritten)
    watcher.settle()
    [line] = said
    assert "held off: the spec files keep changing" in line and "a.yaml" not in line


def test_watch_once_exits_nonzero_when_its_cycle_fails(tmp_path: Path) -> None:
    """For cron and CI: one cycle, and its failure is the exit code."""
    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=8), workload("w", "p")])
    run = [CP, "watch", str(specs), "--once", "--quiet", "0"]
    good = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stdout + good.stderr
    (specs / "broken.yaml").write_text("kind: Workload\nmetadata: {name: [\n")
    bad = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "broken.yaml" in bad.stdout + bad.stderr


def test_a_failed_apply_names_its_action_and_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unattended loop's only line for a failed apply read "apply stopped: 0 done, 1
    failed": not which action, nor the cluster's error (user trial on Kubernetes: a 403,
    the namespace being deleted). The line names the first failed action and its error."""
    from adapters.base import PermanentError
    from adapters.simulator import SimulatorAdapter

    def refused(self: SimulatorAdapter, *args: object, **kwargs: object) -> object:
        raise PermanentError("403 Forbidden: namespace cp-p is being terminated")

    monkeypatch.setattr(SimulatorAdapter, "execute", refused)
    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=8), workload("w", "p")])
    watcher = Watcher(specs, WatchOptions(quiet=0, auto_approve=True), print)
    outcome = watcher.cycle()
    assert outcome.failed
    assert "1 failed" in outcome.line
    assert "submit p/w" in outcome.line and "namespace cp-p is being terminated" in outcome.line


def test_a_loop_with_nothing_to_do_does_not_fill_the_store(tmp_path: Path) -> None:
    """Every cycle stored its plan, the same empty plan again and again: ~43 KB a cycle
    with 300 waiting workloads, 124 MB a day at the default interval (user trial). An
    empty plan with the outcome of the last applied one is not stored again, and a watch
    that does not apply stores none (as build_plan's keep intended)."""
    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=8), workload("w", "p")])
    for args in (["--auto-approve"], ["--auto-approve"], ["--auto-approve"], []):
        run = [CP, "watch", str(specs), "--once", "--quiet", "0", *args]
        done = subprocess.run(run, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        stored = [status for (status,) in db.execute("SELECT status FROM plans")]
    assert sorted(stored) == ["applied", "applied"], "the submit, then one empty plan"
    shown = subprocess.run([CP, "history", str(specs)], capture_output=True, text=True)
    assert shown.returncode == 0 and "submit" in shown.stdout
    # the plan a cycle with nothing to do names is the stored one: `cp show` finds it
    line = subprocess.run(
        [CP, "watch", str(specs), "--once", "--quiet", "0", "--auto-approve"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    named = line.split(" plan ", 1)[1].split(":", 1)[0]
    found = subprocess.run([CP, "show", named, str(specs)], capture_output=True, text=True)
    assert found.returncode == 0, found.stdout + found.stderr


def test_a_watch_that_does_not_apply_names_plans_cp_show_finds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A watch without --auto-approve named a new plan id every cycle ("plan 7a8bb7cd...:
    1 to submit; not applied"), the same decision each time, and `cp show` found none of
    them: its plans were not stored (trialJ). It stores a decision once, as a plan held
    back is, and names the stored plan: this one, or the last one applied when nothing
    has changed since."""
    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=8), workload("w", "p")])
    watcher = Watcher(specs, WatchOptions(quiet=0), lambda _: None)
    named = []
    for _ in range(3):
        cycle = watcher.cycle()
        assert "1 to submit" in cycle.line and "not applied" in cycle.line, cycle.line
        named.append(cycle.line.split(" plan ", 1)[1].split(":", 1)[0])
    assert len(set(named)) == 1, named
    assert cp(capsys, "show", named[0], specs).code == 0
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        stored = db.execute("SELECT count(*) FROM plans").fetchone()[0]
    said = set()
    for _ in range(3):  # nothing to do now: that decision too is stored once
        cycle = watcher.cycle()
        assert "no changes" in cycle.line and not cycle.failed, cycle.line
        said.add(cycle.line.split(" plan ", 1)[1].split(":", 1)[0])
    assert len(said) == 1 and cp(capsys, "show", said.pop(), specs).code == 0
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        assert db.execute("SELECT count(*) FROM plans").fetchone()[0] == stored + 1


def _open_on(path: Path) -> int:
    """Descriptors this process holds on ``path`` (Linux: /proc/self/fd)."""
    fds = Path("/proc/self/fd")
    held = 0
    for fd in fds.iterdir():
        try:
            held += os.readlink(fd) == str(path)
        except OSError:
            continue  # closed while listed
    return held


@pytest.mark.parametrize("auto_approve", [True, False])
def test_cycles_do_not_keep_the_store_open(tmp_path: Path, auto_approve: bool) -> None:
    """Every cycle opened the store and never closed it: one more descriptor on the
    database (and ~0.6 MB) per cycle, until the process ran out of descriptors (1,024 at
    a 30 s interval: ~8 hours) and every cycle failed with 'cannot open ... (unable to
    open database file)' (user trial)."""
    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=8), workload("w", "p")])
    db = (specs / ".cp" / "controlplane.db").resolve()
    watcher = Watcher(specs, WatchOptions(auto_approve=auto_approve, quiet=0), lambda _: None)
    assert not watcher.cycle().failed
    after_one = _open_on(db)
    for _ in range(4):
        assert not watcher.cycle().failed
    assert _open_on(db) == after_one == 0


def test_a_tick_comes_while_other_files_change(tmp_path: Path) -> None:
    """Changes to files that are not specs were filtered out before the loop saw them, and
    the loop looked at its clock only when something reached it: anything writing in the
    spec directory (`cp status` storing its plan, an editor's swap file, `git fetch`)
    held every cycle off (0 cycles in 30 s at a 5 s interval; user trial)."""
    from controlplane.watch import spec_change

    watcher = Watcher(tmp_path, WatchOptions(interval=0.3), lambda _: None)

    def busy() -> Iterator[set[tuple[int, str]]]:
        while True:
            time.sleep(0.01)
            yield {(2, str(tmp_path / ".cp" / "controlplane.db")), (1, str(tmp_path / ".a.swp"))}

    start = time.monotonic()
    watcher._next(busy(), 0.3)
    assert 0.3 <= time.monotonic() - start < 2
    # a spec file's change still starts a cycle at once
    start = time.monotonic()
    watcher._next(iter([{(2, str(tmp_path / "org.yaml"))}]), 30)
    assert time.monotonic() - start < 1
    assert spec_change(str(tmp_path / "w.yml"), tmp_path)
    assert not spec_change(str(tmp_path / ".cp/x.yaml"), tmp_path)
    assert not spec_change(str(tmp_path / ".github/workflows/ci.yaml"), tmp_path)  # not read


def test_the_loop_does_not_keep_what_its_cycles_threw_away(tmp_path: Path) -> None:
    """Each cycle's plan sets the objects alive before it aside from the collector and
    gives them back afterwards, which keeps Python's full collection from coming round:
    ~540 objects of garbage stayed per cycle of a small org, and `cp watch` grew ~60 KB a
    cycle for as long as it ran. The loop now collects once per cycle, while it waits."""
    import gc

    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=8), workload("w", "p")])
    counts: list[int] = []
    watcher = Watcher(
        specs,
        WatchOptions(auto_approve=True, quiet=0, interval=0),
        lambda _: counts.append(len(gc.get_objects())),
    )

    def ticks() -> Iterator[set[tuple[int, str]]]:
        while True:
            if len(counts) >= 14:
                watcher.stop()
            yield set()

    watcher.run(ticks())
    assert len(counts) == 14
    assert counts[-1] - counts[4] < 100, counts


def test_a_lease_held_by_an_interactive_apply_does_not_slow_the_loop(tmp_path: Path) -> None:
    """A lease held elsewhere counted as a failure of the loop, doubling its delay per
    cycle up to ten minutes: a person applying by hand a few times while watch ran left
    the loop asleep long after they were done (earlier user trial). Somebody else acting
    is not the loop failing: the cycle says so, and the next one comes at the interval."""
    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=8), workload("w", "p")])
    lines: list[str] = []
    watcher = Watcher(specs, WatchOptions(quiet=0, auto_approve=True, interval=30), lines.append)
    (specs / ".cp").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    store = Store(default_url(specs))
    try:
        assert store.acquire_lease(f"{here()}:{holder.pid}") is None
        for _ in range(3):
            watcher.run(once=True)
            assert watcher.failed and "another reconciler is applying" in lines[-1]
            assert watcher.delay() == 30
    finally:
        store.release_lease(f"{here()}:{holder.pid}")
        holder.kill()
        holder.wait()
    watcher.run(once=True)  # the lease is free: the cycle applies
    assert not watcher.failed and "applied" in lines[-1], lines[-1]


def test_a_watch_that_does_not_apply_records_what_it_sees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cp watch` without --auto-approve recorded nothing (README: the store learns of an
    edit at the first observation that sees it, `cp watch` among them). An edit it saw
    while the job ran was then taken for one made after the job completed: the workload
    was 'finished' and never ran again, where after a `cp observe` it is resubmitted
    (user trial)."""
    short = workload("short", "p", gpus=1, walltime="10m", command=["python", "a.py"])
    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=8), short])
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0  # the wall clock: as watch
    short["spec"]["command"] = ["python", "b.py"]  # edited while it runs
    write_specs(specs, [cluster(), project("p", gpus=8), short])
    watcher = Watcher(specs, WatchOptions(quiet=0), lambda _: None)
    cycle = watcher.cycle()
    assert not cycle.failed and "not applied (no --auto-approve)" in cycle.line, cycle.line
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()  # the 10-minute job ended
    plan = cp(capsys, "plan", specs, "--json", "--now", later).json()
    assert [(a["op"], a["workload"]) for a in plan["actions"]] == [("submit", "p/short")], plan


def test_a_store_deleted_under_the_loop_is_not_replaced_by_an_empty_one(tmp_path: Path) -> None:
    """The SQLite store deleted while `cp watch --auto-approve` ran: the next cycle quietly
    started a new, empty one, and `cp history --verify` said "history intact: 2 records"
    where there had been 22 (user trial). The loop now says the store is gone and does
    nothing until it is restored or the loop restarted."""
    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=8), workload("w", "p")])
    db = specs / ".cp" / "controlplane.db"
    watcher = Watcher(specs, WatchOptions(auto_approve=True, quiet=0), lambda _: None)
    assert not watcher.cycle().failed and db.exists()
    db.unlink()
    cycle = watcher.cycle()
    assert cycle.failed and "is gone" in cycle.line, cycle.line
    assert not db.exists()  # not started afresh behind people's backs
    fresh = Watcher(specs, WatchOptions(auto_approve=True, quiet=0), lambda _: None)
    assert not fresh.cycle().failed and db.exists()  # a loop started anew begins a new one


def test_a_watch_that_does_not_apply_never_stands_in_an_apply_s_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A watch without --auto-approve records what it observes under the apply lease (as
    `cp observe` does). Its cycle failed when an apply held the lease, and an apply that
    began while it observed was refused (code review). Now the watch observes without
    recording while somebody applies, and an apply waits out an observation."""
    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=8), workload("w", "p")])
    (specs / ".cp").mkdir()
    store = Store(default_url(specs))
    applier = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert store.acquire_lease(f"{here()}:{applier.pid} by someone") is None
        cycle = Watcher(specs, WatchOptions(quiet=0), lambda _: None).cycle()
        assert not cycle.failed, cycle.line
    finally:
        store.release_lease(f"{here()}:{applier.pid} by someone")
        applier.kill()
        applier.wait()
    observer = f"{here()}:{os.getpid()} by watch (observing)"
    assert store.acquire_lease(observer) is None
    threading.Timer(1.0, store.release_lease, args=(observer,)).start()
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0  # waited, then applied


@pytest.mark.parametrize("how", ["symlink", "renamed"])
def test_a_spec_directory_replaced_under_the_loop_is_still_watched(
    specs: Path, tmp_path: Path, how: str
) -> None:
    """git-sync points a symlink at each new checkout, a deploy renames a fresh copy into
    place: the loop's file watcher kept watching the directory that was gone, so an edit
    reached the loop only at its --interval (ten minutes once a spec error had backed it
    off), and the edits after a swap as late (trialJ). The watcher follows the directory
    the path names now, and a replacement is itself a change."""
    root = tmp_path / "spec-root"
    if how == "symlink":
        root = tmp_path / "current"
        root.symlink_to(specs)
    else:
        specs.rename(root)
    db = f"sqlite:///{tmp_path / 'store.db'}"  # outside the checkout, as with git-sync
    watch = Watch(root, "--db", db, "--interval", "300")
    try:
        watch.wait_for(applied)
        running = jobs(root, tmp_path)  # the simulator beside the store
        time.sleep(1.5)  # the cycles before the swap have told their lines
        while not watch.lines.empty():
            watch.seen.append(watch.lines.get())
        fresh = tmp_path / "fresh"
        shutil.copytree(root, fresh, symlinks=True)  # the next checkout, as a copy
        if how == "symlink":
            (tmp_path / "next").symlink_to(fresh)
            os.replace(tmp_path / "next", root)
        else:
            root.rename(tmp_path / "old")
            fresh.rename(root)
            shutil.rmtree(tmp_path / "old")
        watch.wait_for(lambda line: "no changes" in line, timeout=15)  # the swap: a change
        extra = root / "workloads" / "extra.yaml"
        extra.write_text(yaml.safe_dump(workload("extra", "p", gpus=1), sort_keys=False))
        watch.wait_for(lambda line: "1 to submit, 0 waiting; applied: 1 done" in line, timeout=15)
        assert jobs(root, tmp_path).keys() == {*running, "p/extra"}
    finally:
        assert watch.stop() == 0


def test_a_checkout_swapped_in_under_the_loop_has_the_same_simulated_jobs(
    specs: Path, tmp_path: Path
) -> None:
    """git-sync's next checkout has no ``.cp/``, where the simulator kept its cluster: after
    the swap the simulated cluster was empty while the store (--db, outside) still held
    placeholders for its jobs, which waited "in the cluster's own queue" for ever (soak
    trial). The simulator keeps its clusters beside a store given elsewhere."""
    state = tmp_path / "state"
    state.mkdir()
    root = tmp_path / "current"
    root.symlink_to(specs)
    watch = Watch(root, "--db", f"sqlite:///{state / 'controlplane.db'}", "--interval", "300")
    try:
        watch.wait_for(applied)
        time.sleep(1.5)  # the cycles before the swap have told their lines
        while not watch.lines.empty():
            watch.seen.append(watch.lines.get())
        fresh = tmp_path / "fresh"
        shutil.copytree(specs, fresh, ignore=shutil.ignore_patterns(".cp"))  # a checkout
        (tmp_path / "next").symlink_to(fresh)
        os.replace(tmp_path / "next", root)
        swapped = watch.wait_for(lambda line: "cycle" in line, timeout=15)
        assert "no changes, 0 waiting" in swapped, swapped
        running = jobs(root, state)
        assert len(running) == 10
        extra = root / "workloads" / "extra.yaml"
        extra.write_text(yaml.safe_dump(workload("extra", "p", gpus=1), sort_keys=False))
        watch.wait_for(lambda line: "1 to submit, 0 waiting; applied: 1 done" in line, timeout=15)
        assert jobs(root, state) == {**running, "p/extra": jobs(root, state)["p/extra"]}
    finally:
        assert watch.stop() == 0


def test_a_loop_started_before_its_spec_directory_exists_waits_for_it(
    specs: Path, tmp_path: Path
) -> None:
    """A watch started before its directory is there (a service up before the clone or
    the mount) told its first cycle's failure, then died with a traceback when its file
    watcher could not start (FileNotFoundError: No path was found; trialJ). It goes on
    failing at its interval, and the directory appearing starts a cycle."""
    later = tmp_path / "later"
    watch = Watch(later, "--interval", "300")
    try:
        watch.wait_for(lambda line: "is not a directory of specs" in line)
        time.sleep(1.5)
        shutil.copytree(specs, later)
        watch.wait_for(lambda line: "10 to submit, 0 waiting; applied: 10 done" in line, 15)
    finally:
        assert watch.stop() == 0


# ------------------------------------------------------------------ files being written


def test_a_spec_file_still_being_written_is_not_read(specs: Path) -> None:
    """A spec file written in two steps by a process that keeps it open and pauses longer
    than --quiet (a slow copy, a paste into `cat > file`): the cycle read the first half,
    which loaded, and applied it: the workloads of the missing half were cancelled, and
    started again once the file was whole (user trial, an interactive session killed). The
    cycle now waits for the writer to close the file, and says so."""
    watch = Watch(specs)
    try:
        watch.wait_for(applied)
        running = jobs(specs)
        target = specs / "workloads" / "c.yaml"
        whole = target.read_text()
        cut = whole.index("---")  # the first of its two workloads: valid on its own
        with target.open("w") as f:
            f.write(whole[:cut])
            f.flush()
            line = watch.wait_for(lambda line: "cycle waits:" in line or "to cancel" in line)
            assert f"c.yaml is open for writing by pid {os.getpid()}" in line, line
            time.sleep(2.5)  # five times --quiet: the file has been quiet long enough
            f.write(whole[cut:])
        watch.wait_for(lambda line: "no changes" in line)
        assert jobs(specs) == running
        assert not [line for line in watch.seen if "to cancel" in line], watch.seen
    finally:
        assert watch.stop() == 0


def test_a_plan_whose_specs_changed_while_it_was_made_is_not_applied(
    specs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file half written when the cycle read it, whose second half lands while the plan is
    made (a writer that does not keep it open, pausing about as long as --quiet): the plan
    of what was read is not applied, and the next cycle reads the files again."""
    from controlplane import workflow

    watcher = Watcher(specs, WatchOptions(auto_approve=True, quiet=0), lambda _: None)
    watcher.settle()
    assert applied(watcher.cycle().line)
    running = jobs(specs)
    target = specs / "workloads" / "c.yaml"
    whole, real_load = target.read_text(), workflow.load

    def load_then_the_rest_lands(spec_dir: Path) -> object:
        loaded = real_load(spec_dir)
        target.write_text(whole)
        later = time.time() + 5
        os.utime(target, (later, later))  # a date of its own, whatever the clock's grain
        return loaded

    target.write_text(whole[: whole.index("---")])  # the first half: c1 is not there yet
    watcher.settle()
    monkeypatch.setattr(workflow, "load", load_then_the_rest_lands)
    cycle = watcher.cycle()
    assert "NOT applied: the spec files changed while it was planned" in cycle.line, cycle.line
    assert jobs(specs) == running
    monkeypatch.setattr(workflow, "load", real_load)
    watcher.settle()
    cycle = watcher.cycle()
    assert "no changes" in cycle.line and not cycle.failed, cycle.line
    assert jobs(specs) == running


def test_a_cycle_counts_actions_in_the_plan_s_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cp plan` says "1 to submit, 1 to cancel" (least disruptive first); the watch's line
    for the same plan said "1 to cancel, 1 to submit", its ops sorted by name (user trial)."""
    root = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", root, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", root, "--auto-approve").code == 0
    vision = root / "workloads" / "vision.yaml"
    vision.write_text(vision.read_text().replace("gpus: 4\n", "gpus: 2\n"))  # replaced
    said = cp(capsys, "plan", root).out
    assert "Plan: 1 to submit, 1 to cancel; 2 waiting." in said, said
    line = cp(capsys, "watch", root, "--once", "--quiet", "0", "--auto-approve").out
    assert "1 to submit, 1 to cancel, 2 waiting; applied: 2 done" in line, line
