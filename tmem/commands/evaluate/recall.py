"""`python -m tmem recall`: key-evidence recall per retrieval variant and depth k (tmem.evaluation.recall); this
module parses the flags and prints the table (or one JSON line per k)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from tmem.api import open_store
from tmem.api.corpora import chain_writers
from tmem.api.models import roles_for
from tmem.commands.flags import add_backend_arguments, positive_int, settings_from_args
from tmem.config import VARIANTS as CONFIG_VARIANTS
from tmem.evaluation.budget_recall import DEFAULT_BUDGETS, budget_recall, format_budget
from tmem.evaluation.recall import (
    VARIANTS,
    eligible_items,
    evidence_recall,
    memo_roles,
    question_groups,
    recall_interval,
    split_items,
    to_json,
)
from tmem.limits import strip_control


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default="demo", help="Corpus name in the database (default: demo).")
    parser.add_argument("--k", default="36", help="Seed depth k, or a comma-separated sweep, e.g. 12,24,36,48,72.")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"Subset of {', '.join(VARIANTS)}.")
    parser.add_argument("--types", help="Comma-separated question types (default: all answerable types).")
    parser.add_argument("--limit", type=positive_int, help="Only the first N eligible questions (before --every).")
    parser.add_argument("--split", choices=("all", "dev", "test"), default="all",
                        help="Only one split's questions: dev = the first half of the scopes (of the source "
                             "conversations on an interleaved corpus), test = the rest (default: all).")
    parser.add_argument("--every", type=positive_int, default=1,
                        help="Only every N-th question in stored order, so each conversation gives its share (a "
                             "sample stratified by conversation): the output states the sample and each recall's "
                             "95 %% interval (default: 1, every question).")
    parser.add_argument("--variant", default="full",
                        help="Configuration preset of the tmem rows (tmem.config.VARIANTS, e.g. paper-discovery); "
                             "the controls keep the defaults (default: full).")
    parser.add_argument("--embedding-text", choices=("metadata", "plain"), default="metadata",
                        help="What the embedding baseline embeds (default: metadata-expanded text).")
    parser.add_argument("--json", action="store_true",
                        help='Print {"corpus", "k", "variants": {name: {"recall", "questions", "units", '
                             '"mean_messages"}}, "budget": {"matched", "curve" per split}} (one line per k).')
    parser.add_argument("--budgets", default=",".join(map(str, DEFAULT_BUDGETS)),
                        help="Message budgets of the recall-vs-messages curve; each k also gets every method at "
                             "T-Mem's own message count per question (budget-matched). 'off' skips both.")
    parser.add_argument("--out", help="Also write everything (recall per k, budget-matched, curve, dev/test "
                                      "splits) as one JSON file, e.g. data/recall/demo.json for the app's Recall view.")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")
    parser.add_argument("--quiet", action="store_true", help="No progress output.")
    add_backend_arguments(parser)


def parse_ks(text: str) -> list[int]:
    try:
        ks = [int(k) for k in str(text).split(",") if k.strip()]
    except ValueError:
        raise ValueError(f"--k must be integers separated by commas, got {text!r}") from None
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"--k must be positive, got {text!r}")
    return list(dict.fromkeys(ks))


def format_table(corpus: str, totals: dict[int, dict], roles: dict[str, str] | None = None,
                 chain_writers: list[str] = ()) -> str:
    """The recall table; `chain_writers`: the corpus's noise-chain notes (who wrote its injected chains), printed
    beside chain recall."""
    lines = [f"Key-evidence recall on {corpus!r} (micro over evidence units, Eq. 10; abstention excluded)"]
    lines += [", ".join(f"{k}: {v}" for k, v in roles.items())] if roles else []
    lines += [""]
    header = (f"{'k':>4}  {'variant':<16}{'recall':>8}{'questions':>11}{'units':>8}{'mean msgs':>11}"
              f"{'chain recall':>14}")
    lines += [header, "-" * len(header)]
    for k, results in totals.items():
        for v, r in results.items():
            chains = f"{r.chains_complete}/{r.chains}" if r.chains else "-"
            lines.append(f"{k:>4}  {v:<16}{r.recall:>8.4f}{r.questions:>11}{r.units:>8}{r.mean_messages:>11.1f}"
                         f"{chains:>14}")
    lines += ["", "chain recall: Complete Chain Recall (Exp-5), questions whose whole gold UPDATE chain (original, "
                  "revisions, rollback) was retrieved / questions with a chain (tmem/analysis/chains.py)."]
    lines += [f"  {strip_control(note)}" for note in chain_writers]
    lines += ["", "tmem-reranked and global-control rerank with the offline evidence-utility score in conversational "
                  "context (MiniLM cosine + IDF-weighted coverage), standing in for the paper's Qwen3-Reranker-8B."]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    ks = parse_ks(args.k)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown recall variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    if args.variant not in CONFIG_VARIANTS:
        raise ValueError(f"unknown --variant {args.variant!r}; known: {', '.join(CONFIG_VARIANTS)}")
    store = open_store(args.db)
    writers = chain_writers(store.corpus_info(args.corpus).get("notes"))
    roles = memo_roles(roles_for(settings_from_args(args), store=store))
    budgets = [] if str(args.budgets).strip().lower() in ("off", "none", "0", "") else parse_ks(args.budgets)
    log = None if args.quiet else (lambda s: print(s, file=sys.stderr))
    used = {k: v for k, v in roles.describe().items() if k in ("evidence_utility", "embedder")}
    if log:
        log(f"recall on {args.corpus!r}, k = {', '.join(map(str, ks))}; roles: "
            + ", ".join(f"{k}={v}" for k, v in used.items()))
    started = time.perf_counter()
    budget, totals = {}, {}
    if budgets:  # one pass per k gives both tables: the plain variants are read off the budget pass
        group_of = question_groups(store, args.corpus)
        items = split_items(eligible_items(store, args.corpus, args.types, args.limit), args.split, group_of,
                            args.every)
        budget = {k: budget_recall(store, args.corpus, k, sorted({*budgets, k}), roles, items,
                                   embedding_text=args.embedding_text, log=log, variant=args.variant,
                                   group_of=group_of) for k in ks}
        totals = {k: {v: r for v, r in budget[k].plain().items() if v in variants} for k in ks}
    else:
        if args.split != "all" or args.variant != "full":
            raise ValueError("--split and --variant apply to the budget pass: leave --budgets on")
        parts: dict = {}
        totals = evidence_recall(store, args.corpus, ks, variants, roles, types=args.types, limit=args.limit,
                                 embedding_text=args.embedding_text, log=log, every=args.every, per_question=parts)
    if log:
        log(f"done in {time.perf_counter() - started:.1f} s")
    sample = {}
    if args.limit or args.every != 1:  # a sample: say what it is and how far its figures may be off
        eligible = len(eligible_items(store, args.corpus, args.types))
        sample = {k: sample_statement(totals[k], eligible, args, *((scope_parts(budget[k], k), "conversations")
                                                                   if budgets else (parts, "questions")), k=k)
                  for k in ks}
    lines = [to_json(args.corpus, k, totals[k], used) | ({"budget": budget[k].to_json()} if budget else {})
             | ({"sample": sample[k]} if sample else {}) for k in ks]
    if args.out:
        write_json(args.out, {"corpus": args.corpus, "roles": used, "created_at": datetime.now(UTC).strftime(
            "%Y-%m-%d %H:%M UTC"), "runs": lines, **({"chain_writers": writers} if writers else {})})
    if args.json:
        for line in lines:
            print(json.dumps(line))
    else:
        print(format_table(args.corpus, totals, used, writers)
              + "".join("\n" + format_budget(b) for b in budget.values())
              + "".join("\n\n" + format_sample(k, s) for k, s in sample.items()))
    return 0


def scope_parts(result, k: int) -> dict:
    """{(k, variant): [(recovered, units) per conversation]} read off a budget pass (it sums per conversation)."""
    per_scope = [result.plain([scope]) for scope in result.scopes]
    return {(k, v): [(r[v].recovered, r[v].units) for r in per_scope] for v in (per_scope[0] if per_scope else {})}


def sample_statement(results: dict, eligible: int, args, parts: dict, clusters: str, *, k: int) -> dict:
    """What a sampled run measured: its size against the eligible questions, and each variant's recall with a
    95 % interval over the sampled `clusters` (questions; conversations for the budget pass, which sums per
    conversation; the finite-population correction only where questions are the clusters)."""
    questions = max((r.questions for r in results.values()), default=0)
    population = eligible if clusters == "questions" else None
    return {"every": args.every, "limit": args.limit, "questions": questions, "eligible": eligible,
            "clusters": clusters,
            "interval": {v: [None if x != x else round(x, 4)  # NaN: under two clusters, no interval
                             for x in recall_interval(parts.get((k, v), []), population)] for v in results}}


def format_sample(k: int, sample: dict) -> str:
    lines = [f"Sample (k = {k}): {sample['questions']} of {sample['eligible']} eligible questions"
             f" (--every {sample['every']}" + (f", --limit {sample['limit']}" if sample["limit"] else "")
             + f"); 95 % interval of each recall over the sampled {sample['clusters']}:"]
    lines += [f"  {v:<16}" + (f"[{lo:.3f}, {hi:.3f}]" if lo is not None else "- (under two sampled)")
              for v, (lo, hi) in sample["interval"].items()]
    return "\n".join(lines)


def write_json(path: str, body: dict) -> None:
    """Indented, except each per-question `why` entry, which is one compact line (a file holds every question)."""
    entries: list[str] = []

    def mark(entry: dict) -> str:
        entries.append(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
        return f"\x00why{len(entries) - 1}"

    runs = [run | {"budget": run["budget"] | {"why": [mark(e) for e in run["budget"]["why"]]}}
            if "why" in run.get("budget", {}) else run for run in body.get("runs", [])]
    text = json.dumps(body | {"runs": runs}, indent=1)
    for i, entry in enumerate(entries):
        text = text.replace(json.dumps(f"\x00why{i}"), entry, 1)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n", encoding="utf-8")
