"""Performance on a generated corpus in the GroupMemBench shape (default 120,000 messages =
4 scopes x 30,000, paper App. A.1; `--messages 1000000` for the million-message figures) on this machine: import,
scope load, the BM25 index (built and saved in DuckDB on first use, then loaded by every later process), median
and p95 per pipeline stage and per whole question with the offline roles, the first question of each scope (it
embeds the window messages it ranks: vectors on demand), plain rank_bm25 seed retrieval side by side, and peak
memory. The command `python -m tmem bench` (tmem/commands/evaluate/bench.py) prints the figures; nothing here is a timed
unit test.
"""
from __future__ import annotations

import gc
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
from rank_bm25 import BM25Okapi

from tmem.corpora.imports import import_corpus
from tmem.corpora.jsonl import FORMAT as JSONL
from tmem.evaluation.metrics import percentile
from tmem.models.factory import build_roles, vector_store
from tmem.models.settings import BackendSettings
from tmem.pipeline.methods import get_method
from tmem.pipeline.retrieval import BM25Index, index_key, message_document, query_tokens
from tmem.pipeline.scope import Scope
from tmem.pipeline.stages import STAGE_FUNCTIONS, Context, Earlier, plan
from tmem.store import Store

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_DIR = PROJECT_ROOT / "data" / "generated"


# ---------------------------------------------------------------------------------------------------- helpers
def open_bench_scope(store: Store, corpus: str, name: str) -> Scope:
    """A stored scope as `tmem.pipeline.run.open_scope` sets it up (vectors and BM25 index kept in the store),
    uncached."""
    scope = Scope(corpus, name, store.messages(corpus, name))
    vector_store(store).install(scope)
    scope.index_store = store
    return scope


def write_corpus_in_child(seed: int, messages: int, domains: int, path: Path) -> None:
    """`python -m tmem demo` in a fresh interpreter. Not a multiprocessing child: spawn re-runs the parent's
    `__main__` (under pytest after an AppTest that is a Streamlit script) and fork copies a threaded process."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    subprocess.run([sys.executable, "-m", "tmem", "demo", "--seed", str(seed), "--messages", str(messages),
                    "--domains", str(domains), "--out", str(path)], check=True, env=env, stdout=subprocess.DEVNULL)


def vector_count(store: Store, corpus: str, embedder: str) -> int:
    return sum(len(store.message_vectors(corpus, name, embedder)) for name in store.scopes(corpus))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - start


def stats(values) -> dict:
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
def time_questions(chosen, scopes, ctx, log, label: str) -> tuple[dict[str, list[float]], list[float]]:
    """Seconds per stage and per whole question ("whole") of each question, and of each scope's first one."""
    times: dict[str, list[float]] = {s: [] for s in [*plan(ctx.method), "whole"]}
    first, started = [], set()
    for i, q in enumerate(chosen, 1):
        earlier = Earlier()
        start = time.perf_counter()
        for stage in plan(ctx.method):
            t0 = time.perf_counter()
            result = STAGE_FUNCTIONS[stage](q, scopes[q.scope], ctx, earlier)
            times[stage].append(time.perf_counter() - t0)
            earlier = earlier.then(result)
        times["whole"].append(time.perf_counter() - start)
        if q.scope not in started:
            first.append(times["whole"][-1])
        started.add(q.scope)
        if i % 50 == 0:
            log(f"  {label}: {i}/{len(chosen)} questions")
    return times, first


def run_bench(messages: int = 120_000, domains: int = 4, questions: int = 200, seed: int = 7,
              work: Path = DEFAULT_DIR, *, rank_bm25: bool = True, settings: BackendSettings | None = None,
              log: Callable[[str], None] = lambda line: None) -> dict:
    """The figures of one bench run (see the module docstring); `work` keeps the JSONL and bench.duckdb."""
    out: dict = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}, "phases": {},
                 "peak_rss_after_mb": {"start": round(peak_rss_mb(), 1)}}
    mark = lambda phase: out["peak_rss_after_mb"].__setitem__(phase, round(peak_rss_mb(), 1))  # noqa: E731
    corpus = f"bench-{messages // 1000}k"
    work = Path(work)
    jsonl = work / f"{corpus}.jsonl"
    # in a child process: the generator's million objects are the harness's, not the product's, peak memory
    _, seconds = timed(write_corpus_in_child, seed, messages, domains, jsonl)
    out["phases"]["generate corpus (child process)"] = round(seconds, 3)
    mark("generate")
    log(f"generated {messages:,} messages in {domains} scope(s) -> {jsonl} ({seconds:.1f} s)")

    with tempfile.TemporaryDirectory(dir=work) as tmp:  # the import figure: into an empty database
        fresh = Store(Path(tmp) / "import.duckdb")
        (_, imported), seconds = timed(import_corpus, fresh, JSONL.name, jsonl, corpus)
        fresh.close()
    out["phases"]["import (JSONL -> new DuckDB)"] = round(seconds, 3)
    del imported
    gc.collect()
    store = Store(work / "bench.duckdb")  # the working database keeps the message vectors between runs
    (_, imported), seconds = timed(import_corpus, store, JSONL.name, jsonl, corpus)
    out["phases"]["re-import (replacing the corpus in bench.duckdb)"] = round(seconds, 3)
    out["corpus"] = {"name": corpus, **store.counts(corpus)}
    del imported
    gc.collect()
    mark("import")
    log(f"imported in {seconds:.2f} s: {out['corpus']}")

    method = get_method("full")
    rc = method.config.retrieval
    roles = build_roles(settings, store=store)
    key = (tuple(rc.metadata_fields), str(rc.k1), str(rc.b), str(rc.epsilon))
    vectors_before = vector_count(store, corpus, roles.embedder.name)
    scopes, builds, loads, reads, stats_s = {}, [], [], [], []
    for name in store.scopes(corpus):
        scope, seconds = timed(open_bench_scope, store, corpus, name)
        reads.append(seconds)
        index, seconds = timed(scope.bm25, rc.metadata_fields, rc.k1, rc.b, rc.epsilon)
        builds.append(seconds)  # the re-import dropped the stored index: this is the first use's build + save
        loaded, seconds = timed(lambda n: BM25Index.from_bytes(store.bm25_index(corpus, n, index_key(key))), name)
        loads.append(seconds)  # what every later process pays instead
        if loaded is None or loaded.vocabulary != index.vocabulary or (loaded.weights != index.weights).nnz:
            raise AssertionError(f"index of scope {name} did not survive save/load")
        del loaded
        _, seconds = timed(getattr, scope, "document_frequency")  # per-scope lexical statistics (Eq. 6), once
        stats_s.append(seconds)
        scopes[name] = scope
        mark(f"scope {name} (index)")
        log(f"scope {name}: {len(scope):,} messages; read {reads[-1]:.2f} s; index build + save {builds[-1]:.2f} s "
            f"({scope.index_source[key]}), load {loads[-1]:.3f} s")
    out["phases"]["scope load from DuckDB (all scopes)"] = round(sum(reads), 3)
    out["phases"]["BM25 index build + save in DuckDB (first use)"] = round(sum(builds), 3)
    out["phases"]["BM25 index load from DuckDB (later processes)"] = round(sum(loads), 3)
    out["phases"]["document frequencies for Eq. 6 (all scopes)"] = round(sum(stats_s), 3)
    out["embedder"] = roles.embedder.name

    chosen = pick_questions(store.questions(corpus), questions)
    # every question is new to the pipeline: its query is embedded, not read from the query-vector cache
    fresh = replace(roles, embedder=getattr(roles.embedder, "inner", roles.embedder))
    ctx = Context(method, fresh, store, gold=lambda q: store.gold(corpus, q.scope, q.id))
    cold, first = time_questions(chosen, scopes, ctx, log, "cold")  # embeds the windows' messages on demand
    mark("questions (cold)")
    warm, _ = time_questions(chosen, scopes, ctx, log, "warm")  # the same questions, their vectors in memory
    mark("questions")
    out["stages"] = {s: stats(v) for s, v in warm.items()}
    out["stages"]["whole question (all stages)"] = stats(warm["whole"])
    del out["stages"]["whole"]
    # the first pass pays for embedding its windows' messages (there is no whole-scope embedding any more)
    out["stages"]["discovery, cold (embeds window messages)"] = stats(cold["discovery"])
    out["stages"]["whole question, cold"] = stats(cold["whole"])
    out["stages"]["first question of a scope"] = stats(first)
    # an embedder whose rows are not stored (the lexical fallback) embedded every row its scopes hold
    out["vectors_embedded_on_demand"] = vector_count(store, corpus, roles.embedder.name) - vectors_before \
        if getattr(roles.embedder, "stored", True) else sum(s.rows_held(roles.embedder.name) for s in scopes.values())
    out["questions_timed"] = len(chosen)
    log(f"timed {len(chosen)} questions through {len(plan(method))} stages")

    if rank_bm25:

        per_query, build = [], 0.0
        for name, scope in scopes.items():
            docs = [message_document(m, rc.metadata_fields) for m in scope.messages]
            okapi, seconds = timed(BM25Okapi, docs, k1=rc.k1, b=rc.b, epsilon=rc.epsilon)
            build += seconds
            for q in (q for q in chosen if q.scope == name):
                start = time.perf_counter()
                scores = okapi.get_scores(query_tokens(q, rc))
                np.argsort(-scores, kind="stable")[:rc.k]
                per_query.append(time.perf_counter() - start)
            del okapi, docs
            gc.collect()
        out["rank_bm25"] = {"build_s": round(build, 3), "seed_retrieval": stats(per_query)}
    out["peak_rss_mb"] = out["peak_rss_after_mb"]["questions"]  # the product's peak (rank_bm25 is a comparison)
    mark("rank_bm25 comparison")
    store.close()
    return out
