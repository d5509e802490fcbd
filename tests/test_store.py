"""Store: transactional JSONL load, clear errors naming line and field, queries, stored traces."""
import json
from datetime import datetime

import pytest

from tmem.corpora.jsonl import load_jsonl_file, load_jsonl_lines
from tmem.store import CorpusError, Store

GOOD = [
    {"kind": "message", "scope": "s", "id": "m1", "text": "hello 👋 wörld", "timestamp": "2025-01-01T10:00:00",
     "author": "u1", "topic": "T", "stage": 1, "phase_order": 2, "phase_progress": 0.5},
    {"kind": "message", "scope": "s", "id": "m2", "text": "second", "timestamp": "2025-01-01T12:00:00+02:00"},
    {"kind": "question", "scope": "s", "id": "q1", "text": "what?", "asking_user": "u1", "type": "temporal",
     "gold_answer": "hello", "gold_evidence": ["m1", ["m1", "m2"]]},
]


def write(tmp_path, records, name="c.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records),
                    encoding="utf-8")
    return path


def test_load_and_query(fresh_store, tmp_path):
    fresh_store.replace_corpus("c", load_jsonl_file(write(tmp_path, GOOD)), format="jsonl")
    assert fresh_store.counts("c") == {"scopes": 1, "messages": 2, "questions": 1, "evidence_units": 2,
                                       "gold_links": 0}
    m1, m2 = fresh_store.messages("c", "s")
    assert m1.text == "hello 👋 wörld" and m1.stage == 1 and m1.phase_progress == 0.5 and m1.role is None
    assert m2.timestamp == datetime(2025, 1, 1, 10, 0)  # +02:00 converted to UTC
    assert [m.id for m in fresh_store.window("c", "s", "T", datetime(2025, 1, 1), datetime(2025, 1, 2))] == ["m1"]
    assert [m.id for m in fresh_store.window("c", "s", None, datetime(2025, 1, 1), datetime(2025, 1, 2))] == ["m2"]
    question = fresh_store.question("c", "q1")
    assert not hasattr(question, "gold_answer")
    gold = fresh_store.gold("c", "s", "q1")
    assert gold.answer == "hello" and gold.evidence == (("m1",), ("m1", "m2"))


@pytest.mark.parametrize("bad, expected", [
    ('{"id": "m9", "text": "x", "timestamp": "2025-01-01"', r"c\.jsonl:4: not valid JSON"),
    ({"id": "m9", "text": "x"}, r"c\.jsonl:4: field 'timestamp' is missing"),
    ({"id": "m9", "text": "x", "timestamp": "yesterday"}, r"c\.jsonl:4: field 'timestamp': cannot parse"),
    ({"id": "m1", "scope": "s", "text": "x", "timestamp": "2025-01-01"}, r"c\.jsonl:4: field 'id': duplicate"),
    ({"id": "m9", "text": ["x"], "timestamp": "2025-01-01"}, r"field 'text' must be a string"),
    ({"id": "m9", "text": "x", "timestamp": "2025-01-01", "stage": "late"}, r"field 'stage' must be a int"),
    ({"kind": "question", "scope": "s", "id": "q2", "text": "?", "gold_evidence": ["ghost"]},
     r"c\.jsonl:4: field 'gold_evidence': unknown message id 'ghost'"),
    ({"kind": "question", "scope": "nowhere", "id": "q3", "text": "?"}, r"scope 'nowhere', which has no messages"),
    ({"kind": "vote"}, r"field 'kind'"),
])
def test_bad_input_names_line_and_field_and_leaves_database_unchanged(fresh_store, tmp_path, bad, expected):
    fresh_store.replace_corpus("c", load_jsonl_file(write(tmp_path, GOOD, "good.jsonl")), format="jsonl")
    with pytest.raises(CorpusError, match=expected):
        fresh_store.replace_corpus("c", load_jsonl_file(write(tmp_path, GOOD + [bad])), format="jsonl")
    assert fresh_store.counts("c")["messages"] == 2  # the earlier load is intact


def test_empty_corpus_is_an_error(tmp_path):
    with pytest.raises(CorpusError, match="no messages"):
        load_jsonl_file(write(tmp_path, ["# only a comment", ""]))


def test_duplicate_ids_rejected_by_the_database_roll_back(fresh_store):
    from tmem.store import CorpusData
    from tmem.types import Message

    m = Message("m1", "s", "x", datetime(2025, 1, 1))
    fresh_store.replace_corpus("c", CorpusData([m]), format="test")
    with pytest.raises(CorpusError, match="duplicate id"):
        fresh_store.replace_corpus("c", CorpusData([m, m, m]), format="test")
    assert fresh_store.counts("c")["messages"] == 1


def test_large_message_loads(fresh_store):
    big = "word " * 20_000  # 100 kB
    data = load_jsonl_lines([json.dumps({"id": "big", "text": big, "timestamp": "2025-01-01"})], "mem")
    fresh_store.replace_corpus("big", data, format="jsonl")
    assert len(fresh_store.messages("big", "default")[0].text) == len(big)


def test_trace_round_trip_through_the_store(fresh_store, golden_scope, offline):
    from tmem.config import TMemConfig
    from tmem.demo.golden import GOLD, MESSAGES, QUESTION
    from tmem.pipeline.run import run_question
    from tmem.store import CorpusData

    fresh_store.replace_corpus("g", CorpusData(MESSAGES, [QUESTION]), format="test")
    trace = run_question(QUESTION, golden_scope, TMemConfig(), offline, corpus="g", variant="full", gold=GOLD)
    fresh_store.save_trace(trace, offline.label)
    fresh_store.save_trace(trace, offline.label)  # idempotent
    assert fresh_store.load_trace("g", "golden", "q1", "full", trace.config_hash, offline.label) == trace
    assert len(fresh_store.trace_index("g")) == 1


@pytest.mark.integration
def test_a_database_held_by_another_process_gives_a_clear_error(tmp_path):
    """DuckDB lets one process write a file: a second one (the CLI while the app is open) gets StoreInUse."""
    import subprocess
    import sys

    from tmem.store import StoreInUse

    db = tmp_path / "held.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(db)!r}); "
                               "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreInUse, match=r"is in use by another process .*PID \d+.*--db or TMEM_DB"):
            Store(db)
    finally:
        holder.kill()
        holder.wait()
