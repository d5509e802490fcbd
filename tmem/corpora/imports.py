"""Import a corpus: one importer per format (tmem.corpora.formats), run by `load`; `import_corpus` replaces a
corpus in the store in one transaction; `summary` says what was stored. The `import` command
(tmem/commands/corpus/import_.py) parses its flags and prints the summary.

A re-import replaces the corpus of that name (idempotent); a bad file leaves the database unchanged.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.compute as pc

from tmem.corpora import formats
from tmem.corpora.common import Imported, bound_notes, cap_messages, input_root
from tmem.limits import MAX_GOLD_UNITS, safe_name, strip_control
from tmem.store.message_columns import MessageColumns
from tmem.types import CorpusError

MAX_NOTES = 20  # notes printed after an import; the corpus notes keep more (common.bound_notes)


def load(fmt: str, path: str | Path, root: str | Path | None = None) -> Imported:
    """Run one importer: -> tmem.corpora.common.Imported (the corpus and its notes). Nothing outside `root` is
    read (default: the input's own folder, see common.default_root); over-long message texts are truncated and
    the notes say so (limits.MAX_MESSAGE_CHARS)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    loader = formats.get(fmt).read
    try:
        if root is None:
            result = loader(path)
        else:
            with input_root(Path(root)):
                result = loader(path)
    except OSError as exc:  # a file system refusal no check foresaw (a name too long, a permission): one line
        raise CorpusError(f"{exc.filename or path}: cannot be read ({exc.strerror or exc})") from None
    imported = cap_messages(result if isinstance(result, Imported) else Imported(result))
    check_scopes(imported.data, path)
    check_gold_units(imported.data, path)
    return Imported(imported.data, bound_notes(imported.notes), imported.split)


def check_scopes(data, path: Path) -> None:
    """Every scope is a single safe name (limits.safe_name): scopes name run records, exports and URLs."""
    messages = data.messages
    scopes = (pc.unique(messages.table.column("scope")).to_pylist() if isinstance(messages, MessageColumns)
              else {m.scope for m in messages})
    for scope in sorted(scopes):
        try:
            safe_name(scope, "scope name")
        except ValueError as exc:
            raise CorpusError(f"{path}: {exc}") from None


def check_gold_units(data, path: Path) -> None:
    """No question has more than limits.MAX_GOLD_UNITS gold evidence units (what reads them, e.g. the stale check,
    is bounded by it)."""
    for scope, gold in data.golds:
        if len(gold.evidence) > MAX_GOLD_UNITS:
            raise CorpusError(f"{path} [question {strip_control(gold.question_id[:60])!r} of scope "
                              f"{strip_control(scope[:60])!r}]: field 'gold_evidence' has {len(gold.evidence):,} "
                              f"units, over the limit of {MAX_GOLD_UNITS:,}; refused")


def import_corpus(store, fmt: str, path: str | Path, corpus: str | None = None, root: str | Path | None = None):
    """Load `path` (reading nothing outside `root`, see `load`) and replace corpus `corpus` in `store` in one
    transaction; -> (corpus name, Imported)."""
    path = Path(path)
    name = safe_name(corpus or formats.get(fmt).default_corpus(path), "corpus name")  # before the work, not after it
    imported = load(fmt, path, root)
    store.replace_corpus(name, imported.data, format=fmt, source=str(path.resolve()), notes="\n".join(imported.notes),
                         split=imported.split)
    return name, imported


def summary(store, name: str, imported) -> list[str]:
    """The lines the `import` command prints: the counts stored, questions by type, the first notes (control
    characters from the data shown as U+FFFD)."""
    counts = store.counts(name)
    by_type = Counter(q.type or "untyped" for q in imported.data.questions)
    lines = [f"corpus {name!r}: {counts['scopes']:,} scopes, {counts['messages']:,} messages, "
             f"{counts['questions']:,} questions, {counts['evidence_units']:,} evidence units, "
             f"{counts['gold_links']:,} gold links"]
    lines += [f"  {strip_control(qtype)}: {n:,}" for qtype, n in sorted(by_type.items())]
    notes = imported.notes
    if notes:
        lines.append(f"notes ({len(notes)}):")
        lines += [f"  {strip_control(n)}" for n in notes[:MAX_NOTES]]
        if len(notes) > MAX_NOTES:
            lines.append(f"  ... {len(notes) - MAX_NOTES:,} more (kept in the corpus notes)")
    return lines
