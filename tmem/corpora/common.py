"""Field parsing shared by the importers; every error names the file, the line or record, and the field."""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tmem import limits
from tmem.corpora.files import (  # noqa: F401  (re-exported: the importers take them from here)
    BOM,
    boundary,
    check_size,
    child,
    confined,
    decode,
    default_root,
    files_under,
    input_root,
    inside,
    open_text,
    read_bytes,
    read_text,
    regular,
)
from tmem.store.message_columns import MessageColumns
from tmem.types import CorpusData, CorpusError


def where(source: str, record: str | int) -> str:
    return f"{source}:{record}" if isinstance(record, int) else f"{source} [{record}]"


def parse_timestamp(value: Any, at: str, field: str = "timestamp") -> datetime:
    """ISO 8601 (a zone is converted to UTC and dropped) or a JSON number of Unix seconds (UTC) -> naive datetime.

    A number is always read as seconds: a millisecond value lands past the year 9999 and is refused with a hint."""
    if isinstance(value, bool) or value is None or value == "":
        raise CorpusError(f"{at}: field {field!r} is missing" if value in (None, "")
                          else f"{at}: field {field!r} must be an ISO 8601 string or Unix seconds, got bool")
    if isinstance(value, (int, float)):
        try:
            return in_range(datetime.fromtimestamp(float(value), tz=UTC).replace(tzinfo=None), value, at, field)
        except (OverflowError, OSError, ValueError):
            raise CorpusError(f"{at}: field {field!r}: Unix time {value!r} is out of range (a number is read as "
                              "Unix seconds; milliseconds must be divided by 1000)") from None
    if not isinstance(value, str):
        raise CorpusError(f"{at}: field {field!r} must be an ISO 8601 string, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value.strip())
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    except ValueError:
        raise CorpusError(f"{at}: field {field!r}: cannot parse timestamp {value[:60]!r} (expected ISO 8601)") from None
    except OverflowError:  # a zone that moves a date at the edge of the calendar past it
        raise CorpusError(f"{at}: field {field!r}: timestamp {value[:60]!r} is out of range") from None
    return in_range(parsed, value, at, field)


def in_range(parsed: datetime, value: Any, at: str, field: str) -> datetime:
    """`parsed` if its year is within limits.MIN_YEAR..MAX_YEAR: later stages add minutes and days to message
    times, which must not overflow."""
    if not limits.time_in_range(parsed):
        raise CorpusError(f"{at}: field {field!r}: timestamp {str(value)[:60]!r} is outside the years "
                          f"{limits.MIN_YEAR}-{limits.MAX_YEAR - 1} that tmem accepts")
    return parsed


def _text(value: Any, at: str, field: str) -> str:
    """A string field's value: a string as is, a JSON integer as its decimal text (LoCoMo has integer answers,
    EverMemBench integer message indexes); floats, booleans, lists and objects are refused, and so is a string
    longer than limits.field_chars(field)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # Python refuses to print an integer of more than 4,300 digits: never past the bound
    if isinstance(value, str):
        return bounded(value, at, field)
    kind = "bool" if isinstance(value, bool) else type(value).__name__
    raise CorpusError(f"{at}: field {field!r} must be a string (or an integer), got {kind}")


def bounded(value: str, at: str, field: str) -> str:
    """`value` if it is within limits.field_chars(field) characters, else a refusal naming the field (names are
    copied into every message that carries them; see limits.MAX_NAME_CHARS)."""
    limit = limits.field_chars(field)
    if limit is not None and len(value) > limit:
        hint = ("set TMEM_MAX_MESSAGE_CHARS to raise it" if field in limits.LONG_TEXT_FIELDS
                else "names, ids and labels are at most this long")
        raise CorpusError(f"{at}: field {field!r} is {len(value):,} characters, over the limit of {limit:,} "
                          f"({hint}); refused")
    return value


def key_name(value: Any, at: str, field: str) -> str:
    """A name the format keeps as an object key or in a file (a group, a channel, a date): a bounded string."""
    return bounded(expect(value, str, at, field), at, field)


def required_str(record: dict, field: str, at: str) -> str:
    value = record.get(field)
    if value is None or value == "":
        raise CorpusError(f"{at}: required field {field!r} is missing")
    return _text(value, at, field)


def optional_str(record: dict, field: str, at: str) -> str | None:
    value = record.get(field)
    if value is None or value == "":
        return None
    return _text(value, at, field)


def optional_number(record: dict, field: str, at: str, kind: type = int) -> Any:
    value = record.get(field)
    if value is None or value == "":
        return None
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise CorpusError(f"{at}: field {field!r} must be a {kind.__name__}, got {short(value)}") from None
    if isinstance(number, float) and not limits.finite(number):
        raise CorpusError(f"{at}: field {field!r} must be a finite number, got {value!r}")
    if kind is int and isinstance(value, float) and not value.is_integer():
        raise CorpusError(f"{at}: field {field!r} must be an integer, got {value!r}")
    low, high = limits.INT_FIELD_RANGE
    if kind is int and not low <= number <= high:
        raise CorpusError(f"{at}: field {field!r}: {short(value)} is out of range ({low:,} to {high:,})")
    return number


def short(value: Any, width: int = 60) -> str:
    """A value's repr for an error line, cut to `width` characters (a record may hold megabytes)."""
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= width else text[:width] + "…"


# ------------------------------------------------------------------------------------ shared by every importer
MAX_IMPORT_BYTES = limits.MAX_IMPORT_BYTES  # one input file; raise with TMEM_MAX_IMPORT_BYTES


@dataclass(frozen=True)
class Imported:
    """An importer's result: the corpus plus human-readable notes (repairs, skipped records, unresolved
    references) that the import summary prints and `corpora.notes` keeps."""

    data: CorpusData
    notes: tuple[str, ...] = ()
    split: Any = None  # the tmem.corpora.splits.Split the input declares (split.json, or IRC's split folder)


Files = list[tuple[str, bytes]]  # an upload's plain files: (base name, content)


@dataclass(frozen=True)
class Format:
    """One input format: its name (the `import` command's FORMAT, `corpora.format`), its reader, and how an
    upload is laid out for that reader. Each importer module defines its own; tmem.corpora.formats lists them.

    An uploaded zip is extracted and the reader starts from `zip_member` (a glob matched once anywhere in the
    zip; with `zip_member_folder`, from the folder holding it) or, when that is None, from the zip's content
    folder. Plain files are placed by `place(files, folder, shown)`, which returns the path for the reader and
    records in `shown` each staged path's uploaded name."""

    name: str
    read: Callable[[Path], Imported | CorpusData]
    upload_hint: str  # what to upload, shown beside the uploader
    upload_types: tuple[str, ...]  # extensions the uploader offers
    place: Callable[[Files, Path, dict[str, str]], Path]
    zip_member: str | None = None
    zip_member_folder: bool = False
    zip_member_what: str = ""  # how an error names the member when there is not exactly one (default: the glob)
    corpus_from_file: bool = False  # default corpus name: the input's file name without extension, not `name`

    def default_corpus(self, path: Path) -> str:
        return path.stem if self.corpus_from_file else self.name


def stage_file(folder: Path, name: str, content: bytes, shown: dict[str, str]) -> Path:
    """Write one uploaded file into the staging folder; errors will name it as uploaded, not where it was staged."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(content)
    shown[str(path)] = name
    return path


def place_single(files: Files, folder: Path, shown: dict[str, str]) -> Path:
    """The plain-file layout of a one-file format."""
    if len(files) != 1:
        raise CorpusError(f"{', '.join(n for n, _ in files)}: this format takes one file (or a .zip holding one)")
    return stage_file(folder, *files[0], shown)


def read_json(path: Path) -> Any:
    """Parse a whole JSON file; a syntax error (e.g. a truncated file) names the line and column."""
    return parse_json(read_text(path), str(path))


def parse_json(text: str, at: str, line: int | None = None, unique_keys: bool = False) -> Any:
    """One JSON document; bad syntax names the line and column, nesting past limits.MAX_JSON_DEPTH is refused
    (the formats nest a few levels; a deeper document is an attack on the parser or on whatever walks it). With
    `unique_keys`, an object naming a key twice is refused (which of the two is meant?)."""
    try:
        value = json.loads(text, object_pairs_hook=_unique if unique_keys else None)
    except _RepeatedKey as exc:
        where_ = f"{at}:{line}" if line else at
        raise CorpusError(f"{where_}: key {exc.args[0]!r} appears twice in one object; refused") from None
    except json.JSONDecodeError as exc:
        where_ = f"{at}:{line or exc.lineno}"
        raise CorpusError(f"{where_}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        value = None
        deep = True
    else:  # nesting needs an opening bracket per level: a line with few of them cannot be too deep
        deep = text.count("{") + text.count("[") > limits.MAX_JSON_DEPTH and limits.json_depth_exceeds(value)
    if deep:
        where_ = f"{at}:{line}" if line else at
        raise CorpusError(f"{where_}: JSON nested deeper than {limits.MAX_JSON_DEPTH} levels; refused")
    return value


class _RepeatedKey(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) < len(pairs):
        seen = set()
        raise _RepeatedKey(next(k for k, _ in pairs if k in seen or seen.add(k))[:60])
    return out


def expect(value: Any, kind: type, at: str, field: str) -> Any:
    """`value` if it has the JSON type `kind` (dict, list or str), else an error naming the field."""
    if not isinstance(value, kind):
        got = "null" if value is None else type(value).__name__
        raise CorpusError(f"{at}: field {field!r} must be {_JSON_NAMES[kind]}, got {got}")
    return value


_JSON_NAMES = {dict: "an object", list: "a list", str: "a string"}


def cap_messages(imported: Imported) -> Imported:
    """Truncate message texts over limits.message_chars() (a 50 MB message would make every later stage slow and
    every trace huge), with a note naming how many and the first one."""
    limit = limits.message_chars()
    messages = imported.data.messages
    columnar = isinstance(messages, MessageColumns)  # read as a column: no Message built for the million that fit
    if columnar:
        long = messages.longer_than("text", limit)
        texts = messages.column("text") if long else []
    else:
        texts = [m.text for m in messages]
        long = [i for i, text in enumerate(texts) if len(text) > limit]
    if not long:
        return imported
    first = messages[long[0]]
    for i in long:
        texts[i] = limits.truncate(texts[i], limit)[0]
    if columnar:
        messages = messages.replace_column("text", texts)
    else:
        messages = list(messages)
        for i in long:
            messages[i] = replace(messages[i], text=texts[i])
    note = (f"{len(long):,} message text(s) longer than {limit:,} characters were truncated (first: {first.scope} / "
            f"{first.id}, {len(first.text):,} characters); set TMEM_MAX_MESSAGE_CHARS to raise the limit")
    return Imported(replace(imported.data, messages=messages), (*imported.notes, note), imported.split)


def bound_notes(notes: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """At most limits.MAX_NOTES notes of at most limits.MAX_NOTE_CHARS each, plus one saying how many more were
    not stored: notes are stored with the corpus and listed in the app."""
    kept = tuple(limits.truncate(note, limits.MAX_NOTE_CHARS)[0] for note in notes[:limits.MAX_NOTES])
    if len(notes) > limits.MAX_NOTES:
        kept += (f"… {len(notes) - limits.MAX_NOTES:,} more notes not stored (the first {limits.MAX_NOTES:,} are "
                 "kept)",)
    return kept


class Progress:
    """A stderr progress counter for large inputs, at most twice a second: one redrawn line on a terminal,
    plain lines otherwise."""

    interval = 0.5  # seconds between lines

    def __init__(self, label: str, total: int | None = None, min_items: int = 20_000):
        self.label, self.total, self.min_items = label, total, min_items
        self.count, self._last, self._shown = 0, time.monotonic(), False

    def add(self, n: int = 1) -> None:
        self.count += n
        now = time.monotonic()
        if self.count >= self.min_items and now - self._last >= self.interval:
            self._last, self._shown = now, True
            self._print(f"{self.count:,}" + (f"/{self.total:,}" if self.total else ""), final=False)

    def done(self) -> None:
        if self._shown:
            self._print(f"{self.count:,} done", final=True)

    def _print(self, state: str, final: bool) -> None:
        tty = sys.stderr.isatty()
        print(("\r" if tty else "") + f"{self.label}: {state}", end="\n" if final or not tty else "",
              file=sys.stderr, flush=True)
