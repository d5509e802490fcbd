"""`python -m tmem interleave PATH [--db PATH] [--corpus NAME]`: LoCoMo's conversations merged into one scope as
channels with overlapping clocks (tmem.corpora.interleave), stored as corpus `locomo-interleaved` for
`python -m tmem recall` (its dev/test split is by source conversation). A re-run replaces the corpus."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from tmem.api import open_store
from tmem.api.corpora import INTERLEAVED, interleave_locomo


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, metavar="PATH", help="LoCoMo's locomo10.json")
    parser.add_argument("--db", type=Path, default=None, help="DuckDB file (default: $TMEM_DB or data/tmem.duckdb)")
    parser.add_argument("--corpus", default=INTERLEAVED, help=f"corpus name (default: {INTERLEAVED})")


def main(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if not args.path.is_file():  # before the database is opened (or created)
        raise FileNotFoundError(f"{args.path}: no such file")
    store = open_store(args.db, demo=False)
    try:
        print("\n".join(interleave_locomo(store, args.path, args.corpus)))
    finally:
        store.close()
    print(f"interleaved in {time.perf_counter() - started:.2f} s into {store.path}")
    return 0
