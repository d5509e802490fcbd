"""`python -m tmem interleave PATH [--db PATH] [--corpus NAME]`: LoCoMo's conversations merged into one scope as
channels with overlapping clocks (tmem.corpora.interleave), stored as corpus `locomo-interleaved` for
`python -m tmem recall` (its dev/test split is by source conversation). A re-run replaces the corpus."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from tmem.corpora.common import cap_messages
from tmem.corpora.imports import summary
from tmem.corpora.interleave import FORMAT, load_interleaved
from tmem.store import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, metavar="PATH", help="LoCoMo's locomo10.json")
    parser.add_argument("--db", type=Path, default=None, help="DuckDB file (default: $TMEM_DB or data/tmem.duckdb)")
    parser.add_argument("--corpus", default=FORMAT, help=f"corpus name (default: {FORMAT})")


def main(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if not args.path.is_file():
        raise FileNotFoundError(f"{args.path}: no such file")
    imported = cap_messages(load_interleaved(args.path))
    store = Store(args.db)
    try:
        store.replace_corpus(args.corpus, imported.data, format=FORMAT, source=str(args.path.resolve()),
                             notes="\n".join(imported.notes))
        print("\n".join(summary(store, args.corpus, imported)))
    finally:
        store.close()
    print(f"interleaved in {time.perf_counter() - started:.2f} s into {store.path}")
    return 0
