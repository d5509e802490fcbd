"""How close `run --estimate` comes to what the run then spends: the demo's first N questions with all four roles on
the scripted OpenAI-compatible test server (tests/llm_server.py: replies after a fixed delay, usage counted from the
request as an OpenAI server counts it), response cache off. Prints per stage the estimated and the actual prompt
tokens and calls, and the error.

    .venv/bin/python scripts/measure_estimate.py [--questions 10] [--select 1] [--delay 0.5] [--variants full]

--select N: the test server's evidence utility keeps the first N candidates of a window (0 = all of them); the
offline stand-in the estimate uses in its place keeps its own choice, which is where the estimate's error comes from.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

from llm_server import FaultServer  # noqa: E402
from measure_concurrency import Counting  # noqa: E402

from tmem import api  # noqa: E402
from tmem.cli import main  # noqa: E402


def measure() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--select", type=int, default=1)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--variants", default="full")
    parser.add_argument("--pilot", type=int, default=0,
                        help="First run N other questions (temporal ones, not among the first 10) with the cache on, "
                             "so that the estimate is calibrated by their replies.")
    args = parser.parse_args()
    server = FaultServer(default=("reply", Counting(args.delay, args.select)), counted_usage=True)
    os.environ.update({"TMEM_LLM_MODEL": "fault-model", "TMEM_LLM_BASE_URL": server.base_url,
                       "TMEM_EMBEDDER": "lexical", "TMEM_CACHE": "on" if args.pilot else "off"})
    with tempfile.TemporaryDirectory() as tmp:
        db, out = str(Path(tmp) / "demo.duckdb"), Path(tmp) / "run"
        store = api.open_store(db)  # loads the demo
        first = {q.id for q in store.questions("demo")[:args.questions]}
        pilot = [q for q in store.questions("demo") if q.type == "temporal" and q.id not in first][:args.pilot]
        store.close()
        if args.pilot:
            assert len(pilot) == args.pilot, "not enough temporal questions outside the measured ones"
            with contextlib.redirect_stdout(io.StringIO()):
                main(["run", "--db", db, "--corpus", "demo", "--variants", args.variants, "--types", "temporal",
                      "--limit", str(args.pilot), "--out", str(Path(tmp) / "pilot"), "--quiet", "--no-store"])
        common = ["run", "--db", db, "--corpus", "demo", "--variants", args.variants, "--limit",
                  str(args.questions), "--out", str(out), "--quiet", "--no-store"]
        with contextlib.redirect_stdout(io.StringIO()) as text:
            if main(common + ["--estimate", "--json"]) != 0:
                raise SystemExit("the estimate failed")
        estimate = json.loads(text.getvalue())
        with contextlib.redirect_stdout(io.StringIO()):
            main(common)
        summary = json.loads((out / "summary.json").read_text())
    server.close()
    print(f"{args.questions} demo questions, variants {args.variants}, all four roles on the test server "
          f"(evidence utility keeps {args.select or 'all'} per window), "
          + (f"calibrated by a pilot of {args.pilot} other questions" if args.pilot else "cache off, uncalibrated")
          + f"; estimate took {estimate['seconds']} s")
    print(f"{'variant/stage':<24}{'est. prompt':>12}{'actual':>10}{'error':>9}{'est. calls':>12}{'actual':>8}"
          f"{'on stand-ins':>14}")
    total_est = total_act = 0
    for variant, stages in estimate["variants"].items():
        for stage, e in stages.items():
            a = summary["variants"][variant]["stages"].get(stage, {})
            if not e["calls"] and not a.get("calls"):
                continue
            total_est, total_act = total_est + e["prompt_tokens"], total_act + a.get("prompt_tokens", 0)
            err = (e["prompt_tokens"] - a["prompt_tokens"]) / a["prompt_tokens"] if a.get("prompt_tokens") else 0
            print(f"{variant + '/' + stage:<24}{e['prompt_tokens']:>12}{a.get('prompt_tokens', 0):>10}{err:>+9.1%}"
                  f"{e['calls']:>12}{a.get('calls', 0):>8}{e['from_standins']:>14}")
    print(f"{'total':<24}{total_est:>12}{total_act:>10}{(total_est - total_act) / total_act:>+9.1%}")


if __name__ == "__main__":
    measure()
