"""The project's JSONL importer keeps the guarantees of the other importers: references are checked (links and
questions name known scopes and messages; a dangling reply_to is cleared and reported), large files show
progress, and the field rules shared by every importer (numbers in string fields, numeric timestamps)."""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tmem.corpora import common
from tmem.corpora.jsonl import load_jsonl, load_jsonl_file, load_jsonl_lines
from tmem.store import CorpusError


def write(tmp_path: Path, *records: dict, name: str = "c.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def msg(mid: str, scope: str = "s", **extra) -> dict:
    return {"id": mid, "scope": scope, "text": f"text {mid}", "timestamp": "2025-01-01T10:00:00", **extra}


def test_a_reply_to_naming_no_message_is_cleared_and_reported(tmp_path):
    result = load_jsonl(write(tmp_path, msg("m1"), msg("m2", reply_to="m1"), msg("m3", reply_to="gone"),
                              msg("m4", scope="t", reply_to="m1")))  # m1 is in scope s, not t
    by_id = {(m.scope, m.id): m for m in result.data.messages}
    assert by_id[("s", "m2")].reply_to == "m1"
    assert by_id[("s", "m3")].reply_to is None and by_id[("t", "m4")].reply_to is None
    assert result.notes == ("2 reply_to link(s) name no message in their scope and were cleared (first: message "
                            "'m3' on line 3, reply_to 'gone')",)
    assert load_jsonl_file(tmp_path / "c.jsonl").messages == result.data.messages  # the corpus-only reader agrees


def test_clean_files_have_no_notes_and_keep_links(tmp_path):
    result = load_jsonl(write(tmp_path, msg("m1"), msg("m2", reply_to="m1"),
                              {"kind": "link", "scope": "s", "child_id": "m2", "parent_id": "m1"},
                              {"kind": "link", "scope": "s", "child_id": "m2", "parent_id": "m1"}))
    assert result.notes == () and result.data.links == [("s", "m2", "m1")]  # a repeated link is kept once


@pytest.mark.parametrize("link,message", [
    ({"child_id": "m2", "parent_id": "m9"}, r"c.jsonl:3: field 'parent_id': unknown message id 'm9' in scope 's'"),
    ({"child_id": "m9", "parent_id": "m1"}, r"c.jsonl:3: field 'child_id': unknown message id 'm9' in scope 's'"),
    ({"scope": "elsewhere", "child_id": "m2", "parent_id": "m1"},
     r"c.jsonl:3: field 'scope': the link names scope 'elsewhere', which has no messages"),
    # who wrote an injected noise chain is text, checked like every other string field (was silently skipped)
    ({"child_id": "m2", "parent_id": "m1", "relation": "UPDATE", "noise_writer": ["a model"]},
     r"c.jsonl:3: field 'noise_writer' must be a string \(or an integer\), got list"),
])
def test_links_must_name_known_messages_and_scopes(tmp_path, link, message):
    path = write(tmp_path, msg("m1"), msg("m2"), {"kind": "link", "scope": "s", **link})
    with pytest.raises(CorpusError, match=message):
        load_jsonl(path)


def test_large_files_print_progress(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(common.Progress, "interval", 0.0)  # a line at every message past 20,000
    path = tmp_path / "big.jsonl"
    lines = [json.dumps(msg(f"m{i}")) + "\n" for i in range(25_000)]
    path.write_text("".join(lines))
    assert len(load_jsonl(path).data.messages) == 25_000  # DuckDB reads the plain lines in one step
    err = capsys.readouterr().err
    assert err == "jsonl messages: 25,000\njsonl messages: 25,000 done\n"
    assert len(load_jsonl_lines(lines, "big.jsonl").messages) == 25_000  # the Python reader counts as it goes
    err = capsys.readouterr().err
    assert "jsonl messages: 20,000" in err and "jsonl messages: 25,000 done" in err


def test_small_files_print_no_progress(tmp_path, capsys):
    load_jsonl(write(tmp_path, msg("m1")))
    assert capsys.readouterr().err == ""


def test_files_over_the_size_limit_are_refused(tmp_path, monkeypatch):
    path = write(tmp_path, msg("m1"), msg("m2"))
    monkeypatch.setenv("TMEM_MAX_IMPORT_BYTES", "100")
    with pytest.raises(CorpusError, match=r"c.jsonl: file is \d+ bytes, over the import limit of 100 bytes"):
        load_jsonl(path)


# --------------------------------------------------------------------- field rules shared by every importer
def test_integers_in_string_fields_become_their_decimal_text(tmp_path):
    data = load_jsonl(write(tmp_path, {"id": 7, "scope": 2025, "text": 42, "timestamp": "2025-01-01"},
                            {"kind": "question", "scope": 2025, "id": 1, "text": "?", "gold_answer": 3})).data
    assert (data.messages[0].id, data.messages[0].scope, data.messages[0].text) == ("7", "2025", "42")
    assert data.golds[0][1].answer == "3"


@pytest.mark.parametrize("value,kind", [(7.5, "float"), (True, "bool"), ({"a": 1}, "dict"), ([1], "list")])
def test_other_values_in_string_fields_are_refused(tmp_path, value, kind):
    path = write(tmp_path, msg("m1"), {"id": value, "text": "x", "timestamp": "2025-01-01"})
    with pytest.raises(CorpusError, match=rf"c.jsonl:2: field 'id' must be a string \(or an integer\), got {kind}"):
        load_jsonl(path)


def test_numeric_timestamps_are_unix_seconds():
    assert common.parse_timestamp(1_700_000_000, "x") == datetime(2023, 11, 14, 22, 13, 20)
    assert common.parse_timestamp(1_700_000_000.25, "x") == datetime(2023, 11, 14, 22, 13, 20, 250000)
    assert common.parse_timestamp("2025-01-01T10:00:00+02:00", "x") == datetime(2025, 1, 1, 8, 0)  # zone -> UTC
    with pytest.raises(CorpusError, match=r"x: field 'timestamp': Unix time 1700000000000 is out of range .*"
                                          r"milliseconds must be divided by 1000"):
        common.parse_timestamp(1_700_000_000_000, "x")
    with pytest.raises(CorpusError, match="x: field 'timestamp' must be an ISO 8601 string or Unix seconds, got bool"):
        common.parse_timestamp(True, "x")
    with pytest.raises(CorpusError, match="x: field 'timestamp' is missing"):
        common.parse_timestamp(None, "x")


def test_a_question_with_more_gold_units_than_the_limit_is_refused(tmp_path):
    """Issue 44: 10,000 one-message gold units in a 1.3 MB upload took the stale check to 1.95 GB; a question's
    gold units are bounded at import like every other field (limits.MAX_GOLD_UNITS)."""
    from tmem import limits
    from tmem.corpora.imports import load

    n = limits.MAX_GOLD_UNITS
    question = {"kind": "question", "scope": "s", "id": "q1", "text": "?", "gold_answer": "a", "superseded": "b"}
    fits = write(tmp_path, *(msg(f"m{i}") for i in range(n + 1)),
                 question | {"gold_evidence": [f"m{i}" for i in range(n)]})
    assert len(load("jsonl", fits).data.golds[0][1].evidence) == n
    over = write(tmp_path, *(msg(f"m{i}") for i in range(n + 1)),
                 question | {"gold_evidence": [f"m{i}" for i in range(n + 1)]}, name="over.jsonl")
    with pytest.raises(CorpusError, match=r"over.jsonl \[question 'q1' of scope 's'\]: field 'gold_evidence' has "
                                          r"1,001 units, over the limit of 1,000; refused"):
        load("jsonl", over)
