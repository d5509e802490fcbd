"""`python -m tmem recall`: key-evidence recall per retrieval variant and depth k (paper Exp-2, Sec. 5.3; App. A.4
Eq. 9-10; App. E.2). Needs no LLM: seeds, discovery and the controls run with the offline default roles.

Variants (each a set of retrieved message ids per question):
  bm25            metadata-expanded BM25 top-k (the seeds R_k(q))
  embedding       cosine top-k over message vectors (metadata-expanded text by default)
  tmem            R'(q) = seeds U discovered evidence (Sec. 4.2); structuring and linearization are not involved
  tmem-reranked   R'(q) reranked to exactly k messages (App. E.2)
  global-control  same seeds and topics; embedding top-100n of the whole topic, same selection, reranked to k
The stages are the batch runner's (tmem.stages), so a recall figure and a batch run agree.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

VARIANTS = ("bm25", "embedding", "tmem", "tmem-reranked", "global-control")
_METHOD = {"bm25": "bm25", "embedding": "embedding", "tmem": "full", "tmem-reranked": "tmem-reranked",
           "global-control": "global-control"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default="demo", help="Corpus name in the database (default: demo).")
    parser.add_argument("--k", default="36", help="Seed depth k, or a comma-separated sweep, e.g. 12,24,36,48,72.")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"Subset of {', '.join(VARIANTS)}.")
    parser.add_argument("--types", help="Comma-separated question types (default: all answerable types).")
    parser.add_argument("--limit", type=int, help="Only the first N eligible questions.")
    parser.add_argument("--embedding-text", choices=("metadata", "plain"), default="metadata",
                        help="What the embedding baseline embeds (default: metadata-expanded text).")
    parser.add_argument("--json", action="store_true",
                        help='Print {"corpus", "k", "variants": {name: {"recall", "questions", "units", '
                             '"mean_messages"}}} (one line per k for a sweep).')
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")
    parser.add_argument("--quiet", action="store_true", help="No progress output.")
    from tmem.models.settings import add_backend_arguments

    add_backend_arguments(parser)


class _QueryMemo:
    """Keeps query vectors in memory for the run (each question is embedded once, then asked again per k and
    variant); passages pass through. Same name as the wrapped embedder, so vector caches are shared."""

    def __init__(self, inner):
        self.inner, self.name, self.offline = inner, inner.name, inner.offline
        self._memo: dict[str, object] = {}

    def embed(self, texts, kind: str = "passage", **kwargs):
        import numpy as np

        if kind != "query":
            return self.inner.embed(texts, kind, **kwargs)
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            self._memo.update(zip(missing, self.inner.embed(missing, kind="query")))
        return np.vstack([self._memo[t] for t in texts]) if texts else self.inner.embed(texts, kind)


def parse_ks(text: str) -> list[int]:
    try:
        ks = [int(k) for k in str(text).split(",") if k.strip()]
    except ValueError:
        raise ValueError(f"--k must be integers separated by commas, got {text!r}") from None
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"--k must be positive, got {text!r}")
    return list(dict.fromkeys(ks))


def retrieved_sets(question, scope, k: int, variants, ctx_for) -> dict[str, tuple[str, ...]]:
    """{variant: retrieved ids} for one question at depth k (`ctx_for(method name, k)` gives a stage Context)."""
    from tmem.evaluation.baselines import rerank
    from tmem.stages import discovery, seed_retrieval

    out: dict[str, tuple[str, ...]] = {}
    seeds = None
    if {"bm25", "tmem", "tmem-reranked", "global-control"} & set(variants):
        seeds = seed_retrieval(question, scope, ctx_for("bm25", k), {})
        out["bm25"] = seeds.fields["evidence_ids"]
    if "embedding" in variants:
        out["embedding"] = seed_retrieval(question, scope, ctx_for("embedding", k), {}).fields["evidence_ids"]
    if {"tmem", "tmem-reranked"} & set(variants):
        ctx = ctx_for("tmem", k)
        found = discovery(question, scope, ctx, seeds.fields)
        out["tmem"] = found.fields["evidence_ids"]
        if "tmem-reranked" in variants:
            embedder = ctx.roles.embedder
            out["tmem-reranked"] = rerank(question, out["tmem"], scope, scope.vectors(embedder),
                                          embedder.embed([question.text], kind="query")[0], k,
                                          found.fields["selections"])
    if "global-control" in variants:
        out["global-control"] = discovery(question, scope, ctx_for("global-control", k), seeds.fields) \
            .fields["evidence_ids"]
    return {v: out[v] for v in variants}


def evidence_recall(store, corpus: str, ks, variants=VARIANTS, roles=None, *, types=None, limit=None,
                    embedding_text: str = "metadata", log=None) -> dict[int, dict]:
    """{k: {variant: Recall}} over the corpus's recall-eligible questions (Eq. 10)."""
    from dataclasses import replace

    from tmem.evaluation.baselines import get_method
    from tmem.evaluation.metrics import Recall, question_recall, recall_eligible
    from tmem.models.embedders import embedding_progress
    from tmem.models.factory import build_roles
    from tmem.scope import load_scope
    from tmem.stages import Context

    roles = roles or build_roles(store=store)
    roles = replace(roles, embedder=_QueryMemo(roles.embedder))
    wanted = {t.strip() for t in types.split(",")} if types else None
    items = []
    for q in store.questions(corpus):
        if wanted is not None and (q.type or "") not in wanted:
            continue
        gold = store.gold(corpus, q.scope, q.id)
        if recall_eligible(q, gold):
            items.append((q, gold))
    items = items[:limit] if limit is not None else items
    contexts: dict[tuple[str, int], Context] = {}

    def ctx_for(name: str, k: int) -> Context:
        if (name, k) not in contexts:
            contexts[(name, k)] = Context(get_method(_METHOD[name], k, embedding_text), roles, store)
        return contexts[(name, k)]

    totals = {k: {v: Recall(0, 0, 0, 0) for v in variants} for k in ks}
    scopes = list(dict.fromkeys(q.scope for q, _ in items))
    started = time.perf_counter()
    done = 0
    for name in scopes:
        scope = load_scope(store, corpus, name, embedding_progress(log) if log else None)
        scope.vectors(roles.embedder)  # embed (or load) once, before timing questions
        batch = [(q, g) for q, g in items if q.scope == name]
        roles.embedder.embed([q.text for q, _ in batch], kind="query")  # fills the query-vector cache at once
        for q, gold in batch:
            for k in ks:
                for v, ids in retrieved_sets(q, scope, k, variants, ctx_for).items():
                    totals[k][v] = totals[k][v] + question_recall(gold, ids)
            done += 1
            if log and (done % 100 == 0 or done == len(items)):
                log(f"  {done}/{len(items)} questions ({time.perf_counter() - started:.0f} s)")
    return totals


def to_json(corpus: str, k: int, results: dict, roles: dict[str, str] | None = None) -> dict:
    """`roles` names the embedder and evidence-utility role used, so a fallback embedder shows in the output."""
    out = {"corpus": corpus, "k": k, "variants": {v: r.as_dict() for v, r in results.items()}}
    return out | ({"roles": roles} if roles else {})


def format_table(corpus: str, totals: dict[int, dict], roles: dict[str, str] | None = None) -> str:
    lines = [f"Key-evidence recall on {corpus!r} (micro over evidence units, Eq. 10; abstention excluded)"]
    lines += [", ".join(f"{k}: {v}" for k, v in roles.items())] if roles else []
    lines += [""]
    header = f"{'k':>4}  {'variant':<16}{'recall':>8}{'questions':>11}{'units':>8}{'mean msgs':>11}"
    lines += [header, "-" * len(header)]
    for k, results in totals.items():
        for v, r in results.items():
            lines.append(f"{k:>4}  {v:<16}{r.recall:>8.4f}{r.questions:>11}{r.units:>8}{r.mean_messages:>11.1f}")
    lines += ["", "tmem-reranked and global-control rerank with the offline evidence-utility score in conversational "
                  "context (MiniLM cosine + IDF-weighted coverage), standing in for the paper's Qwen3-Reranker-8B."]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from tmem.models.factory import build_roles
    from tmem.models.settings import settings_from_args
    from tmem.store import open_store

    ks = parse_ks(args.k)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown recall variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    store = open_store(args.db)
    store.corpus_info(args.corpus)
    roles = build_roles(settings_from_args(args), store=store)
    log = None if args.quiet else (lambda s: print(s, file=sys.stderr))
    used = {k: v for k, v in roles.describe().items() if k in ("evidence_utility", "embedder")}
    if log:
        log(f"recall on {args.corpus!r}, k = {', '.join(map(str, ks))}; roles: "
            + ", ".join(f"{k}={v}" for k, v in used.items()))
    started = time.perf_counter()
    totals = evidence_recall(store, args.corpus, ks, variants, roles, types=args.types, limit=args.limit,
                             embedding_text=args.embedding_text, log=log)
    if log:
        log(f"done in {time.perf_counter() - started:.1f} s")
    if args.json:
        for k in ks:
            print(json.dumps(to_json(args.corpus, k, totals[k], used)))
    else:
        print(format_table(args.corpus, totals, used))
    return 0
