"""EverMemBench importer on a fixture in the EverMemBench-Dynamic layout: profiles joined by speaker name,
topic-group batches, options and option-letter answers, R references as gold evidence only."""
import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from tmem.corpora.evermembench import load_evermembench
from tmem.store import CorpusError

FIXTURE = Path(__file__).parent / "fixtures" / "evermembench"


@pytest.fixture(scope="module")
def ever():
    return load_evermembench(FIXTURE)


def test_messages(ever):
    by_id = {m.id: m for m in ever.data.messages}
    assert list(by_id) == ["2025-01-09/Group 1/0", "2025-01-09/Group 1/1", "2025-01-09/Group 2/0",
                           "2025-01-10/Group 1/0", "2025-01-10/Group 1/1"]
    first = by_id["2025-01-09/Group 1/0"]
    assert (first.scope, first.author, first.role, first.channel, first.topic) == \
        ("01", "Weihua Zhang", "Product Director", "Group 1", "01/Group 1")
    assert first.timestamp == datetime(2025, 1, 9, 9, 32, 15)
    assert by_id["2025-01-09/Group 1/1"].role == "Backend Engineer"  # profile `occupation`
    assert by_id["2025-01-09/Group 2/0"].role == "SRE"  # identity_layer.occupation
    assert by_id["2025-01-09/Group 2/0"].timestamp == datetime(2025, 1, 9, 10, 5)  # bare time on the batch date
    assert by_id["2025-01-10/Group 1/1"].role is None  # profile without a role
    assert all(m.phase is None and m.stage is None and m.reply_to is None for m in by_id.values())


def test_questions_and_gold(ever):
    questions = {q.id: q for q in ever.data.questions}
    mc = questions["F_SH_Top001_001"]
    assert mc.text.endswith("Options: A. ISO 14064; B. GHG Protocol; C. Both; D. None")
    assert mc.type == "multiple_choice" and questions["F_SH_Top001_002"].type == "open_ended"
    assert questions["M_UP_Top001_003"].type == "update"
    golds = {g.question_id: g for _, g in ever.data.golds}
    assert golds["F_SH_Top001_001"].answer == "B. GHG Protocol"
    assert golds["F_SH_Top001_001"].evidence == (("2025-01-10/Group 1/0",),)
    assert golds["F_SH_Top001_002"].evidence == (("2025-01-09/Group 1/0",),)  # the unresolved one is reported
    assert len(ever.notes) == 1 and "R[1] does not resolve" in ever.notes[0] and "Group 9" in ever.notes[0]
    assert "GHG" not in "".join(q.text for q in questions.values() if q.id != "F_SH_Top001_001")


def test_bad_files(tmp_path):
    root = tmp_path / "ever"
    shutil.copytree(FIXTURE, root)
    dialogue = root / "01" / "dialogue.json"
    raw = json.loads(dialogue.read_text())
    raw["dialogues"]["2025-01-09"]["Group 1"][1]["message_index"] = 0
    dialogue.write_text(json.dumps(raw))
    with pytest.raises(CorpusError, match=r"\[2025-01-09 / Group 1 #1\]: field 'message_index': duplicate"):
        load_evermembench(root)
    del raw["dialogues"]["2025-01-09"]["Group 1"][1]["speaker"]
    raw["dialogues"]["2025-01-09"]["Group 1"][1]["message_index"] = 1
    dialogue.write_text(json.dumps(raw))
    with pytest.raises(CorpusError, match=r"\[2025-01-09 / Group 1 #1\]: required field 'speaker' is missing"):
        load_evermembench(root)
    dialogue.write_text((FIXTURE / "01" / "dialogue.json").read_text())
    qa = root / "01" / "qa_01.json"
    qa.write_text(qa.read_text().replace('"options": null', '"options": ["A", "B"]'))
    with pytest.raises(CorpusError, match=r"qa_01.json \[qar 1\]: field 'options' must be an object, got list"):
        load_evermembench(root)


def test_duplicate_question_id_across_qa_files_names_both_files(tmp_path):
    root = tmp_path / "ever"
    shutil.copytree(FIXTURE, root)
    shutil.copy(root / "01" / "qa_01.json", root / "01" / "qa_01b.json")
    with pytest.raises(CorpusError, match=r"qa_01b.json \[qar 0\]: field 'id': duplicate question id "
                                          r"'F_SH_Top001_001' \(first at .*qa_01.json \[qar 0\]\)"):
        load_evermembench(root)
