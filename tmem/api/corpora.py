"""Corpora as the CLI loads them: the importers by name, a file or folder imported into the database (any path the
operator names: the app's uploads and server paths go through `tmem.api.import_corpus`, which keeps to
$TMEM_IMPORT_DIRS), and LoCoMo's conversations interleaved into one scope. Each returns the lines the `import`
command prints: the counts stored, questions by type, the importer's first notes."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tmem.corpora import formats, upload
from tmem.corpora.common import cap_messages
from tmem.corpora.imports import import_corpus as import_stored
from tmem.corpora.imports import summary
from tmem.corpora.interleave import FORMAT as INTERLEAVED  # the interleaved corpus is stored under its name
from tmem.corpora.interleave import load_interleaved
from tmem.corpora.jsonl import chain_writers  # a corpus's noise-chain notes: who wrote its injected chains
from tmem.store import Store

__all__ = ["INTERLEAVED", "chain_writers", "format_names", "import_corpus", "import_formats", "import_path",
           "interleave_locomo"]


def format_names() -> list[str]:
    """The importers' names, as `import FORMAT` takes them."""
    return formats.names()


def import_path(store: Store, fmt: str, path: str | Path, corpus: str | None = None) -> list[str]:
    """Import `path` with the named importer, replacing its corpus in one transaction (a bad file leaves the
    database unchanged)."""
    name, imported = import_stored(store, fmt, path, corpus)
    return summary(store, name, imported)


def interleave_locomo(store: Store, path: Path, corpus: str) -> list[str]:
    """LoCoMo's conversations merged into one scope as channels with overlapping clocks (tmem.corpora.interleave),
    stored as `corpus` (a re-run replaces it)."""
    imported = cap_messages(load_interleaved(path))
    store.replace_corpus(corpus, imported.data, format=INTERLEAVED, source=str(path.resolve()),
                         notes="\n".join(imported.notes))
    return summary(store, corpus, imported)


def import_formats() -> dict[str, tuple[str, list[str]]]:
    """{format: (what to upload for it, the file extensions the uploader offers)}, jsonl first (docs/corpora.md)."""
    return {f.name: (f.upload_hint, list(f.upload_types)) for f in formats.FORMATS}


def import_corpus(store: Store, name: str, fmt: str, path: str | Path | None = None,
                  uploads: Sequence[tuple[str, bytes]] | None = None) -> list[str]:
    """Import a server file/folder (`path`) or uploaded `(file name, content)` pairs (`uploads`: one .zip of the
    format's layout, or its plain files; staged in a temporary folder that is always deleted) with the named
    importer, replacing corpus `name` in one transaction (a bad file leaves the database unchanged); returns the
    importer's notes (repairs, skipped records, derived values)."""
    if uploads:
        _, imported = upload.import_upload(store, fmt, uploads, name)
    elif path:
        _, imported = upload.import_server_path(store, fmt, path, name)  # only inside $TMEM_IMPORT_DIRS
    else:
        raise ValueError("give a path or uploaded files")
    return list(imported.notes)
