"""DuckDB's JSON reader as the bulk parser of the JSONL importer (tmem/corpora/jsonl.py); it lives in the store
layer because every use of DuckDB does (tmem/store*.py).

`read_json` parses a file of a million lines in about half a second of CPU, where Python's `json.loads` and the
field checks take ten. DuckDB reads the fields of every line (strings as text, numbers as their JSON text); a
message line whose every field has its plain JSON type (strings; whole numbers for stage and phase_order in the
INTEGER range; a finite fraction for phase_progress; an ISO date or date-time without a zone, years 1900-2199)
becomes a row here, with exactly the values the Python reader (`tmem.corpora.jsonl.parse_message`) gives it.
Every other line (questions, links, a number where a string is expected, a numeric or zoned timestamp, a string
that reads as a number, a name longer than limits.MAX_NAME_CHARS, deep nesting) is handed back by number for the
Python reader, which reads it exactly as before. A file DuckDB would not read line by line as Python does (a line
that does not start with "{", so blank and comment lines too, a carriage return), or past the import limit, or
cannot parse at all (bad JSON, a repeated key, invalid UTF-8, a lone surrogate), is left to the Python reader
whole (`None`): its first problem is then named at its line, as always.
"""
from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from tmem.limits import INT_FIELD_RANGE, MAX_JSON_DEPTH, MAX_NAME_CHARS, MAX_YEAR, MIN_YEAR, import_bytes

STRINGS = ("id", "scope", "text", "author", "role", "channel", "topic", "phase", "reply_to")
NUMBERS = ("stage", "phase_order", "phase_progress")  # read as their JSON text
_COLUMNS = {"kind": "VARCHAR", "timestamp": "VARCHAR", **{f: "VARCHAR" for f in STRINGS},
            **{f: "JSON" for f in NUMBERS}}
# what datetime.fromisoformat reads the same way as DuckDB's cast: a date, or a date and a time to the microsecond
_ISO = r"\d{4}-\d{2}-\d{2}([T ]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?)?"
_LOW, _HIGH = INT_FIELD_RANGE
_PROGRESS = "CAST(phase_progress AS VARCHAR)"
_CHUNK = 1 << 24  # bytes of the file scanned at a time


def _string(field: str) -> str:
    """DuckDB reads a number, a boolean, an object or a list in a VARCHAR column as its JSON text: a value that
    could be one (a string "7" or "[WIP]" too) goes to the Python reader, which tells them apart. (A first
    character that could start a number's text is checked with a cast: "Infinity", "nan", but not "Need".)"""
    return (f"({field} IS NULL OR NOT regexp_matches({field}, '^([-0-9\\[{{]|true$|false$)') AND NOT "
            f"({field}[1] IN ('I', 'N', 'i', 'n') AND TRY_CAST({field} AS DOUBLE) IS NOT NULL))")


def _int(field: str) -> str:
    text = f"CAST({field} AS VARCHAR)"
    return (f"({field} IS NULL OR (regexp_full_match({text}, '-?[0-9]{{1,10}}') "
            f"AND TRY_CAST({text} AS BIGINT) BETWEEN {_LOW} AND {_HIGH}))")


def plain_condition(kind_known: str) -> str:
    """The SQL condition for a plain message line; `kind_known`: when kind reads NULL, that the key is absent
    (Python refuses `"kind": null`; DuckDB reads it as NULL like an absent key)."""
    ts = "TRY_CAST(timestamp AS TIMESTAMP)"
    return " AND ".join([
        f"(kind = 'message' OR (kind IS NULL AND {kind_known}))",
        "id <> ''", "text <> ''", *(_string(f) for f in STRINGS),
        *(f"({f} IS NULL OR length({f}) <= {MAX_NAME_CHARS})" for f in STRINGS if f != "text"),
        f"regexp_full_match(timestamp, '{_ISO}') AND {ts} >= TIMESTAMP '{MIN_YEAR}-01-01' "
        f"AND {ts} < TIMESTAMP '{MAX_YEAR}-01-01'",
        _int("stage"), _int("phase_order"),
        f"(phase_progress IS NULL OR ({_PROGRESS}[1] IN ('-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9') "
        f"AND regexp_matches({_PROGRESS}, '[.eE]') AND isfinite(TRY_CAST({_PROGRESS} AS DOUBLE))))",
    ])


ROW = ", ".join([
    "id", "coalesce(nullif(scope, ''), $scope) AS scope", "text", "TRY_CAST(timestamp AS TIMESTAMP) AS timestamp",
    *(f"nullif({f}, '') AS {f}" for f in ("author", "role", "channel", "topic", "phase")),
    "TRY_CAST(CAST(stage AS VARCHAR) AS INTEGER) AS stage",
    "TRY_CAST(CAST(phase_order AS VARCHAR) AS INTEGER) AS phase_order",
    f"TRY_CAST({_PROGRESS} AS DOUBLE) AS phase_progress", "nullif(reply_to, '') AS reply_to",
])
SCHEMA = pa.schema([("id", pa.string()), ("scope", pa.string()), ("text", pa.string()),
                    ("timestamp", pa.timestamp("us")), *((f, pa.string()) for f in STRINGS[3:-1]),
                    ("stage", pa.int32()), ("phase_order", pa.int32()), ("phase_progress", pa.float64()),
                    ("reply_to", pa.string()), ("plain", pa.bool_())])


def scan(path: Path) -> tuple[bool, set[int], bool]:
    """(whether DuckDB's records are the file's lines: every line starts with "{", no carriage return; the numbers
    of the lines with more than MAX_JSON_DEPTH brackets, which Python refuses as too deep; whether the bytes
    "null" occur) from byte counts over large chunks, not a Python step per line."""
    deep: set[int] = set()
    before, tail, has_null = 0, b"", False  # lines before `data`; the unfinished last line of the previous chunk
    limit, total = import_bytes(), 0
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(_CHUNK)
            total += len(chunk)
            if total > limit:  # grew past the limit since it was checked: the Python reader refuses it
                return False, deep, has_null
            data = tail + chunk  # starts at the start of a line
            if not data:
                break
            # every line starts with "{": after each newline but a final one, and at the start
            newlines = data.count(b"\n", 0, len(data) - 1)
            if b"\r" in chunk or data[:1] != b"{" or newlines != data.count(b"\n{"):
                return False, deep, has_null
            has_null = has_null or b"null" in data
            end = len(data) if not chunk else data.rfind(b"\n") + 1  # the complete lines (all of them at the end)
            # a line past the depth limit has that many brackets more than the one "{" each line starts with
            if data.count(b"{", 0, end) + data.count(b"[", 0, end) - newlines > MAX_JSON_DEPTH:
                for i, line in enumerate(data[:end].split(b"\n"), start=before + 1):
                    if line.count(b"{") + line.count(b"[") > MAX_JSON_DEPTH:
                        deep.add(i)
            if not chunk:
                break
            before += data.count(b"\n", 0, end)
            tail = data[end:]
    return True, deep, has_null


def read_plain_messages(path: Path, default_scope: str) -> tuple[pa.Table, list[int]] | None:
    """(the plain message lines as rows: `line`, then the `Message` fields in order; the numbers of the other
    non-empty lines), or None when the Python reader must read the whole file."""
    name = str(Path(path).resolve())
    if any(c in name for c in "*?[{"):  # DuckDB would read a file name with these as a pattern
        return None
    regular, deep, has_null = scan(Path(name))
    if not regular:
        return None
    columns = "{" + ", ".join(f"'{f}': '{t}'" for f, t in _COLUMNS.items()) + "}"
    source = f"read_json($path, format = 'newline_delimited', compression = 'none', columns = {columns})"
    kind_known = "TRUE"
    if has_null:  # "kind": null reads as NULL: ask the line itself whether the key is there
        source += " POSITIONAL JOIN read_ndjson_objects($path, compression = 'none') AS raw"
        kind_known = "NOT json_exists(raw.json, '$.kind')"
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET enable_progress_bar = false")
        table = con.sql(f"SELECT {ROW}, plain FROM (SELECT *, coalesce({plain_condition(kind_known)}, FALSE) "
                        f"AS plain FROM {source})", params={"path": name, "scope": default_scope}).to_arrow_table()
    except duckdb.InvalidInputException:  # bad JSON, a repeated key, not UTF-8: the Python reader says which line
        return None
    finally:
        con.close()
    table = table.cast(SCHEMA)
    lines = pa.array(range(1, table.num_rows + 1), pa.int64())
    plain = table.column("plain").to_numpy(zero_copy_only=False)
    if deep:
        for line in deep:
            plain[line - 1] = False
    others = [int(n) for n in (~plain).nonzero()[0] + 1]
    rows = table.drop_columns(["plain"]).add_column(0, "line", lines).filter(pa.array(plain))
    return rows, others


def lines_at(path: Path, numbers: list[int]) -> list[tuple[int, str]]:
    """(number, text) of the given lines (ascending) of a file `scan` found regular, read a chunk at a time."""
    found: list[tuple[int, str]] = []
    wanted = iter(numbers)
    target = next(wanted, None)
    before, tail = 0, b""
    with open(path, "rb") as handle:
        while target is not None:
            chunk = handle.read(_CHUNK)
            data = tail + chunk
            if not data:
                break
            end = len(data) if not chunk else data.rfind(b"\n") + 1
            count = data.count(b"\n", 0, end) + (0 if chunk or data.endswith(b"\n") else 1)
            if target <= before + count:
                lines = data[:end].split(b"\n")
                while target is not None and target <= before + count:
                    found.append((target, lines[target - before - 1].decode("utf-8")))
                    target = next(wanted, None)
            if not chunk:
                break
            before += count
            tail = data[end:]
    return found
