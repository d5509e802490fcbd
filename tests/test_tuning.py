"""Dev/test discipline (tmem/evaluation/tuning.py): the dev/test table in docs/evaluation.md was measured with
the constants the code holds now, and any change to a tuned constant changes its group's hash."""
import re
from pathlib import Path

import pytest

from tmem import text as text_module
from tmem.cli import main as cli
from tmem.evaluation import tuning
from tmem.models.relation import state as relation_state

DOCS = Path(__file__).resolve().parent.parent / "docs" / "evaluation.md"


def test_the_dev_test_table_matches_the_tuned_constants():
    stale = tuning.stale_groups(DOCS.read_text(encoding="utf-8"))
    if stale:
        lines = [f"{n}: tuned on {tuning.GROUPS[n].dev}, reported on {tuning.GROUPS[n].test}; re-measure with "
                 f"`{tuning.GROUPS[n].measure}`" for n in stale]
        pytest.fail("a tuned constant changed without the dev/test table in docs/evaluation.md being "
                    "re-measured:\n" + "\n".join(lines) + f"\nthen paste: {tuning.hash_line()}")


def test_the_table_has_a_dev_and_a_test_column_per_group():
    text = DOCS.read_text(encoding="utf-8")
    table = text.split("## Dev/test discipline for tuned constants", 1)[1]
    header = next(line for line in table.splitlines() if line.startswith("| group"))
    assert "dev" in header and "test" in header
    for name in tuning.GROUPS:
        assert re.search(rf"^\| `{name}` \|", table, re.MULTILINE), name


def test_changing_a_constant_changes_its_group_hash(monkeypatch):
    before = {n: tuning.group_hash(n) for n in tuning.GROUPS}
    monkeypatch.setattr(text_module, "STOPWORDS", text_module.STOPWORDS | {"budget"})
    assert tuning.group_hash("stopwords") != before["stopwords"]
    assert tuning.group_hash("relation") == before["relation"]
    if hasattr(relation_state, "CALIBRATION"):
        changed = dict(relation_state.CALIBRATION) | {"reply": 0.5}
        monkeypatch.setattr(relation_state, "CALIBRATION", changed)
        assert tuning.group_hash("relation") != before["relation"]
    from tmem.models import offline

    fields = offline.OfflineEvidenceUtility.__dataclass_fields__
    monkeypatch.setattr(fields["max_key"], "default", 7)
    assert tuning.group_hash("evidence_utility") != before["evidence_utility"]


def test_documented_hashes_are_parsed():
    text = "x <!-- tuned: a=1 b=2 --> y"
    assert tuning.documented_hashes(text) == {"a": "1", "b": "2"}
    assert set(tuning.stale_groups(text)) == set(tuning.GROUPS)


def test_command_prints_the_hash_line_and_checks(tmp_path, capsys):
    assert cli(["tuning"]) == 0
    assert tuning.hash_line() in capsys.readouterr().out
    stale = tmp_path / "e.md"
    stale.write_text("<!-- tuned: stopwords=0 -->")
    assert cli(["tuning", "--check", str(stale)]) == 1
    assert "stale for evidence_utility, stopwords, relation" in capsys.readouterr().err
