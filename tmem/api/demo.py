"""The shipped demo as `python -m tmem demo` writes it: the deterministic corpus (tmem.demo) as tmem JSONL or in
GroupMemBench's folder layout (marked as generated, tmem.demo.provenance), the MiniLM vectors of the messages the
curated question embeds (tmem.demo.vectors), so the explorer's first screen needs no embedding run, and the shipped
sweep (tmem.demo.sweep; the command measures it, since only commands run evaluation). Its gold links are the
generator's planned edges (`PLANNED_EDGES`): `generated_corpus` names a corpus the generator wrote."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from tmem.api import open_store, resolve_config, run_and_store, stored_question
from tmem.demo import (
    CURATED_QUESTION,
    DEMO_CORPUS,
    DEMO_JSONL,
    PLANNED_EDGES,
    ensure_demo,
    generate,
    generated_corpus,
    write_groupmembench,
    write_jsonl,
)
from tmem.demo import sweep as demo_sweep
from tmem.demo.provenance import write_mark
from tmem.demo.vectors import DEMO_VECTORS, DemoVectors, save_demo_vectors
from tmem.models.embedders import MiniLMEmbedder
from tmem.models.factory import build_roles
from tmem.models.settings import BackendSettings
from tmem.prompts import text_hash

MINILM = MiniLMEmbedder.name

__all__ = ["DEMO_JSONL", "DEMO_VECTORS", "MINILM", "PLANNED_EDGES", "curated_vectors", "demo_sweep", "fresh_demo_store",
           "generated_corpus", "save_demo_vectors", "write_demo"]


def write_demo(out: Path, seed: int, messages: int, domains: int):
    """Generate the demo corpus and write it to `out`: a .jsonl file (tmem JSONL), else a GroupMemBench folder; the
    generator's mark beside it (not beside the shipped file, which is recognised by its path)."""
    data = generate(seed, messages, domains)
    if out.suffix == ".jsonl":
        write_jsonl(data, out)
    else:
        write_groupmembench(data, out)
    if out.resolve() != DEMO_JSONL.resolve():
        write_mark(out, seed)
    return data


def fresh_demo_store(folder: Path):
    """A new database in `folder` with the demo corpus and its shipped vectors, without the shipped sweep: what a
    first start computes from, for regenerating the shipped files."""
    store = open_store(Path(folder) / "demo.duckdb", demo=False)
    ensure_demo(store, sweep=None)
    return store


def curated_vectors() -> tuple[str, DemoVectors | None]:
    """Run the curated question as the explorer's first screen does (variant full, offline roles) on a fresh
    database without shipped vectors, and collect every vector that run stored: exactly what the embedder computed.
    -> (this machine's embedder, the vectors; None when that embedder is not MiniLM)."""
    scope, qid = CURATED_QUESTION
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "vectors.duckdb", demo=False)
        ensure_demo(store, vectors=None)
        roles = build_roles(BackendSettings.from_sources({}, {}, {"embedder.kind": "auto"}), store=store, env={})
        if roles.embedder.name != MINILM:
            store.close()
            return roles.embedder.name, None
        question, gold = stored_question(store, DEMO_CORPUS, qid, scope)
        run_and_store(store, DEMO_CORPUS, question, "full", resolve_config("full"), roles, gold, save=False)
        stored = store.message_vectors(DEMO_CORPUS, scope, roles.embedder.name)
        queries = store.query_vectors(roles.embedder.name, [text_hash(question.text)])
        store.close()
    ids = sorted(stored)
    return roles.embedder.name, DemoVectors(
        roles.embedder.name, scope, tuple(ids), tuple(stored[i][0] for i in ids),
        np.vstack([np.frombuffer(stored[i][1], np.float32) for i in ids]),
        tuple(queries), np.vstack([np.frombuffer(v, np.float32) for v in queries.values()]))
