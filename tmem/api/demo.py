"""The shipped demo as `python -m tmem demo` writes it: the deterministic corpus (tmem.demo) as tmem JSONL or in
GroupMemBench's folder layout (marked as generated, tmem.demo.provenance), the MiniLM vectors of every demo message
and question (tmem.demo.vectors), so a fresh database's first answer and demo batch embed nothing, and the shipped
sweep (tmem.demo.sweep; the command measures it, since only commands run evaluation). Its gold links are the
generator's planned edges (`PLANNED_EDGES`): `generated_corpus` names a corpus the generator wrote."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from tmem.api import open_scope, open_store
from tmem.demo import (
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

__all__ = ["DEMO_JSONL", "DEMO_VECTORS", "MINILM", "PLANNED_EDGES", "demo_sweep", "demo_vectors", "fresh_demo_store",
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


def demo_vectors() -> tuple[str, DemoVectors | None]:
    """Embed every message of every demo scope and every demo question's query on a fresh database over the shipped
    demo without shipped vectors, through the pipeline's own caches (the scope's vector loader, the query-caching
    embedder), and collect what they stored: the vectors a first run computes and stores (to 1.1e-7: a run embeds a
    window's messages in other batches).
    -> (this machine's embedder, the vectors; None when that embedder is not MiniLM)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "vectors.duckdb", demo=False)
        try:
            ensure_demo(store, vectors=None, sweep=None)
            roles = build_roles(BackendSettings.from_sources({}, {}, {"embedder.kind": "auto"}), store=store, env={})
            if roles.embedder.name != MINILM:
                return roles.embedder.name, None
            return MINILM, _stored_vectors(store, roles.embedder)
        finally:
            store.close()


def _stored_vectors(store, embedder) -> DemoVectors:
    """Every scope's message vectors in message order, then the distinct question texts' query vectors."""
    scopes, ids, hashes, vectors = [], [], [], []
    for name in store.scopes(DEMO_CORPUS):
        scope = open_scope(store, DEMO_CORPUS, name)
        scope.vectors(embedder)  # the whole scope, embedded and stored by its vector loader
        stored = store.message_vectors(DEMO_CORPUS, name, embedder.name)
        for message in scope.messages:
            scopes.append(name)
            ids.append(message.id)
            hashes.append(stored[message.id][0])
            vectors.append(np.frombuffer(stored[message.id][1], np.float32))
    texts = list(dict.fromkeys(q.text for q in store.questions(DEMO_CORPUS)))
    embedder.embed(texts, "query")  # stored by the query-caching embedder, as a question's run stores it
    found = store.query_vectors(embedder.name, [text_hash(t) for t in texts])
    queries = list(dict.fromkeys(text_hash(t) for t in texts))
    return DemoVectors(embedder.name, tuple(scopes), tuple(ids), tuple(hashes), np.vstack(vectors),
                       tuple(queries), np.vstack([np.frombuffer(found[h], np.float32) for h in queries]))
