"""`python -m tmem import FORMAT PATH [--db PATH] [--corpus NAME]`: load a corpus into DuckDB in one transaction
(the work: tmem.corpora.imports.import_corpus, through tmem.api.corpora).

A re-import replaces the corpus of that name (idempotent); a bad file leaves the database unchanged. Prints the
counts (scopes, messages, questions by type, evidence units, gold links), the importer's notes and the time taken.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from tmem.api import open_store
from tmem.api.corpora import format_names, import_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("format", choices=format_names(), metavar="FORMAT",
                        help=f"input format: {', '.join(format_names())}")
    parser.add_argument("path", type=Path, metavar="PATH", help="input file or folder (see docs/corpora.md)")
    parser.add_argument("--db", type=Path, default=None, help="DuckDB file (default: $TMEM_DB or data/tmem.duckdb)")
    parser.add_argument("--corpus", default=None,
                        help="corpus name (default: the format name; for jsonl, the file name without .jsonl)")


def main(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    store = open_store(args.db, demo=False)
    try:
        print("\n".join(import_path(store, args.format, args.path, args.corpus)))
    finally:
        store.close()
    print(f"imported in {time.perf_counter() - started:.2f} s into {store.path}")
    return 0
