"""Field parsing shared by the importers; every error names the file, the line or record, and the field."""
from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tmem import limits
from tmem.message_columns import MessageColumns
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
    EverMemBench integer message indexes); floats, booleans, lists and objects are refused."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    kind = "bool" if isinstance(value, bool) else type(value).__name__
    raise CorpusError(f"{at}: field {field!r} must be a string (or an integer), got {kind}")


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


def check_size(path: Path) -> None:
    """Refuse a file outside the input, a folder, or a file over the import limit with a clear error (instead of
    reading someone else's files, a traceback, or exhausting memory)."""
    inside(path)
    if path.is_dir():
        raise CorpusError(f"{path}: is a folder; a file is expected here (see docs/corpora.md for the layout)")
    limit = limits.import_bytes()
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CorpusError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if size > limit:
        raise CorpusError(f"{path}: file is {size:,} bytes, over the import limit of {limit:,} bytes "
                          "(set TMEM_MAX_IMPORT_BYTES to raise it)")


def read_text(path: Path) -> str:
    check_size(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def read_json(path: Path) -> Any:
    """Parse a whole JSON file; a syntax error (e.g. a truncated file) names the line and column."""
    return parse_json(read_text(path), str(path))


def parse_json(text: str, at: str, line: int | None = None) -> Any:
    """One JSON document; bad syntax names the line and column, nesting past limits.MAX_JSON_DEPTH is refused
    (the formats nest a few levels; a deeper document is an attack on the parser or on whatever walks it)."""
    try:
        value = json.loads(text)
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


# ----------------------------------------------------------------------- confinement: nothing outside the input
_ROOT: ContextVar[Path | None] = ContextVar("tmem_input_root", default=None)


@contextmanager
def input_root(root: Path) -> Iterator[Path]:
    """Confine every file an importer opens (through check_size / read_text / read_json / open_text) to `root`
    while the block runs; the upload passes its staging folder, `load` the input's own folder."""
    token = _ROOT.set(Path(os.path.abspath(root)))
    try:
        yield _ROOT.get()
    finally:
        _ROOT.reset(token)


def default_root(path: Path, levels_up: int = 0) -> Path:
    """The input's boundary: the folder given (or the file's folder), and `levels_up` folders above it where the
    format's documented layout looks there (GroupMemBench's questions/, EverMemBench's profiles.json)."""
    folder = Path(os.path.abspath(path if path.is_dir() else path.parent))
    return folder.parents[min(levels_up, len(folder.parents)) - 1] if levels_up and folder.parents else folder


def confined(levels_up: int = 0) -> Callable:
    """Decorate a loader `f(path)`: without an enclosing input_root, its input is default_root(path, levels_up)."""
    def decorate(loader: Callable) -> Callable:
        @functools.wraps(loader)
        def run(path: str | Path, *args: Any, **kwargs: Any) -> Any:
            if _ROOT.get() is not None:
                return loader(path, *args, **kwargs)
            with input_root(default_root(Path(path), levels_up)):
                return loader(path, *args, **kwargs)
        return run
    return decorate


def boundary() -> Path | None:
    """The folder the running import may read in (None outside an import)."""
    return _ROOT.get()


def inside(path: Path) -> Path:
    """`path` if it lies inside the input and no symbolic link is on the way to it; else a clear refusal."""
    root = _ROOT.get()
    if root is None:
        return path
    lexical = Path(os.path.abspath(path))
    if not lexical.is_relative_to(root):
        raise CorpusError(f"{path}: outside the input {root}; refused")
    real, real_root = lexical.resolve(), root.resolve()
    if not real.is_relative_to(real_root) or real.relative_to(real_root) != lexical.relative_to(root):
        raise CorpusError(f"{path}: is or goes through a symbolic link; refused (copy the files instead)")
    return path


def child(folder: Path, name: str, at: str, field: str) -> Path:
    """`folder / name` for a `name` read from the data (a channel, a domain): one plain path component, never an
    absolute path, `..`, a separator or a NUL, so a record cannot point the importer at other folders."""
    if name in ("", ".", "..") or any(c in "/\\" or ord(c) < 32 for c in name) or len(name.encode()) > 255:
        raise CorpusError(f"{at}: field {field!r}: {name[:60]!r} is not usable as a folder name "
                          "(no '/', '\\', '..' or control characters, at most 255 bytes); refused")
    return inside(folder / name)


def open_text(path: Path):
    """A checked file opened for streaming UTF-8 reads (JSONL)."""
    check_size(path)
    try:
        return path.open(encoding="utf-8")
    except OSError as exc:
        raise CorpusError(f"{path}: cannot be read ({exc.strerror or exc})") from None


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
    return Imported(replace(imported.data, messages=messages), (*imported.notes, note))


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
