"""`python -m tmem import FORMAT PATH [--db PATH] [--corpus NAME]`: load a corpus into DuckDB in one transaction.

A re-import replaces the corpus of that name (idempotent); a bad file leaves the database unchanged. Prints the
counts (scopes, messages, questions by type, evidence units, gold links), the importer's notes and the time taken.
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

FORMATS: dict[str, tuple[str, str]] = {  # format -> (module, loader function)
    "groupmembench": ("tmem.corpora.groupmembench", "load_groupmembench"),
    "evermembench": ("tmem.corpora.evermembench", "load_evermembench"),
    "locomo": ("tmem.corpora.locomo", "load_locomo"),
    "jsonl": ("tmem.corpora.jsonl", "load_jsonl"),
    "slack": ("tmem.corpora.slack", "load_slack"),
    "irc": ("tmem.corpora.irc", "load_irc"),
}
MAX_NOTES = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("format", choices=sorted(FORMATS), metavar="FORMAT",
                        help=f"input format: {', '.join(sorted(FORMATS))}")
    parser.add_argument("path", type=Path, metavar="PATH", help="input file or folder (see docs/corpora.md)")
    parser.add_argument("--db", type=Path, default=None, help="DuckDB file (default: $TMEM_DB or data/tmem.duckdb)")
    parser.add_argument("--corpus", default=None,
                        help="corpus name (default: the format name; for jsonl, the file name without .jsonl)")


def default_corpus(fmt: str, path: Path) -> str:
    return path.stem if fmt == "jsonl" else fmt


def load(fmt: str, path: str | Path):
    """Run one importer: -> tmem.corpora.common.Imported (the corpus and its notes)."""
    import importlib

    from tmem.corpora.common import Imported

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    module, function = FORMATS[fmt]
    result = getattr(importlib.import_module(module), function)(path)
    return result if isinstance(result, Imported) else Imported(result)


def import_corpus(store, fmt: str, path: str | Path, corpus: str | None = None):
    """Load `path` and replace corpus `corpus` in `store` in one transaction; -> (corpus name, Imported)."""
    path = Path(path)
    name = corpus or default_corpus(fmt, path)
    imported = load(fmt, path)
    store.replace_corpus(name, imported.data, format=fmt, source=str(path.resolve()), notes="\n".join(imported.notes))
    return name, imported


def summary(store, name: str, imported) -> list[str]:
    counts = store.counts(name)
    by_type = Counter(q.type or "untyped" for q in imported.data.questions)
    lines = [f"corpus {name!r}: {counts['scopes']:,} scopes, {counts['messages']:,} messages, "
             f"{counts['questions']:,} questions, {counts['evidence_units']:,} evidence units, "
             f"{counts['gold_links']:,} gold links"]
    lines += [f"  {qtype}: {n:,}" for qtype, n in sorted(by_type.items())]
    notes = imported.notes
    if notes:
        lines.append(f"notes ({len(notes)}):")
        lines += [f"  {n}" for n in notes[:MAX_NOTES]]
        if len(notes) > MAX_NOTES:
            lines.append(f"  ... {len(notes) - MAX_NOTES} more (all kept in the corpus notes)")
    return lines


def main(args: argparse.Namespace) -> int:
    import time

    from tmem.store import Store

    started = time.perf_counter()
    store = Store(args.db)
    try:
        name, imported = import_corpus(store, args.format, args.path, args.corpus)
        print("\n".join(summary(store, name, imported)))
    finally:
        store.close()
    print(f"imported in {time.perf_counter() - started:.2f} s into {store.path}")
    return 0
