"""Construction cost of every memory system (tmem.baselines) on the demo and on one LoCoMo conversation, against
the scripted OpenAI-compatible server on 127.0.0.1 (tmem.evaluation.scripted_server's FaultServer answering with
the memory systems' replies of its memory_replies.py, usage counted from each request as an OpenAI server counts
it: o200k tokens plus the chat format's): for each system, the calls and the prompt + completion tokens the server
received while the system ingested the scope once (cache off), next to `run --estimate`'s count of the same
ingestion (nothing sent), and both scaled to a GroupMemBench-sized run (App. A.1: 4 domains of 30,000 messages,
120,000 in all; the ingestion of one domain scales with its messages, so the figures are per-message rates times
120,000).

A system too slow to ingest a whole scope on 2 shared cores is measured on a prefix: the first N messages of the
scope in time order (`--prefix graphiti=96`), loaded as a corpus of its own; its figures are then scaled by
messages to the whole scope, and the table says so. A system whose calls grow faster than its messages (Graphiti
resolves each fact against the graph so far; A-Mem consults neighbours) is underestimated by that scaling.

    .venv/bin/python scripts/bench_baselines.py [--corpora demo,locomo] [--conversation 0]
        [--systems amem,hipporag2,...] [--prefix mem0=600,graphiti=96] [--no-estimate] [--json out.json]

Figures are written up in docs/baselines.md ("What a run costs").
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]


from scripts.measure_estimate import load_corpus  # noqa: E402  (one loader for both cost scripts)
from tmem import api  # noqa: E402
from tmem.api.backends import Prices  # noqa: E402
from tmem.api.models import roles_for  # noqa: E402
from tmem.baselines import SYSTEMS  # noqa: E402
from tmem.baselines.ingestion import forget, ingest  # noqa: E402
from tmem.evaluation.batch.estimate import estimate_run  # noqa: E402
from tmem.evaluation.scripted_server import FaultServer, counted_usage, scripted_settings  # noqa: E402
from tmem.evaluation.scripted_server.memory_replies import memory_reply  # noqa: E402
from tmem.types import CorpusData  # noqa: E402

GROUPMEMBENCH_MESSAGES = 120_000  # App. A.1: four domains of 30,000 messages each
PAPER_TOKENS = {"amem": 393.19e6, "hipporag2": 135.04e6, "hindsight": 487.35e6, "structmem": 133.49e6,
                "memgas": 41.10e6}  # Table 6 / App. E.1: total tokens on GroupMemBench (construction + answer + judge)


class Received:
    """The scripted memory replies (tmem.evaluation.scripted_server.memory_replies), and what the server received:
    calls, prompt and completion tokens, counted as an OpenAI server counts them."""

    def __init__(self):
        self.lock, self.calls, self.prompt, self.completion = threading.Lock(), 0, 0, 0

    def __call__(self, request: dict) -> str:
        reply = memory_reply(request)
        usage = counted_usage(request, reply)
        with self.lock:
            self.calls += 1
            self.prompt += usage["prompt_tokens"]
            self.completion += usage["completion_tokens"]
        return reply

    def take(self) -> tuple[int, int, int]:
        with self.lock:
            out = self.calls, self.prompt, self.completion
            self.calls = self.prompt = self.completion = 0
        return out


def prefix_corpus(store, corpus: str, scope: str, n: int) -> str:
    """The first `n` messages of `scope` (time order) and its first question, as a corpus of their own."""
    name = f"{corpus}-first{n}"
    if name in store.corpora():
        return name
    kept = sorted(store.messages(corpus, scope), key=lambda m: (m.timestamp, m.id))[:n]
    ids = {m.id for m in kept}
    question = store.questions(corpus, scope)[0]
    gold = store.gold(corpus, scope, question.id)
    golds = [(scope, replace(gold, evidence=tuple(u for u in (tuple(i for i in unit if i in ids)
                                                               for unit in gold.evidence) if u)))] if gold else []
    store.replace_corpus(name, CorpusData(kept, [question], golds), format="prefix")
    return name


def measured(system, store, corpus: str, scope_name: str, settings, received: Received) -> dict:
    """One real ingestion (cache off): what the server received, and the usage the system recorded."""
    forget()
    received.take()
    scope = api.open_scope(store, corpus, scope_name)
    started = time.perf_counter()
    done = ingest(system, scope, roles_for(settings, store=store), store=None, variant=system.name)
    seconds = time.perf_counter() - started
    calls, prompt, completion = received.take()
    recorded = [u for s, u in done.usage.items() if not s.endswith("(embedding)")]
    return {"calls": calls, "prompt": prompt, "completion": completion, "seconds": round(seconds, 1),
            "recorded_prompt": sum(u["prompt_tokens"] for u in recorded),
            "embedding": sum(u["prompt_tokens"] for s, u in done.usage.items() if s.endswith("(embedding)")),
            "counts": done.memory.counts}


def estimated(system, store, corpus: str, scope_name: str, settings) -> dict:
    """`run --estimate` on the scope's first question: its `ingestion` stage (counted, nothing sent)."""
    forget()
    question = store.questions(corpus, scope_name)[0]
    roles = roles_for(settings, store=store)
    started = time.perf_counter()
    est = estimate_run(store, corpus, [api.get_method(system.name)], [question], roles, Prices())
    tally = est.stages.get((system.name, "ingestion"))
    calls, prompt, completion = (tally.calls, tally.prompt_tokens, tally.completion_tokens) if tally else (0, 0, 0)
    return {"calls": calls, "prompt": prompt, "completion": completion,
            "seconds": round(time.perf_counter() - started, 1)}


def bench_corpus(name: str, args, tmp: Path, server: FaultServer, received: Received) -> list[dict]:
    db = str(tmp / f"{name}.duckdb")
    corpus = load_corpus(name, db, args.conversation)
    store = api.open_store(db, demo=False)
    scope = store.scopes(corpus)[0]
    total = len(store.messages(corpus, scope))
    settings = scripted_settings(server.base_url, **{"cache.mode": "off", "llm.timeout": 120})
    rows = []
    for system_name in args.systems.split(","):
        system = SYSTEMS[system_name]
        if system.unavailable():
            print(f"{name} {system_name}: skipped: {system.unavailable()}", file=sys.stderr)
            continue
        n = min(args.prefix.get(system_name, total), total)
        target = corpus if n == total else prefix_corpus(store, corpus, scope, n)
        row = {"corpus": name, "scope": scope, "messages": total, "system": system_name, "label": system.label,
               "measured_on": n, "actual": measured(system, store, target, scope, settings, received)}
        if args.estimate:
            row["estimate"] = estimated(system, store, target, scope, settings)
        rows.append(row)
        print(f"  {name} {system_name} on {n} messages: {json.dumps(row['actual'])}"
              + (f" estimate {json.dumps(row['estimate'])}" if args.estimate else ""), file=sys.stderr, flush=True)
    store.close()
    return rows


def scaled(figures: dict, by: float) -> dict:
    return {k: figures[k] * by for k in ("calls", "prompt", "completion")}


def millions(tokens: float) -> str:
    return f"{tokens / 1e6:.2f} M" if tokens >= 1e5 else f"{tokens:,.0f}"


def print_table(rows: list[dict]) -> None:
    head = (f"{'corpus':<8}{'system':<11}{'measured on':>13}  {'calls':>8}{'prompt':>12}{'completion':>12}"
            f"{'s':>7}  {'estimate: calls':>15}{'prompt':>12}{'completion':>12}")
    print(head + "\n" + "-" * len(head))
    for r in rows:
        by = r["messages"] / r["measured_on"]
        a, e = scaled(r["actual"], by), scaled(r.get("estimate") or {"calls": 0, "prompt": 0, "completion": 0}, by)
        on = f"{r['measured_on']}/{r['messages']}" + ("" if by == 1 else "*")
        print(f"{r['corpus']:<8}{r['system']:<11}{on:>13}  {a['calls']:>8,.0f}{a['prompt']:>12,.0f}"
              f"{a['completion']:>12,.0f}{r['actual']['seconds']:>7.0f}  {e['calls']:>15,.0f}{e['prompt']:>12,.0f}"
              f"{e['completion']:>12,.0f}")
    print("* measured on a prefix of the scope and scaled by messages to the whole scope")
    print(f"\nScaled to GroupMemBench ({GROUPMEMBENCH_MESSAGES:,} messages, 4 domains of 30,000; App. A.1), "
          "ingestion only; the paper's Table 6 totals also hold answer and judge tokens:")
    head = f"{'system':<11}{'from':<8}{'calls':>10}{'tokens (scripted)':>19}{'tokens (estimate)':>19}{'paper':>12}"
    print(head + "\n" + "-" * len(head))
    for r in rows:
        by = GROUPMEMBENCH_MESSAGES / r["measured_on"]
        a, e = scaled(r["actual"], by), scaled(r.get("estimate") or {"calls": 0, "prompt": 0, "completion": 0}, by)
        paper = millions(PAPER_TOKENS[r["system"]]) if r["system"] in PAPER_TOKENS else "-"
        print(f"{r['system']:<11}{r['corpus']:<8}{a['calls']:>10,.0f}{millions(a['prompt'] + a['completion']):>19}"
              f"{millions(e['prompt'] + e['completion']) if r.get('estimate') else '-':>19}{paper:>12}")


def prefixes(text: str) -> dict[str, int]:
    out = {}
    for part in filter(None, text.split(",")):
        name, _, n = part.partition("=")
        if name not in SYSTEMS or not n.isdigit() or int(n) < 1:
            raise SystemExit(f"--prefix: {part!r} is not SYSTEM=MESSAGES (systems: {', '.join(SYSTEMS)})")
        out[name] = int(n)
    return out


def commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "?"


def bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", default="demo,locomo", help="demo and/or locomo.")
    parser.add_argument("--conversation", type=int, default=0, help="LoCoMo conversation (0-9).")
    parser.add_argument("--systems", default=",".join(n for n, s in SYSTEMS.items() if s.needs_llm),
                        help="memory systems to measure (those that build with a model).")
    parser.add_argument("--prefix", type=prefixes, default={},
                        help="SYSTEM=N,...: measure SYSTEM on the first N messages of the scope and scale by messages.")
    parser.add_argument("--no-estimate", dest="estimate", action="store_false", help="skip run --estimate.")
    parser.add_argument("--json", type=Path, help="also write the rows here.")
    args = parser.parse_args()
    received = Received()
    server = FaultServer(default=("reply", received), counted_usage=True)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name in args.corpora.split(","):
                rows += bench_corpus(name, args, Path(tmp), server, received)
    finally:
        server.close()
    print(f"Ingestion per memory system against the scripted server (cache off); commit {commit()}, "
          f"{time.strftime('%Y-%m-%d', time.gmtime())}; lexical embedder")
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    bench()
