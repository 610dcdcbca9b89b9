"""`cp a b` through our console script against coreutils' `cp` (issue 12: it took 1.47 s).

When the virtualenv is active our `cp` shadows coreutils', so every copy pays for our
wrapper: starting Python, reading the first argument, exec'ing `/bin/cp`. This times, as
separate processes and interleaved so that load on the machine hits all alike:

  (a) baseline: coreutils `cp SRC DST`;
  (b) the wrapper: `.venv/bin/cp SRC DST` (the same copy, handed on);
  (c) the interpreter alone: `python -c pass` with the same interpreter and site-packages,
      the floor no Python wrapper can go below;

and prints each median with its difference and ratio to the baseline.

Run: .venv/bin/python benchmarks/passthrough.py [--runs 100]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _once(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs of each command")
    args = parser.parse_args()
    wrapper = Path(sys.executable).parent / "cp"
    coreutils = shutil.which("cp", path="/usr/bin:/bin") or "/bin/cp"
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp, "src.txt"), Path(tmp, "dst.txt")
        src.write_text("x" * 4096)
        commands = {
            f"coreutils {coreutils}": [coreutils, str(src), str(dst)],
            "wrapper .venv/bin/cp": [str(wrapper), str(src), str(dst)],
            "interpreter: python -c pass": [sys.executable, "-c", "pass"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for argv in commands.values():  # warm the page cache
            _once(argv)
        for _ in range(args.runs):
            for name, argv in commands.items():
                times[name].append(_once(argv))
    base = statistics.median(times[next(iter(commands))])
    print(f"{'command':<32} {'median ms':>10} {'p90 ms':>8} {'- baseline':>11} {'ratio':>7}")
    for name, samples in times.items():
        median = statistics.median(samples)
        p90 = statistics.quantiles(samples, n=10)[-1]
        print(
            f"{name:<32} {median * 1000:>10.1f} {p90 * 1000:>8.1f} "
            f"{(median - base) * 1000:>+10.1f} {median / base:>6.1f}x"
        )


if __name__ == "__main__":
    main()
