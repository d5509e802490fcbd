"""Measure the model calls of one question against an OpenAI-compatible scripted server that answers every call
after a fixed delay (default 0.5 s; tmem.evaluation.scripted_server.FaultServer with its scripted valid replies):
wall time of `ask` on the demo's curated question, the calls made, and the most calls in flight at once; then a
batch of N questions (`run`). Caches off, lexical embedder: only the model calls are timed.

    .venv/bin/python scripts/measure_concurrency.py [--delay 0.5] [--batch 10] [--select N] [--max-in-flight N]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from tmem import api  # noqa: E402
from tmem.cli import main  # noqa: E402
from tmem.evaluation.scripted_server import FaultServer, scripted_reply  # noqa: E402


class Counting:
    """Wraps the scripted reply: sleeps `delay`, counts calls and the most in flight at once."""

    def __init__(self, delay: float, select: int = 0):
        self.delay, self.select, self.now, self.peak, self.calls = delay, select, 0, 0, 0
        self.lock = threading.Lock()

    def __call__(self, request: dict) -> str:
        with self.lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)
        time.sleep(self.delay)
        with self.lock:
            self.now -= 1
        reply = scripted_reply(request)
        if self.select and request["messages"][0]["content"].startswith("Strict query-conditioned evidence"):
            chosen = json.loads(reply)["selected"][:self.select]
            reply = json.dumps({"selected": chosen})
        return reply


def run(argv: list[str], counter: Counting) -> tuple[float, int, int]:
    counter.calls = counter.peak = 0
    start = time.perf_counter()
    rc = main(argv)
    if rc != 0:
        raise SystemExit(f"{argv[0]} failed ({rc})")
    return time.perf_counter() - start, counter.calls, counter.peak


def measure() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--max-in-flight", type=int, help="The endpoint's bound (default: the product's default).")
    parser.add_argument("--select", type=int, default=0,
                        help="Evidence utility keeps only the first N candidates of a window (0 = all; 1 gives about "
                             "the 46 calls of the issue's measurement)")
    args = parser.parse_args()
    counter = Counting(args.delay, args.select)
    server = FaultServer(default=("reply", counter))
    os.environ.update({"TMEM_LLM_MODEL": "fault-model", "TMEM_LLM_BASE_URL": server.base_url,
                       "TMEM_EMBEDDER": "lexical", "TMEM_CACHE": "off"})
    if args.max_in_flight:
        os.environ["TMEM_MAX_IN_FLIGHT"] = str(args.max_in_flight)
    with tempfile.TemporaryDirectory() as tmp:
        db = str(args.db or Path(tmp) / "demo.duckdb")
        store = api.open_store(db)  # loads the demo
        scope, qid = api.curated_question(store, "demo")
        store.close()
        seconds, calls, peak = run(["ask", "--db", db, "--question", qid, "--scope", scope, "--no-save"], counter)
        print(f"ask {qid}: {seconds:.1f} s, {calls} calls, at most {peak} in flight")
        with tempfile.TemporaryDirectory() as out:
            seconds, calls, peak = run(["run", "--db", db, "--corpus", "demo", "--variants", "full", "--limit",
                                        str(args.batch), "--out", out, "--no-store"], counter)
        print(f"run of {args.batch} questions: {seconds:.1f} s, {calls} calls, at most {peak} in flight")
    server.close()


if __name__ == "__main__":
    measure()
