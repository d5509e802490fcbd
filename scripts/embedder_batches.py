"""Messages per second of the packaged MiniLM embedder per onnxruntime batch size, on a stored corpus's texts
(docs/backends.md, "MiniLM embedder"; the reason for `MiniLMEmbedder.RUN_BATCH`).

  python scripts/embedder_batches.py --db /tmp/x.duckdb [--corpus irc-dev] [--messages 3000] [--sizes 64,16,8]
                                     [--repeats 2]

Each size embeds the same texts `--repeats` times, sizes alternating so that a change of the machine's load hits
them alike; the best run per size is printed, and the largest difference of any size's vectors from the first's.
"""
from __future__ import annotations

import argparse
import sys
import time

import duckdb
import numpy as np

from tmem.models.embedders import MiniLMEmbedder


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--corpus", default="", help="a stored corpus (default: every message of the database)")
    ap.add_argument("--messages", type=int, default=3000)
    ap.add_argument("--sizes", default="64,16,8")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        print(f"--sizes: comma-separated integers, got {args.sizes!r}", file=sys.stderr)
        return 1
    try:
        con = duckdb.connect(args.db, read_only=True)  # measures, never writes
    except duckdb.Error as e:
        print(f"{args.db}: cannot open ({e})", file=sys.stderr)
        return 1
    where, params = ("WHERE corpus = ?", [args.corpus]) if args.corpus else ("", [])
    texts = [r[0] for r in con.execute(f"SELECT text FROM messages {where} ORDER BY corpus, scope, seq LIMIT ?",
                                       params + [args.messages]).fetchall()]
    if not texts:
        print(f"{args.db}: no messages{' in corpus ' + args.corpus if args.corpus else ''}", file=sys.stderr)
        return 1
    print(f"{len(texts)} messages, mean {np.mean([len(t) for t in texts]):.0f} characters")
    embedders = {}
    for size in sizes:
        embedders[size] = MiniLMEmbedder(batch_size=size)
        embedders[size].RUN_BATCH = size  # measure the size itself, not the shipped cap
        embedders[size].embed(texts[:size])  # load the session outside the timing
    best: dict[int, float] = {}
    first, drift = None, {}
    for _ in range(args.repeats):
        for size, embedder in embedders.items():
            started = time.perf_counter()
            vectors = embedder.embed(texts)
            best[size] = min(best.get(size, float("inf")), time.perf_counter() - started)
            first = vectors if first is None else first
            drift[size] = float(np.abs(vectors - first).max())
    for size in sizes:
        print(f"batch {size:>4}: {len(texts) / best[size]:6.0f} messages/s ({best[size]:.1f} s), "
              f"max |vector difference| {drift[size]:.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
