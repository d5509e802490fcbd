"""LoCoMo importer: the real locomo10.json (exact counts, repaired evidence) and a hand-made fixture."""
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from conftest import BENCHMARKS

from tmem.corpora.locomo import ABSTENTION, load_locomo, parse_locomo_time, repair_evidence
from tmem.store import CorpusError

FIXTURE = Path(__file__).parent / "fixtures" / "locomo" / "mini.json"
LOCOMO = BENCHMARKS / "locomo" / "locomo10.json"


@pytest.fixture(scope="module")
def real():
    if not LOCOMO.exists():
        pytest.skip("../shared/benchmarks/locomo not present")
    return load_locomo(LOCOMO)


@pytest.fixture(scope="module")
def mini():
    return load_locomo(FIXTURE)


def test_real_counts(real):
    data = real.data
    assert len({m.scope for m in data.messages}) == 10
    assert len(data.messages) == 5882 and len(data.questions) == 1986
    assert Counter(q.type for q in data.questions) == {"multi_hop": 282, "temporal": 321, "open_domain": 96,
                                                       "single_hop": 841, "adversarial": 446}
    assert Counter(m.scope for m in data.messages)["conv-26"] == 419


def test_real_timestamps_are_session_time_plus_a_minute_per_turn(real):
    turns = {(m.scope, m.id): m for m in real.data.messages}
    assert turns[("conv-26", "D1:1")].timestamp == datetime(2023, 5, 8, 13, 56)
    assert turns[("conv-26", "D1:2")].timestamp == datetime(2023, 5, 8, 13, 57)
    for scope in {m.scope for m in real.data.messages}:
        times = [m.timestamp for m in real.data.messages if m.scope == scope]
        assert times == sorted(times)


def test_real_malformed_evidence_is_repaired_or_reported(real):
    notes = "\n".join(real.notes)
    for raw in ("D8:6; D9:17", "D10:19", "'D'", "D:11:26", "D4:36", "D9:1 D4:4 D4:6", "D22:1 D22:2 D9:10 D9:11",
                "D21:18 D21:22 D11:15 D11:19", "D30:05"):
        assert raw in notes
    golds = {(s, g.question_id): g for s, g in real.data.golds}
    assert golds[("conv-26", "conv-26_q38")].evidence == (("D8:6",), ("D9:17",))
    assert golds[("conv-50", "conv-50_q70")].evidence == (("D30:5",),)
    ids = {(m.scope, m.id) for m in real.data.messages}
    assert all((s, i) in ids for s, g in real.data.golds for i in g.evidence_ids)
    assert sum(len(g.evidence) for _, g in real.data.golds) == 2820


def test_real_adversarial_gold_is_abstention(real):
    golds = {g.question_id: g for _, g in real.data.golds}
    adversarial = [q for q in real.data.questions if q.type == "adversarial"]
    assert all(golds[q.id].answer == ABSTENTION for q in adversarial)
    race = next(q for q in adversarial if q.text == "What did Caroline realize after her charity race?")
    assert golds[race.id].answer == ABSTENTION  # its adversarial_answer "self-care is important" is not gold


def test_fixture_mapping(mini):
    by_id = {(m.scope, m.id): m for m in mini.data.messages}
    dog = by_id[("conv-a", "D1:2")]
    assert dog.text == "Nice! I adopted a dog named Oscar. [shared image: a photo of a brown dog on a couch]"
    assert dog.author == "Ben" and dog.timestamp == datetime(2023, 5, 8, 13, 57)
    assert (dog.role, dog.channel, dog.topic, dog.phase, dog.reply_to) == (None, None, None, None, None)
    assert by_id[("conv-a", "D2:2")].timestamp == datetime(2023, 5, 12, 10, 6)
    # LoCoMo-family turns: their own date_time and clean_text win
    assert by_id[("conv-b", "D1:1")].text == "Hey Dee!"
    assert by_id[("conv-b", "D1:1")].timestamp == datetime(2023, 9, 1, 8, 30)
    assert by_id[("conv-b", "D1:2")].timestamp == datetime(2023, 9, 1, 15, 15)
    assert len(mini.data.messages) == 7


def test_fixture_questions_and_evidence(mini):
    questions = {q.id: q for q in mini.data.questions}
    golds = {g.question_id: g for _, g in mini.data.golds}
    assert questions["conv-a_q1"].type == "temporal" and questions["conv-a_q4"].type == "adversarial"
    assert golds["conv-a_q2"].evidence == (("D1:2",), ("D2:1",))
    assert golds["conv-a_q3"].answer == "2022" and golds["conv-a_q3"].evidence == (("D2:2",),)
    assert golds["conv-a_q4"].answer == ABSTENTION
    assert golds["conv-a_q5"].evidence == (("D1:3",),)
    assert golds["conv-a_q6"].evidence == ()
    assert not hasattr(questions["conv-a_q1"], "answer")
    notes = "\n".join(mini.notes)
    assert "'D9:9' unresolved" in notes and "'D1:03' repaired to D1:3" in notes and "D:2:2" in notes


@pytest.mark.parametrize("raw,expected", [("D8:6; D9:17", ["D8:6", "D9:17"]), ("D:11:26", ["D11:26"]),
                                          ("D30:05", ["D30:5"]), ("D9:1 D4:4", ["D9:1", "D4:4"]), ("D", ["D"])])
def test_repair_evidence(raw, expected):
    assert repair_evidence(raw) == expected


def test_parse_locomo_time_is_locale_free():
    assert parse_locomo_time("12:05 am on 1 January, 2024", "x", "f") == datetime(2024, 1, 1, 0, 5)
    assert parse_locomo_time("12:05 PM on 1 January, 2024", "x", "f") == datetime(2024, 1, 1, 12, 5)
    with pytest.raises(CorpusError, match="field 'f'"):
        parse_locomo_time("sometime in May", "x", "f")


def test_notes_say_which_turn_times_are_derived(mini):
    assert "5 of 7 turn times are derived, not in the source: LoCoMo dates sessions, so turn i of a session is " \
           "stamped session time + i minutes" in mini.notes


# ------------------------------------------------------------------------------------ LoCoMo-family variants
FAMILY = {  # one conversation object, sessions at the top level, no sample_id, day-first dotted dates
    "speaker_a": "Mara", "speaker_b": "Jon",
    "session_1_date_time": "03.01.2024, 09:15:00",
    "session_1": [{"speaker": "Mara", "dia_id": "D1:1", "text": "The offsite moved to Lisbon."},
                  {"speaker": "Jon", "dia_id": "D1:2", "text": "Noted.", "date_time": "03.01.2024, 09:20:30"}],
    "session_2_date_time": "4 February 2024, 6:05 pm",
    "session_2": [{"speaker": "Jon", "dia_id": "D2:1", "text": "Flights booked for the offsite."}],
    "qa": [{"question": "Where is the offsite?", "answer": "Lisbon", "evidence": ["D1:1"], "category": 4}],
}


def test_family_file_with_one_top_level_conversation(tmp_path):
    import json

    path = tmp_path / "family-conv-07.json"
    path.write_text(json.dumps(FAMILY))
    imported = load_locomo(path)
    by_id = {m.id: m for m in imported.data.messages}
    assert {m.scope for m in imported.data.messages} == {"family-conv-07"}  # the id comes from the file name
    assert by_id["D1:1"].timestamp == datetime(2024, 1, 3, 9, 15)  # day-first: 3 January, not 1 March
    assert by_id["D1:2"].timestamp == datetime(2024, 1, 3, 9, 20, 30)  # a turn's own time wins
    assert by_id["D2:1"].timestamp == datetime(2024, 2, 4, 18, 5)
    assert [q.id for q in imported.data.questions] == ["family-conv-07_q1"]
    notes = " | ".join(imported.notes)
    assert "no 'sample_id': the conversation's scope is named after the file, 'family-conv-07'" in notes
    assert "day-first dotted dates" in notes and "03.01.2024 is 3 January 2024" in notes
    assert "day-month-name dates" in notes


@pytest.mark.parametrize("value, expected", [
    ("03.01.2024, 09:15:00", datetime(2024, 1, 3, 9, 15)), ("3.1.2024 9:15", datetime(2024, 1, 3, 9, 15)),
    ("2024/01/03 09:15", datetime(2024, 1, 3, 9, 15)), ("January 3, 2024 9:15 am", datetime(2024, 1, 3, 9, 15)),
    ("3 Jan 2024, 9:15 pm", datetime(2024, 1, 3, 21, 15)), ("2024-01-03 09:15:00", datetime(2024, 1, 3, 9, 15))])
def test_family_date_forms(value, expected):
    assert parse_locomo_time(value, "x", "f") == expected


@pytest.mark.parametrize("value", ["31.02.2024, 09:15:00", "03/01/2024 09:15", "3 Smarch 2024, 9:15",
                                   "13:00 pm on 1 May, 2024", "03.01.9999, 09:15"])
def test_family_dates_that_are_refused(value):
    with pytest.raises(CorpusError, match="field 'f'"):
        parse_locomo_time(value, "x", "f")


def test_a_list_of_conversations_still_needs_sample_id(tmp_path):
    import json

    path = tmp_path / "two.json"
    path.write_text(json.dumps([FAMILY, FAMILY]))
    with pytest.raises(CorpusError, match=r"two.json \[conversation 0\]: required field 'sample_id' is missing"):
        load_locomo(path)
