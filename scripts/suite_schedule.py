"""How evenly `make test`'s two workers share the suite: pytest-xdist's `--dist loadfile` schedule replayed from
one run's per-test durations, for the order make test hands files out (tests/conftest.py, HEAVY_FIRST) and for the
longest-processing-time order (files by measured seconds, longest first).

  make test PYTEST_ARGS="--durations=0 --durations-min=0 -p no:cacheprovider" > /tmp/run.log
  python scripts/suite_schedule.py /tmp/run.log [--workers 2] [--top 25]

xdist gives each worker one file, then another whenever at most 2 of its tests are still pending
(xdist.scheduler.loadscope): the replay does the same with each test's setup + call + teardown seconds. It prints
each worker's busy seconds and the run's simulated wall under both orders, and the longest files. A gap between
the simulated wall and half the total is time one worker waits for the other; a wall above the simulated one is
time inside tests (collection, waits, the other processes on the machine), not the schedule.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"\s*([\d.]+)s (setup|call|teardown)\s+(.+?)\s*$")
PREFETCH = 2  # xdist's LoadScopeScheduling: a worker gets the next file when at most this many tests are pending


def seconds_per_test(log: Path) -> dict[str, float]:
    """{test id: setup + call + teardown seconds} from a `--durations=0` report."""
    out: dict[str, float] = {}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if m := LINE.match(line):
            out[m.group(3)] = out.get(m.group(3), 0.0) + float(m.group(1))
    return out


def collected() -> list[str]:
    """Test ids in the order make test hands them out (conftest's order: `--collect-only` applies it too)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    return [line.strip() for line in done.stdout.splitlines() if "::" in line]


def replay(files: list[str], tests_of: dict[str, list[str]], cost: dict[str, float], workers: int) -> list[float]:
    """Each worker's busy seconds when `files` are handed out in this order."""
    queue, busy = list(files), [0.0] * workers
    pending: list[list[str]] = [[] for _ in range(workers)]
    for w in range(workers):  # one file each, then a second where the first has at most PREFETCH tests
        if queue:
            pending[w] += tests_of[queue.pop(0)]
    for w in range(workers):
        if queue and len(pending[w]) <= PREFETCH:
            pending[w] += tests_of[queue.pop(0)]
    while any(pending):
        w = min((w for w in range(workers) if pending[w]), key=lambda w: busy[w] + cost.get(pending[w][0], 0.0))
        busy[w] += cost.get(pending[w].pop(0), 0.0)
        if queue and len(pending[w]) <= PREFETCH:
            pending[w] += tests_of[queue.pop(0)]
    return busy


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path, help="the output of a run with --durations=0 --durations-min=0")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--top", type=int, default=25, help="how many of the longest files to list")
    args = ap.parse_args(argv)
    cost = seconds_per_test(args.log)
    tests_of: dict[str, list[str]] = {}
    for test in collected():
        tests_of.setdefault(test.split("::")[0], []).append(test)
    per_file = {f: sum(cost.get(t, 0.0) for t in ts) for f, ts in tests_of.items()}
    missing = sum(t not in cost for ts in tests_of.values() for t in ts)
    print(f"{len(cost)} tests timed, {missing} collected without a time (counted 0 s); "
          f"{sum(per_file.values()):.0f} s in all, {sum(per_file.values()) / args.workers:.0f} s per worker at best")
    for name, order in (("make test's order", list(tests_of)),
                        ("longest file first", sorted(tests_of, key=lambda f: -per_file[f]))):
        busy = replay(order, tests_of, cost, args.workers)
        print(f"{name:<20} simulated wall {max(busy):6.0f} s  workers " + " ".join(f"{b:.0f}" for b in busy))
    for f in sorted(per_file, key=lambda f: -per_file[f])[:args.top]:
        print(f"  {per_file[f]:6.1f} s  {len(tests_of[f]):3d} tests  {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
