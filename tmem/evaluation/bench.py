"""`python -m tmem bench`: performance on a generated corpus in the GroupMemBench shape (default 120,000 messages =
4 scopes x 30,000, paper App. A.1) on this machine: import, BM25 index build / save / load, message vectors,
median and p95 per pipeline stage and per whole question with the offline roles, plain rank_bm25 seed retrieval
side by side, and peak memory. Benchmarks print figures; nothing here is a timed unit test.

The bench also times persisting the BM25 index (`save_index` / `load_index`: the sparse weight matrix with
scipy.sparse.save_npz and the vocabulary as JSON, under data/index/, which git ignores) to show what a persisted
index would cost to load. The product does not use it yet: `Scope.bm25` builds the index once per process and
scope (about 0.6 s per 30,000 messages), which the "index build" figure measures.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_DIR = PROJECT_ROOT / "data" / "generated"
INDEX_DIR = PROJECT_ROOT / "data" / "index"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=120_000, help="Messages in total (default 120,000).")
    parser.add_argument("--domains", type=int, default=4, help="Scopes (domains), 1-4 (default 4).")
    parser.add_argument("--questions", type=int, default=200,
                        help="Questions timed through the whole pipeline, spread over the scopes (default 200).")
    parser.add_argument("--seed", type=int, default=7, help="Generator seed (default 7).")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                        help="Working folder for the generated JSONL and bench.duckdb (default data/generated; the "
                             "DuckDB file keeps the message vectors, so only the first run embeds the corpus). The "
                             "BM25 index goes to data/index, or DIR/index when --dir is given.")
    parser.add_argument("--no-rank-bm25", action="store_true", help="Skip the rank_bm25 comparison.")
    parser.add_argument("--json", action="store_true", help="Also print the figures as one JSON object.")
    from tmem.models.settings import add_backend_arguments

    add_backend_arguments(parser)


# ------------------------------------------------------------------------------------------ index persistence
def index_path(corpus: str, scope: str, metadata_fields, root: Path = INDEX_DIR) -> Path:
    import hashlib

    tag = hashlib.sha256(json.dumps(list(metadata_fields)).encode()).hexdigest()[:8]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{corpus}__{scope}")
    return root / f"{safe}__{tag}.npz"


def save_index(index, path: Path) -> None:
    """The BM25 weight matrix (scipy.sparse.save_npz) and its vocabulary (JSON, terms in column order)."""
    from scipy import sparse

    path.parent.mkdir(parents=True, exist_ok=True)
    sparse.save_npz(path, index.weights, compressed=False)
    terms = sorted(index.vocabulary, key=index.vocabulary.get)
    path.with_suffix(".vocab.json").write_text(json.dumps({"n_documents": index.n_documents, "terms": terms},
                                                          ensure_ascii=False), encoding="utf-8")


def load_index(path: Path):
    from scipy import sparse

    from tmem.retrieval import BM25Index

    meta = json.loads(path.with_suffix(".vocab.json").read_text(encoding="utf-8"))
    weights = sparse.load_npz(path).tocsc()
    return BM25Index({t: i for i, t in enumerate(meta["terms"])}, weights, meta["n_documents"])


# ---------------------------------------------------------------------------------------------------- helpers
def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - start


def stats(values) -> dict:
    from tmem.evaluation.metrics import percentile

    values = list(values)
    return {"n": len(values), "median_ms": round(1000 * percentile(values, 50), 2),
            "p95_ms": round(1000 * percentile(values, 95), 2), "max_ms": round(1000 * max(values), 2) if values
            else None}


def pick_questions(questions, n: int) -> list:
    """n questions spread evenly over the corpus (every type and scope represented)."""
    if n >= len(questions):
        return list(questions)
    step = len(questions) / n
    return [questions[int(i * step)] for i in range(n)]


# ------------------------------------------------------------------------------------------------------ bench
def run_bench(args, log) -> dict:
    from tmem.corpora.cli import import_corpus
    from tmem.demo import generate, write_jsonl
    from tmem.evaluation.baselines import get_method
    from tmem.models.factory import build_roles, vector_store
    from tmem.models.settings import settings_from_args
    from tmem.retrieval import message_document, query_tokens
    from tmem.scope import Scope
    from tmem.stages import STAGE_FUNCTIONS, Context, plan
    from tmem.store import Store

    out: dict = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}, "phases": {},
                 "peak_rss_after_mb": {"start": round(peak_rss_mb(), 1)}}
    mark = lambda phase: out["peak_rss_after_mb"].__setitem__(phase, round(peak_rss_mb(), 1))  # noqa: E731
    corpus = f"bench-{args.messages // 1000}k"
    data, seconds = timed(generate, args.seed, args.messages, args.domains)
    out["phases"]["generate corpus"] = round(seconds, 3)
    work = Path(args.dir)
    index_root = INDEX_DIR if work == DEFAULT_DIR else work / "index"
    jsonl = work / f"{corpus}.jsonl"
    write_jsonl(data, jsonl)
    del data
    gc.collect()
    mark("generate")
    log(f"generated {args.messages:,} messages in {args.domains} scope(s) -> {jsonl} ({seconds:.1f} s)")

    import tempfile

    with tempfile.TemporaryDirectory(dir=work) as tmp:  # the import figure: into an empty database
        fresh = Store(Path(tmp) / "import.duckdb")
        (_, imported), seconds = timed(import_corpus, fresh, "jsonl", jsonl, corpus)
        fresh.close()
    out["phases"]["import (JSONL -> new DuckDB)"] = round(seconds, 3)
    del imported
    gc.collect()
    store = Store(work / "bench.duckdb")  # the working database keeps the message vectors between runs
    (_, imported), seconds = timed(import_corpus, store, "jsonl", jsonl, corpus)
    out["phases"]["re-import (replacing the corpus in bench.duckdb)"] = round(seconds, 3)
    out["corpus"] = {"name": corpus, **store.counts(corpus)}
    del imported
    gc.collect()
    mark("import")
    log(f"imported in {seconds:.2f} s: {out['corpus']}")

    method = get_method("full")
    rc = method.config.retrieval
    roles = build_roles(settings_from_args(args), store=store)
    vectors = vector_store(store, progress=None)
    scopes, builds, saves, loads, embeds, reads = {}, [], [], [], [], []
    for name in store.scopes(corpus):
        (messages, scope), seconds = timed(lambda n: (ms := store.messages(corpus, n), Scope(corpus, n, ms)), name)
        reads.append(seconds)
        index, seconds = timed(scope.bm25, rc.metadata_fields, rc.k1, rc.b, rc.epsilon)
        builds.append(seconds)
        path = index_path(corpus, name, rc.metadata_fields, index_root)
        _, seconds = timed(save_index, index, path)
        saves.append(seconds)
        loaded, seconds = timed(load_index, path)
        loads.append(seconds)
        if loaded.vocabulary != index.vocabulary or (loaded.weights != index.weights).nnz:
            raise AssertionError(f"index of scope {name} did not survive save/load")
        vectors.install(scope)
        _, seconds = timed(scope.vectors, roles.embedder)
        embeds.append(seconds)
        _ = scope.units, scope.document_frequency  # per-scope lexical statistics (Eq. 6), built once
        scopes[name] = scope
        mark(f"scope {name} (index, vectors)")
        log(f"scope {name}: {len(scope):,} messages; index build {builds[-1]:.2f} s, load {loads[-1]:.3f} s; "
            f"vectors {embeds[-1]:.1f} s")
    out["phases"]["scope load from DuckDB (all scopes)"] = round(sum(reads), 3)
    out["phases"]["BM25 index build (all scopes)"] = round(sum(builds), 3)
    out["phases"]["BM25 index save (all scopes)"] = round(sum(saves), 3)
    out["phases"]["BM25 index load (all scopes)"] = round(sum(loads), 3)
    out["phases"]["message vectors (embed or load from DuckDB)"] = round(sum(embeds), 2)
    out["embedder"] = roles.embedder.name
    out["index_dir"] = str(index_root)

    questions = pick_questions(store.questions(corpus), args.questions)
    # every question is new to the pipeline: its query is embedded, not read from the query-vector cache
    from dataclasses import replace

    fresh = replace(roles, embedder=getattr(roles.embedder, "inner", roles.embedder))
    ctx = Context(method, fresh, store, gold=lambda q: store.gold(corpus, q.scope, q.id))
    per_stage: dict[str, list[float]] = {s: [] for s in plan(method)}
    whole = []
    for q in questions:
        fields: dict = {}
        start = time.perf_counter()
        for stage in plan(method):
            t0 = time.perf_counter()
            result = STAGE_FUNCTIONS[stage](q, scopes[q.scope], ctx, fields)
            per_stage[stage].append(time.perf_counter() - t0)
            fields.update(result.fields)
        whole.append(time.perf_counter() - start)
    mark("questions")
    out["stages"] = {s: stats(v) for s, v in per_stage.items()}
    out["stages"]["whole question (all stages)"] = stats(whole)
    out["questions_timed"] = len(questions)
    log(f"timed {len(questions)} questions through {len(plan(method))} stages")

    if not args.no_rank_bm25:
        import numpy as np
        from rank_bm25 import BM25Okapi

        per_query, build = [], 0.0
        for name, scope in scopes.items():
            docs = [message_document(m, rc.metadata_fields) for m in scope.messages]
            okapi, seconds = timed(BM25Okapi, docs, k1=rc.k1, b=rc.b, epsilon=rc.epsilon)
            build += seconds
            for q in (q for q in questions if q.scope == name):
                start = time.perf_counter()
                scores = okapi.get_scores(query_tokens(q, rc))
                np.argsort(-scores, kind="stable")[:rc.k]
                per_query.append(time.perf_counter() - start)
            del okapi, docs
            gc.collect()
        out["rank_bm25"] = {"build_s": round(build, 3), "seed_retrieval": stats(per_query)}
    mark("rank_bm25 comparison")
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    store.close()
    return out


TARGETS = {"seed_retrieval": 20.0, "whole question (all stages)": 500.0}


def format_report(r: dict) -> str:
    lines = [f"tmem bench: {r['corpus']['messages']:,} messages in {r['corpus']['scopes']} scopes, "
             f"{r['questions_timed']} questions timed; {r['machine']['cpus']} CPUs; embedder {r['embedder']}", ""]
    lines.append(f"{'phase':<46}{'seconds':>10}")
    for name, seconds in r["phases"].items():
        target = "  (target <= 5 s)" if name.startswith("import (") else ""
        lines.append(f"{name:<46}{seconds:>10.2f}{target}")
    lines += ["", f"{'per question':<46}{'median ms':>11}{'p95 ms':>10}{'max ms':>10}"]
    rows = dict(r["stages"])
    if "rank_bm25" in r:
        rows["seed_retrieval with plain rank_bm25"] = r["rank_bm25"]["seed_retrieval"]
    for name, s in rows.items():
        target = f"  (target <= {TARGETS[name]:.0f} ms)" if name in TARGETS else ""
        lines.append(f"{name:<46}{s['median_ms']:>11.2f}{s['p95_ms']:>10.2f}{s['max_ms']:>10.2f}{target}")
    if "rank_bm25" in r:
        lines.append(f"{'(rank_bm25 index build, all scopes)':<46}{r['rank_bm25']['build_s']:>11.2f} s")
    lines += ["", f"peak RSS: {r['peak_rss_mb']:.0f} MB (target <= 1536 MB); peak so far after each phase: "
              + ", ".join(f"{k} {v:.0f}" for k, v in r["peak_rss_after_mb"].items())]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    report = run_bench(args, log)
    print(format_report(report))
    if args.json:
        print(json.dumps(report))
    return 0
