"""Judge audit view model (tmem.viz.batch.judge_audit): two judges side by side, disagreements first, broken-looking
gold answers flagged with the reason, exports; and the page under AppTest."""
import json
from dataclasses import replace
from datetime import datetime

import pytest

from tmem.types import Gold, Message, Question
from tmem.viz.batch import judge_audit as view

T = datetime(2025, 3, 1, 9)
Q = Question("q1", "s", "Who owns the launch?", "U1", "single_hop")


def m(mid, text, day=1):
    return Message(mid, "s", text, T.replace(day=day))


def row(**changes):
    base = view.AuditRow("s", "q1", "single_hop", "Who?", "full", "forest", "Alice owns it", "Alice owns it",
                         "llm", True, "Final: Correct", "offline:lexical-judge (today)", True, "gold contained")
    return replace(base, **changes)


def test_gold_flags_say_why():
    evidence = [m("m1", "Alice owns the launch now.")]
    assert view.gold_flag(Q, Gold("q1", "Alice", (("m1",),)), evidence) == ""
    assert view.gold_flag(Q, Gold("q1", "Bob", (("m1",),)), evidence).startswith("not in its evidence")
    assert view.gold_flag(Q, Gold("q1", "Alice", ()), evidence).startswith("no evidence: an answerable")
    assert "m9" in view.gold_flag(Q, Gold("q1", "Alice", (("m9",),)), evidence)
    assert view.gold_flag(Q, Gold("q1", "Alice", (("m9", "m1"),)), evidence) == ""  # one alternative is enough
    assert view.gold_flag(Q, Gold("q1", "No information available.", ()), []).startswith("abstention mismatch")
    abstain = replace(Q, type="abstention")
    assert view.gold_flag(abstain, Gold("q1", "Not mentioned.", ()), []) == ""
    assert view.gold_flag(abstain, Gold("q1", "Alice", ()), []).startswith("abstention mismatch")
    dated = [m("m1", "We decided it in the call.", day=6)]
    assert view.gold_flag(Q, Gold("q1", "2025-03-06", (("m1",),)), dated) == ""  # a date from the timestamp
    assert view.gold_flag(Q, Gold("q1", "2025-03-05", (("m1",),)), dated) == ""  # "yesterday": near the message
    assert view.gold_flag(Q, Gold("q1", "2023-03-09", (("m1",),)), dated).startswith("not in its evidence")
    assert view.gold_flag(Q, Gold("q1", "2024", (("m1",),)), dated) == ""  # "last year"
    assert view.gold_flag(Q, None, []) == "no gold answer"


def test_rows_are_ordered_disagreements_then_flags_and_summarised():
    rows = [row(question_id="agree"), row(question_id="flag", gold_flag="not in its evidence: …"),
            row(question_id="disagree", verdict_b=False, reason_b="negation"),
            row(question_id="unjudged", verdict_a=None)]
    frame = view.audit_frame(rows)
    assert list(frame["question"]) == ["disagree", "flag", "agree", "unjudged"]
    assert list(frame["agree"]) == ["no", "yes", "yes", "—"]  # one case (issue 42: "NO" beside "yes")
    assert view.summary(rows) == {"answers": 4, "both judged": 3, "disagree": 1, "A correct": 3, "B correct": 2,
                                  "A only": 1, "B only": 0, "gold flagged": 1}
    exported = json.loads(view.export_json(rows))
    assert exported[0]["question_id"] == "disagree" and exported[0]["agree"] is False


def test_recorded_runs_are_rejudged_by_the_lexical_judge():
    runs = [{"question": "q1", "variant": "full", "preset": "local", "answers": {"forest": "Bob owns it, not Alice",
                                                                                "flat": "Alice owns it"},
             "verdicts": {"forest": True, "flat": True}}, {"question": "other", "answers": {}}]
    rows = view.rows_from_recording(runs, "qwen", {"q1": (Q, Gold("q1", "Alice owns it"), "")})
    by = {r.presentation: r for r in rows}
    assert by["forest"].verdict_a is True and by["forest"].verdict_b is False and not by["forest"].agree
    assert "negation" in by["forest"].reason_b and by["flat"].agree and by["forest"].judge_a == "recorded:qwen"
    stale = [dict(runs[0], text="Another question?")]
    assert view.stale_run(stale[0], Q) and view.rows_from_recording(stale, "qwen", {"q1": (Q, None, "")}) == []


def test_trace_rows_keep_the_stored_verdict(golden_trace):
    trace, gold, _ = golden_trace
    rows = view.rows_from_trace(trace, "full", gold, "")
    assert {r.presentation for r in rows} == {a.presentation for a in trace.answers}
    for r in rows:
        assert r.verdict_a == trace.verdict(r.presentation).correct and r.judge_a.startswith("offline")
    bad = view.rows_from_trace(trace, "full", Gold(gold.question_id, "Bob, not March 17"), "")
    assert all(r.verdict_b is False for r in bad)


@pytest.mark.app
def test_judge_audit_page(app):
    at = app("pages/judge_audit.py", corpus="golden")
    assert not at.exception
    frame = next(d.value for d in at.dataframe if "judge B" in d.value.columns)
    assert set(frame["variant"]) == {"full", "flat"} and len(frame) >= 2
    assert {mt.label for mt in at.metric} >= {"answers", "disagree", "gold flagged"}
    assert at.toggle(key="audit_only") is not None


def test_rows_read_from_the_trace_json_equal_the_rows_of_the_whole_trace(golden_trace):
    trace, gold, _ = golden_trace
    assert view.rows_from_trace_json(trace.to_json(), "full", gold, "f") == view.rows_from_trace(trace, "full", gold,
                                                                                               "f")
    assert view.same_judge(view.rows_from_trace(trace, "full", gold, ""))


@pytest.mark.app
def test_a_lexical_judge_against_itself_is_called_out_with_how_to_get_a_second_judge(app):
    at = app("pages/judge_audit.py", corpus="golden")
    warning = "\n".join(w.value for w in at.warning)
    assert "needs a second judge" in warning and "--judge-backend" in warning and "Settings" in warning


@pytest.mark.app
def test_the_demo_audit_opens_on_the_recorded_model_against_the_lexical_judge(app):
    from tmem.models.local.recorded import RECORDING

    if not RECORDING.exists():
        pytest.skip("no recorded demo in data/ (make record-demo)")
    at = app("pages/judge_audit.py", corpus="demo")
    assert not at.exception and at.radio(key="audit_source").value == "recorded local model"
    frame = next(d.value for d in at.dataframe if "judge B" in d.value.columns)
    assert {j for j in frame["judge A"]} != {j for j in frame["judge B"]}
    assert all(j.startswith("recorded:") for j in frame["judge A"])
    assert not any("needs a second judge" in w.value for w in at.warning)
