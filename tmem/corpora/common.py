"""Field parsing shared by the importers; every error names the file, the line or record, and the field."""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tmem.store import CorpusData, CorpusError


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
            return datetime.fromtimestamp(float(value), tz=UTC).replace(tzinfo=None)
        except (OverflowError, OSError, ValueError):
            raise CorpusError(f"{at}: field {field!r}: Unix time {value!r} is out of range (a number is read as "
                              "Unix seconds; milliseconds must be divided by 1000)") from None
    if not isinstance(value, str):
        raise CorpusError(f"{at}: field {field!r} must be an ISO 8601 string, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise CorpusError(f"{at}: field {field!r}: cannot parse timestamp {value!r} (expected ISO 8601)") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
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
        if isinstance(value, bool):
            raise TypeError
        number = kind(value)
    except (TypeError, ValueError):
        raise CorpusError(f"{at}: field {field!r} must be a {kind.__name__}, got {value!r}") from None
    if kind is int and isinstance(value, float) and not value.is_integer():
        raise CorpusError(f"{at}: field {field!r} must be an integer, got {value!r}")
    return number


# ------------------------------------------------------------------------------------ shared by every importer
MAX_IMPORT_BYTES = 2 * 1024 ** 3  # one input file; raise with TMEM_MAX_IMPORT_BYTES


@dataclass(frozen=True)
class Imported:
    """An importer's result: the corpus plus human-readable notes (repairs, skipped records, unresolved
    references) that the import summary prints and `corpora.notes` keeps."""

    data: CorpusData
    notes: tuple[str, ...] = ()


def check_size(path: Path) -> None:
    """Refuse a file over the import limit with a clear error instead of exhausting memory."""
    limit = int(os.environ.get("TMEM_MAX_IMPORT_BYTES", MAX_IMPORT_BYTES))
    size = path.stat().st_size
    if size > limit:
        raise CorpusError(f"{path}: file is {size:,} bytes, over the import limit of {limit:,} bytes "
                          "(set TMEM_MAX_IMPORT_BYTES to raise it)")


def read_text(path: Path) -> str:
    check_size(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json(path: Path) -> Any:
    """Parse a whole JSON file; a syntax error (e.g. a truncated file) names the line and column."""
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None


def expect(value: Any, kind: type, at: str, field: str) -> Any:
    """`value` if it has the JSON type `kind` (dict, list or str), else an error naming the field."""
    if not isinstance(value, kind):
        got = "null" if value is None else type(value).__name__
        raise CorpusError(f"{at}: field {field!r} must be {_JSON_NAMES[kind]}, got {got}")
    return value


_JSON_NAMES = {dict: "an object", list: "a list", str: "a string"}


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
