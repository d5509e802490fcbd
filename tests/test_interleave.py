"""LoCoMo's conversations interleaved in one scope (tmem/corpora/interleave.py) and the dev/test split by source
conversation."""
import json

from tmem.cli import main as cli
from tmem.corpora.interleave import SCOPE, day_shifts, load_interleaved, question_group
from tmem.evaluation.recall import split_items


def conversation(sample_id, first_date, second_date):
    return {"sample_id": sample_id,
            "conversation": {"speaker_a": "A", "speaker_b": "B",
                             "session_1_date_time": first_date, "session_2_date_time": second_date,
                             "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": f"{sample_id} hello"},
                                           {"speaker": "B", "dia_id": "D1:2", "text": f"{sample_id} hi"}],
                             "session_2": [{"speaker": "A", "dia_id": "D2:1", "text": f"{sample_id} later"}]},
            "qa": [{"question": "What?", "answer": "hi", "evidence": ["D1:2"], "category": 4},
                   {"question": "When?", "answer": "later", "evidence": ["D2:1", "D1:1"], "category": 2}]}


def test_conversations_become_channels_of_one_scope_with_overlapping_clocks(tmp_path):
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([conversation("conv-1", "1:56 pm on 8 May, 2023", "3:00 pm on 20 May, 2023"),
                                conversation("conv-2", "9:00 am on 1 January, 2022", "9:00 am on 3 January, 2022")]))
    data = load_interleaved(path).data
    assert {m.scope for m in data.messages} == {SCOPE}
    by_id = {m.id: m for m in data.messages}
    assert set(by_id) == {f"conv-{c}:D{s}" for c in (1, 2) for s in ("1:1", "1:2", "2:1")}
    assert by_id["conv-2:D1:1"].channel == "conv-2" and by_id["conv-2:D1:1"].topic is None
    # conv-2 moved by whole days onto conv-1's first day (8 May 2023): time of day and session gaps are kept
    assert str(by_id["conv-2:D1:1"].timestamp) == "2023-05-08 09:00:00"
    assert str(by_id["conv-2:D2:1"].timestamp) == "2023-05-10 09:00:00"
    assert str(by_id["conv-1:D1:2"].timestamp) == "2023-05-08 13:57:00"  # conv-1 is not moved
    assert [m.timestamp for m in data.messages] == sorted(m.timestamp for m in data.messages)
    golds = {g.question_id: g for _, g in data.golds}
    assert golds["conv-2_q2"].evidence == (("conv-2:D2:1",), ("conv-2:D1:1",))
    assert [q.id for q in data.questions] == ["conv-1_q1", "conv-1_q2", "conv-2_q1", "conv-2_q2"]
    assert {q.scope for q in data.questions} == {SCOPE}


def test_day_shifts_are_whole_days():
    from datetime import datetime

    shifts = day_shifts({"a": datetime(2023, 5, 8, 13), "b": datetime(2023, 5, 1, 23, 30)})
    assert shifts["a"].days == 0 and shifts["b"].days == 7 and shifts["b"].seconds == 0


def test_split_by_source_conversation():
    from tmem.types import Question

    items = [(Question(f"conv-{c}_q{i}", SCOPE, "?"), None) for c in (26, 30, 41, 42) for i in (1, 2, 3)]
    group = lambda q: question_group(q.id)  # noqa: E731
    assert question_group("conv-26_q12") == "conv-26"
    assert {question_group(q.id) for q, _ in split_items(items, "dev", group)} == {"conv-26", "conv-30"}
    assert {question_group(q.id) for q, _ in split_items(items, "test", group)} == {"conv-41", "conv-42"}
    assert [q.id for q, _ in split_items(items, "dev", group, every=2)] == ["conv-26_q1", "conv-26_q3", "conv-30_q2"]
    assert len(split_items(items, "all", group)) == 12


def test_the_command_stores_the_corpus_and_recall_splits_it_by_conversation(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([conversation(f"conv-{i}", "1:56 pm on 8 May, 2023", "3:00 pm on 20 May, 2023")
                                for i in range(4)]))
    db = tmp_path / "i.duckdb"
    assert cli(["interleave", str(path), "--db", str(db)]) == 0
    assert "1 scopes, 12 messages, 8 questions, 12 evidence units" in capsys.readouterr().out
    out = tmp_path / "r.json"
    assert cli(["recall", "--db", str(db), "--corpus", "locomo-interleaved", "--k", "2", "--budgets", "2",
                "--quiet", "--out", str(out)]) == 0
    splits = json.loads(out.read_text())["runs"][0]["budget"]["splits"]
    assert splits["dev"]["scopes"] == ["conv-0", "conv-1"] and splits["test"]["scopes"] == ["conv-2", "conv-3"]
    assert splits["dev"]["matched"]["tmem"]["questions"] == 4
    assert cli(["recall", "--db", str(db), "--corpus", "locomo-interleaved", "--k", "2", "--budgets", "2",
                "--quiet", "--split", "test", "--every", "2", "--variant", "adaptive-discovery", "--json"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["budget"]["splits"]["all"]["scopes"] == ["conv-2", "conv-3"]
    assert line["budget"]["splits"]["all"]["matched"]["tmem"]["questions"] == 2


def test_shifted_times_stay_within_the_years_tmem_accepts(tmp_path):
    """Issue 44: a conversation of 1900 whose last session is in 2199, moved onto another's 2199 start, stored times
    up to 2498; every shifted time is checked like an imported one."""
    import pytest

    from tmem.types import CorpusError

    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([conversation("conv-1", "1:56 pm on 8 May, 2199", "3:00 pm on 20 May, 2199"),
                                conversation("conv-2", "9:00 am on 1 January, 1900", "9:00 am on 3 June, 2199")]))
    with pytest.raises(CorpusError, match=r"locomo10.json \[conv-2 / D2:1\]: field 'timestamp': .* is outside the "
                                          r"years 1900-2199"):
        load_interleaved(path)
