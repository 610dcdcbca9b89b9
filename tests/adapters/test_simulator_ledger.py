"""The simulated accounting's promise to a reader of recent runs: a look at the runs that
ended since T finds every one of them, however late each was written (a job forgotten
weeks after its end), across appends, prunes and cut-off tails (a crash's)."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from adapters.simulator.ledger import Ledger, Mark
from specs.snapshot import JobRun, JobState
from tests.builders import NOW

HOUR = timedelta(hours=1)

# a batch: (hours the clock moves on before it, [hours before the write each run ended])
batches = st.lists(
    st.tuples(st.integers(0, 48), st.lists(st.integers(0, 24 * 30), max_size=4)),
    min_size=1,
    max_size=12,
)


@given(batches=batches, since_hours=st.integers(-24 * 40, 24 * 20), crash=st.booleans())
def test_every_run_ended_since_a_time_is_read(
    batches: list[tuple[int, list[int]]], since_hours: int, crash: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp), "c")
        mark, at, written = Mark(), NOW, []
        for n, (step, ages) in enumerate(batches):
            at += step * HOUR
            runs = [
                JobRun(
                    job=f"{n}.{i}",
                    workload="p/w",
                    started_at=at - (age + 1) * HOUR,
                    ended_at=at - age * HOUR,
                    gpus=1,
                    state=JobState.COMPLETED,
                )
                for i, age in enumerate(ages)
            ]
            counted = ledger.append(mark, runs, at)
            if crash and n == len(batches) // 2:
                continue  # written, never counted: the next append cuts it off
            mark, written = counted, written + runs
        since = NOW + since_hours * HOUR
        wanted = {r.job for r in written if r.ended_at and r.ended_at >= since}
        got = {r.job for r in ledger.read(mark, since)}
        assert wanted <= got <= {r.job for r in written}
        assert sorted(r.job for r in ledger.read(mark)) == sorted(r.job for r in written)
        pruned = ledger.prune(mark, since, at)
        assert wanted <= {r.job for r in ledger.read(pruned)}
