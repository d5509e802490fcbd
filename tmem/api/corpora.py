"""Corpora as the CLI loads them: the importers by name, a file or folder imported into the database (any path the
operator names: the app's uploads and server paths go through `tmem.api.import_corpus`, which keeps to
$TMEM_IMPORT_DIRS), and LoCoMo's conversations interleaved into one scope. Each returns the lines the `import`
command prints: the counts stored, questions by type, the importer's first notes."""
from __future__ import annotations

from pathlib import Path

from tmem.corpora import formats
from tmem.corpora.common import cap_messages
from tmem.corpora.imports import import_corpus, summary
from tmem.corpora.interleave import FORMAT as INTERLEAVED  # the interleaved corpus is stored under its name
from tmem.corpora.interleave import load_interleaved
from tmem.store import Store

__all__ = ["INTERLEAVED", "format_names", "import_path", "interleave_locomo"]


def format_names() -> list[str]:
    """The importers' names, as `import FORMAT` takes them."""
    return formats.names()


def import_path(store: Store, fmt: str, path: str | Path, corpus: str | None = None) -> list[str]:
    """Import `path` with the named importer, replacing its corpus in one transaction (a bad file leaves the
    database unchanged)."""
    name, imported = import_corpus(store, fmt, path, corpus)
    return summary(store, name, imported)


def interleave_locomo(store: Store, path: Path, corpus: str) -> list[str]:
    """LoCoMo's conversations merged into one scope as channels with overlapping clocks (tmem.corpora.interleave),
    stored as `corpus` (a re-run replaces it)."""
    imported = cap_messages(load_interleaved(path))
    store.replace_corpus(corpus, imported.data, format=INTERLEAVED, source=str(path.resolve()),
                         notes="\n".join(imported.notes))
    return summary(store, corpus, imported)
