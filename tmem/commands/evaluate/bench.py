"""`python -m tmem bench`: performance on a generated corpus in the GroupMemBench shape (tmem.evaluation.bench);
this module parses the flags and prints the report (and, with --json, the figures as one JSON object)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tmem.commands.flags import add_backend_arguments, number, positive_int, settings_from_args
from tmem.evaluation.bench import DEFAULT_DIR, run_bench


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=positive_int, default=120_000, help="Messages in total (default 120,000).")
    parser.add_argument("--domains", type=number(int, 1, 4), default=4, help="Scopes (domains), 1-4 (default 4).")
    parser.add_argument("--questions", type=positive_int, default=200,
                        help="Questions timed through the whole pipeline, spread over the scopes (default 200).")
    parser.add_argument("--seed", type=int, default=7, help="Generator seed (default 7).")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                        help="Working folder for the generated JSONL and bench.duckdb (default data/generated). The "
                             "DuckDB file keeps the message vectors the questions embedded on demand, so a second "
                             "run reuses them; give a new folder to measure from scratch.")
    parser.add_argument("--no-rank-bm25", action="store_true", help="Skip the rank_bm25 comparison.")
    parser.add_argument("--json", action="store_true", help="Also print the figures as one JSON object.")
    add_backend_arguments(parser)


TARGETS = {"seed_retrieval": 20.0, "whole question (all stages)": 500.0}
# a million messages on one machine (import, whole offline question, peak memory)
MILLION_TARGETS = {"seed_retrieval": 20.0, "whole question (all stages)": 1000.0}


def targets(messages: int) -> tuple[dict[str, float], float, float]:
    """(per-question ms targets, import seconds, peak RSS MB) for a corpus of this size."""
    return (MILLION_TARGETS, 30.0, 2048.0) if messages >= 1_000_000 else (TARGETS, 5.0, 1536.0)


def format_report(r: dict) -> str:
    messages = r["corpus"]["messages"]
    per_question, import_s, rss_mb = targets(messages)
    lines = [f"tmem bench: {messages:,} messages in {r['corpus']['scopes']} scopes, "
             f"{r['questions_timed']} questions timed; {r['machine']['cpus']} CPUs; embedder {r['embedder']}", ""]
    lines.append(f"{'phase':<50}{'seconds':>10}")
    for name, seconds in r["phases"].items():
        target = f"  (target <= {import_s:.0f} s)" if name.startswith("import (") else ""
        lines.append(f"{name:<50}{seconds:>10.2f}{target}")
    lines += ["", f"{'per question':<50}{'median ms':>11}{'p95 ms':>10}{'max ms':>10}"]
    rows = dict(r["stages"])
    if "rank_bm25" in r:
        rows["seed_retrieval with plain rank_bm25"] = r["rank_bm25"]["seed_retrieval"]
    for name, s in rows.items():
        target = f"  (target <= {per_question[name]:.0f} ms)" if name in per_question else ""
        lines.append(f"{name:<50}{s['median_ms']:>11.2f}{s['p95_ms']:>10.2f}{s['max_ms']:>10.2f}{target}")
    if "rank_bm25" in r:
        lines.append(f"{'(rank_bm25 index build, all scopes)':<50}{r['rank_bm25']['build_s']:>11.2f} s")
    lines += ["", f"message vectors embedded on demand: {r['vectors_embedded_on_demand']:,} of {messages:,} messages "
              "(the windows' messages; no whole-scope embedding)",
              f"peak RSS: {r['peak_rss_mb']:.0f} MB (target <= {rss_mb:.0f} MB; before the rank_bm25 comparison); "
              "peak so far after each phase: "
              + ", ".join(f"{k} {v:.0f}" for k, v in r["peak_rss_after_mb"].items())]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    report = run_bench(args.messages, args.domains, args.questions, args.seed, args.dir,
                       rank_bm25=not args.no_rank_bm25, settings=settings_from_args(args), log=log)
    print(format_report(report))
    if args.json:
        print(json.dumps(report))
    return 0
