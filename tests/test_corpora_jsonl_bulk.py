"""The JSONL importer's bulk reader (DuckDB's read_json, tmem/store/jsonl.py) gives exactly what the Python reader
gives, line for line: the same messages, questions, gold, links and notes, or the same one-line error. Generated
files mix plain lines (which DuckDB reads) with every kind of odd value (which it must hand to Python)."""
from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmem.corpora import jsonl
from tmem.corpora.jsonl import load_jsonl, parse_jsonl_lines
from tmem.store.jsonl import read_plain_messages
from tmem.types import CorpusError

ODD_BUT_VALID = st.one_of(  # Python reads these (an integer as its decimal text, "" as absent); DuckDB must not
    st.sampled_from(["", "7", "-3", "1e5", "true", "[WIP] x", "{x}", "NaN", "Infinity", "x\u0000y", "\u001b[31m",
                     "null", "\u2028", "a\u0085b"]),
    st.integers(-5, 5), st.just(None), st.text(max_size=8))
STRING_VALUES = st.one_of(ODD_BUT_VALID, ODD_BUT_VALID, ODD_BUT_VALID,
                          st.sampled_from([True, 1.5, [1], {"a": 1}]))  # refused, at their line
TIMESTAMPS = st.sampled_from([
    "2025-03-03T09:01:19", "2025-03-03 09:01:19", "2025-03-03", "2025-03-03T09:01:19.5", "2025-03-03T09:01:19.123456",
    "2025-03-03T09:01:19Z", "2025-03-03T09:01:19+02:00", " 2025-03-03T09:01:19", "2025-02-30", "2025-03-03T24:00:00",
    "1899-12-31", "2200-01-01", "20250303T090119", "2025-3-3", "", None, 1_700_000_000, 1.7e9, True, "yesterday"])
INTS = st.one_of(st.integers(-3, 3), st.just(2 ** 31), st.just(-(2 ** 31)), st.just(1.0), st.just(1.5), st.just("3"),
                 st.just(None), st.just(True), st.just(10 ** 30))
PROGRESS = st.one_of(st.sampled_from([0.0, 0.5, 1.0, -0.0, 0.1, 1e-7, 2.5e300, math.nan, math.inf, 0, 1, "0.5", None,
                                      True]), st.floats(allow_nan=False, allow_infinity=False))


def sometimes(draw, plain, odd):
    """Mostly a plain value (DuckDB reads the line), one time in twelve an odd one (Python must)."""
    return draw(odd) if draw(st.integers(0, 11)) == 0 else draw(plain)


PLAIN_STRINGS = st.sampled_from(["a", "Hana", "#launch", "3 tickets", "é 👋", "quote \" and \\ slash", "tab\there"])


@st.composite
def message(draw, number, ids):
    record = {"id": sometimes(draw, st.just(f"m{number}"), st.one_of(st.sampled_from(ids), STRING_VALUES)),
              "text": sometimes(draw, PLAIN_STRINGS, STRING_VALUES),
              "timestamp": sometimes(draw, st.sampled_from(["2025-03-03T09:01:19", "2025-03-03 10:00:00.25"]),
                                     TIMESTAMPS)}
    for field in ("scope", "author", "role", "channel", "topic", "phase", "reply_to"):
        if field == "scope" or draw(st.booleans()):
            plain = st.sampled_from(["s", "s", "t"]) if field == "scope" else st.sampled_from(ids + ["gone"])
            record[field] = sometimes(draw, plain if field in ("scope", "reply_to") else PLAIN_STRINGS,
                                      STRING_VALUES)
    for field in ("stage", "phase_order"):
        if draw(st.booleans()):
            record[field] = sometimes(draw, st.integers(-3, 3), INTS)
    if draw(st.booleans()):
        record["phase_progress"] = sometimes(draw, st.floats(allow_nan=False, allow_infinity=False), PROGRESS)
    kind = draw(st.sampled_from(["absent", "message", "message", "message", None, "bogus"]))
    if kind != "absent" and (kind == "message" or draw(st.integers(0, 4)) == 0):
        record["kind"] = kind
    if draw(st.integers(0, 59)) == 0:
        record["extra"] = [[[[1]]]] if draw(st.booleans()) else {"deep": json.loads("[" * 70 + "]" * 70)}
    return record


@st.composite
def jsonl_file(draw):
    ids = [f"m{i}" for i in range(6)]
    lines = []
    for number in range(draw(st.integers(1, 12))):
        choice = draw(st.integers(0, 39))
        if choice == 0:
            lines.append({"kind": "question", "scope": draw(st.sampled_from(["s", "s", "t", "default"])),
                          "id": f"q{number}",
                          "text": "?", "gold_evidence": [draw(st.sampled_from(ids))]})
        elif choice == 1:
            lines.append({"kind": "link", "scope": "s", "child_id": draw(st.sampled_from(ids)), "parent_id": "m0"})
        elif choice == 2:
            lines.append(draw(st.sampled_from(["# a comment", "", "   ", "[1, 2]", "{not json",
                                               '{"id": "a", "id": "b"}',
                                               '{"id": "\\ud800", "text": "x", "timestamp": "2025-01-01"}'])))
        else:
            lines.append(draw(message(number, ids)))
    texts = [line if isinstance(line, str) else json.dumps(line, ensure_ascii=draw(st.booleans())) for line in lines]
    return "".join(t + "\n" for t in texts) if draw(st.integers(0, 4)) else "".join(t + "\n" for t in texts).rstrip()


def outcome(read) -> tuple:
    try:
        imported = read()
    except CorpusError as exc:
        return ("error", str(exc))
    data = imported.data
    return ("ok", list(data.messages), list(data.questions), list(data.golds), list(data.links), imported.notes)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=jsonl_file())
def test_the_bulk_reader_gives_what_the_python_reader_gives(tmp_path, content):
    path = tmp_path / "c.jsonl"
    path.write_text(content, encoding="utf-8")
    python = outcome(lambda: parse_jsonl_lines(io.StringIO(content, newline=None), str(path)))  # as a file reads
    assert outcome(lambda: load_jsonl(path)) == python


def test_plain_message_lines_are_read_by_duckdb_and_the_rest_by_python(tmp_path, monkeypatch):
    records = [{"kind": "message", "scope": "s", "id": f"m{i}", "text": f"text {i}", "author": "Hana",
                "timestamp": f"2025-01-0{i + 1}T10:00:00", "stage": 1, "phase_progress": 0.5} for i in range(3)]
    records.insert(1, {"scope": "s", "id": "m9", "text": "x", "timestamp": 1_700_000_000})  # numeric: Python
    records.append({"kind": "question", "scope": "s", "id": "q", "text": "?", "gold_evidence": ["m9"]})
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    rows, others = read_plain_messages(path, "default")
    assert rows.column("line").to_pylist() == [1, 3, 4] and others == [2, 5]
    python_lines: list[int] = []
    read = jsonl.Reader.read
    monkeypatch.setattr(jsonl.Reader, "read", lambda self, n, line: python_lines.append(n) or read(self, n, line))
    data = load_jsonl(path).data
    assert python_lines == [2, 5]
    assert [m.id for m in data.messages] == ["m0", "m9", "m1", "m2"] and data.golds[0][1].evidence == (("m9",),)
    assert data.messages[0].phase_progress == 0.5 and data.messages[0].stage == 1


@pytest.mark.parametrize("content", ["# header\n{}\n", '{"a": 1}\r\n', '{"a": 1}\n\n{"b": 2}\n', ' {"a": 1}\n'])
def test_files_duckdb_would_split_differently_go_to_python_whole(tmp_path, content):
    path = tmp_path / "c.jsonl"
    path.write_text(content, encoding="utf-8", newline="")
    assert read_plain_messages(path, "default") is None


def test_a_repeated_id_is_named_at_its_line_by_the_python_reader(tmp_path):
    path = tmp_path / "c.jsonl"
    record = {"id": "m1", "text": "x", "timestamp": "2025-01-01"}
    path.write_text(json.dumps(record) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(CorpusError, match=r"c.jsonl:2: field 'id': duplicate message id 'm1' \(first on line 1\)"):
        load_jsonl(Path(path))


def test_the_shipped_demo_reads_the_same_both_ways():
    demo = Path(__file__).resolve().parent.parent / "data" / "demo.jsonl"
    rows, others = read_plain_messages(demo, "default")
    bulk = load_jsonl(demo)
    # the other lines: 48 questions and the generator's 3,000 planned edges (one gold link per message)
    assert rows.num_rows == len(bulk.data.messages) == 3000 and len(others) == 48 + 3000
    assert len(bulk.data.links) == 3000
    with demo.open(encoding="utf-8") as handle:
        assert outcome(lambda: bulk) == outcome(lambda: parse_jsonl_lines(handle, str(demo)))
