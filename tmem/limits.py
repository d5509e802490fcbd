"""Bounds on what tmem accepts and produces, so that a hostile or broken input ends in a clear error (or a
documented truncation) instead of exhausting memory, time or disk. docs/corpora.md lists them all.

Import limits that an operator may need to raise are read from the environment at the moment of use (a running
app picks up a change without a restart); the rest are constants, chosen far above anything a real corpus holds.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

# ------------------------------------------------------------------------------------------- inputs (importers)
MAX_IMPORT_BYTES = 2 * 1024 ** 3  # one input file (CLI or server path); env TMEM_MAX_IMPORT_BYTES
MAX_UPLOAD_BYTES = 512 * 1024 ** 2  # an upload's files, a zip counted uncompressed; env TMEM_MAX_UPLOAD_BYTES
# Entries in one uploaded zip; env TMEM_MAX_UPLOAD_FILES. Each file costs ~1-2 ms to extract however small (a zip
# of 199,999 empty files took 205-388 s); a Slack export holds one file per channel and day (50 channels over a
# year: 18,250).
MAX_UPLOAD_FILES = 20_000
MAX_MESSAGE_CHARS = 20_000  # one message's text; longer text is truncated and the import notes say so
MAX_JSON_DEPTH = 64  # nesting of a JSON document (the formats need at most 6)
# Timestamps outside these years are refused: nothing here predates 1900, and later stages add minutes and days
# to message times, which must not overflow Python's datetime (year 9999).
MIN_YEAR, MAX_YEAR = 1900, 2200
INT_FIELD_RANGE = (-(2 ** 31), 2 ** 31 - 1)  # stage / phase_order are DuckDB INTEGER columns
TRUNCATION_MARK = " […truncated by tmem: {dropped:,} more characters]"
# Every other string read from an input is bounded where it is read, before anything copies it: a name (id,
# author, role, channel, topic, phase, question type, asking user, date key) is copied into every message that
# carries it, so a 1 MB channel name over 1,000 messages would take gigabytes. Names over MAX_NAME_CHARS are
# refused; question texts and gold answers over message_chars() too (a message text is truncated instead).
MAX_NAME_CHARS = 1_000
MESSAGE_TEXT_FIELDS = frozenset({"text", "content", "dialogue", "clean_text"})  # truncated by cap_messages
LONG_TEXT_FIELDS = frozenset({"Q", "A", "question", "answer", "gold_answer", "superseded", "blip_caption"})
# Gold evidence units of one question: a question's units are the states and facts its answer rests on (a few,
# dozens at most in every benchmark); more is refused at import and in a gold correction.
MAX_GOLD_UNITS = 1_000
MAX_METADATA_CHARS = 20_000  # generator metadata (decision_change_metadata): longer is not parsed, and noted
# Import notes kept per import (each cut to MAX_NOTE_CHARS): an IRC file of a million garbage lines gives a
# million notes, which the store would keep and the app would render. The rest are counted, "N more not stored".
MAX_NOTES, MAX_NOTE_CHARS = 1_000, 500
MAX_CONFIG_BYTES = 1024 ** 2  # a backend config file (TOML): a few dozen settings and endpoints

# ------------------------------------------------------------------------------------------ outputs (pipeline)
MAX_ANSWER_CHARS = 8_000  # a model answer kept, printed and stored; the rest is cut with a mark
# A stored trace (JSON). Message texts are capped at import, so a real trace stays far below this (0.99 MB for a
# question over 20 messages of 20,000 characters); the bound refuses what the caps did not foresee.
MAX_TRACE_BYTES = 64 * 1024 ** 2

# C0/C1 control characters except tab and newline, plus DEL: they drive terminals (colours, cursor, title, OSC 52
# clipboard writes) when chat text is printed.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Unicode's bidirectional formatting characters (embeddings, overrides, isolates, marks): in a browser or a
# spreadsheet they reorder the text around them, so a reviewer's note can render reversed or hide what it says.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def env_limit(name: str, default: int) -> int:
    """A positive integer limit from the environment variable `name`, else `default`; a bad value is an error
    naming the variable (never silently the default)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"${name} must be a whole number of bytes or characters, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"${name} must be positive, got {value}")
    return value


def import_bytes() -> int:
    return env_limit("TMEM_MAX_IMPORT_BYTES", MAX_IMPORT_BYTES)


def upload_bytes() -> int:
    return env_limit("TMEM_MAX_UPLOAD_BYTES", MAX_UPLOAD_BYTES)


def upload_files() -> int:
    return env_limit("TMEM_MAX_UPLOAD_FILES", MAX_UPLOAD_FILES)


def message_chars() -> int:
    return env_limit("TMEM_MAX_MESSAGE_CHARS", MAX_MESSAGE_CHARS)


def field_chars(field: str) -> int | None:
    """The most characters a string field read from an input may hold (None: a message text, which is
    truncated to message_chars() after reading, with a note)."""
    if field in MESSAGE_TEXT_FIELDS:
        return None
    return message_chars() if field in LONG_TEXT_FIELDS else MAX_NAME_CHARS


# Names that become part of a path (run folders, default run folders, exports) or a command line: a corpus, a
# scope, a run label. One path component of letters, digits and a few marks, starting with a letter, digit or "_"
# (so never "..", a hidden name or an option like "--out"), at most 100 characters, no trailing space or dot.
_SAFE_NAME = re.compile(r"[^\W][\w .,+@=()-]{0,99}")
SAFE_NAME_RULE = ("1-100 letters, digits, spaces and . , + @ = ( ) - _, starting with a letter, digit or _ "
                  "(no '/', '\\', '..' or control characters)")


def safe_name(value: object, what: str) -> str:
    """`value` if it is a single safe name (see SAFE_NAME_RULE), else a ValueError naming `what`."""
    if (not isinstance(value, str) or not _SAFE_NAME.fullmatch(value) or value.endswith((" ", "."))):
        shown = strip_control(value[:60]) if isinstance(value, str) else type(value).__name__
        raise ValueError(f"{what} {shown!r} is not a single safe name: use {SAFE_NAME_RULE}")
    return value


def safe_slug(value: str, fallback: str, length: int = 90) -> str:
    """`value` made a safe name (SAFE_NAME_RULE) of at most `length` characters: every other character becomes
    "_", a name that would start otherwise gets `fallback` first (a run id is made from its folder's name, which
    may be anything the file system takes: "r<img src=x>" and an ESC once went into the run id)."""
    slug = re.sub(r"[^\w .,+@=()-]", "_", value)[:length].rstrip(" .")
    if not slug or not re.match(r"[^\W]", slug):
        slug = f"{fallback}_{slug}"[:length].rstrip(" .")
    return safe_name(slug, "name")


def path_under(base: Path, *parts: str) -> Path:
    """`base / parts`, resolved, if it stays inside `base` (resolved too); else a ValueError. Every path built
    from a name a user or the data chose goes through here, whatever checked the name before."""
    root = Path(base).resolve()
    path = root.joinpath(*parts).resolve()
    if path == root or not path.is_relative_to(root):
        raise ValueError(f"{'/'.join(parts)[:80]!r} would be outside {root}; refused")
    return path


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` characters plus a mark saying how much was dropped; -> (text, was it cut)."""
    if len(text) <= limit:
        return text, False
    return text[:limit] + TRUNCATION_MARK.format(dropped=len(text) - limit), True


def one_of(options: tuple[str, ...]) -> Callable[[str], str]:
    """A parser for one of `options` (case and surrounding space ignored), for settings and flags."""
    def parse(value: str) -> str:
        value = str(value).strip().lower()
        if value not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return value
    return parse


def number_in(kind: type, low: float, high: float) -> Callable[[object], int | float]:
    """A parser for a whole (`int`) or finite (`float`) number from `low` to `high`, for settings and flags: a count
    or an amount that is negative, NaN or Infinity would otherwise mean something else without a word (--max-cost -1
    or nan meant no cap, --limit -1 all questions but the last). A bad value is a ValueError naming the range."""
    def parse(value: object) -> int | float:
        if isinstance(value, bool):
            raise ValueError("expected a number")
        if kind is int and isinstance(value, float):
            if not value.is_integer():
                raise ValueError(f"expected a whole number, got {value!r}")
            value = int(value)
        try:
            number = kind(value.strip() if isinstance(value, str) else value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number) or not low <= number <= high:
            span = " to ".join(f"{int(x):,}" if float(x).is_integer() else f"{x:g}" for x in (low, high))
            raise ValueError(f"expected a {'whole' if kind is int else 'finite'} number from {span}")
        return number
    return parse


def time_in_range(value: datetime) -> bool:
    return MIN_YEAR <= value.year < MAX_YEAR


def finite(value: float) -> bool:
    return math.isfinite(value)


def json_depth_exceeds(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether parsed JSON nests deeper than `limit` containers; iterative, and it visits containers only, so a
    document of a million messages costs about a million steps."""
    stack = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack += [(c, depth + 1) for c in children if isinstance(c, (dict, list))]
    return False


def strip_control(text: str) -> str:
    """Text safe to print on a terminal: control characters (escape sequences included) become U+FFFD."""
    return _CONTROL.sub("\ufffd", text)


def strip_bidi(text: str) -> str:
    """Text that displays in the order it was written: bidirectional formatting characters become U+FFFD."""
    return _BIDI.sub("\ufffd", text)


def check_trace_size(trace_json: str, question_id: str) -> str:
    """`trace_json` if it is within MAX_TRACE_BYTES, else a clear error (the trace is not stored)."""
    size = len(trace_json.encode("utf-8"))
    if size > MAX_TRACE_BYTES:
        raise ValueError(f"the trace of question {question_id!r} is {size:,} bytes, over the {MAX_TRACE_BYTES:,}-byte "
                         "limit; it was not stored (lower TMEM_MAX_MESSAGE_CHARS and re-import, or lower --k)")
    return trace_json


def cap_answer(text: str) -> tuple[str, bool]:
    """A model answer bounded to MAX_ANSWER_CHARS (printed, stored and traced); -> (text, was it cut)."""
    return truncate(text, MAX_ANSWER_CHARS)
