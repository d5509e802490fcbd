"""tmem.viz.question.answers: error verdicts and callouts, readable failure details, stages a variant did not run."""
from __future__ import annotations

from tmem.types import Answer, Question, StageError, StageTrace, Trace, Usage, Verdict
from tmem.viz.question.answers import advice, answer_cards, readable, role_failures, stages_off


def _trace(errors=(), stages=("seed_retrieval", "answer", "judge"), correct=False):
    traces = tuple(StageTrace(n, 0.1, {}, Usage(), "b", False, tuple(e for e in errors if e.stage == n))
                   for n in stages)
    return Trace(Question("q", "s", "?"), "full", "h", "c", stages=traces,
                 answers=(Answer("forest", "" if errors else "April 3", "openai:m", False, "p", 12),),
                 verdicts=(Verdict("forest", correct, "", "j", False),))


DOWN = StageError("answer", "openai:m@http://127.0.0.1:9: failed after 3 attempts: connection refused", "empty answer")


def test_a_failed_role_gives_an_error_verdict_and_a_callout():
    forest, flat = answer_cards(_trace((DOWN,)))
    assert forest.verdict == "error" and flat.text is None
    assert forest.errors == ("answer model: openai:m@http://127.0.0.1:9: failed after 3 attempts: connection "
                             "refused · fallback: empty answer",)
    assert "Settings" in advice(_trace((DOWN,))) and advice(_trace()) == ""


def test_ignored_notes_are_not_failures():
    note = StageError("answer", "dropped item: not an object", "ignored")
    assert role_failures(_trace((note,))) == ()
    assert answer_cards(_trace((note,)))[0].verdict == "wrong"
    assert answer_cards(_trace(correct=True))[0].verdict == "correct"


def test_readable_details_have_no_python_syntax():
    assert readable("unit ['Msg_1', 'Msg_2'] not among the anchors") == "unit Msg_1 / Msg_2 not among the anchors"
    assert readable("gold evidence of topic 'launch' split over trees [1, 3]") == \
        "gold evidence of topic “launch” split over trees 1 / 3"
    assert readable(None) == "—" and readable(float("nan")) == "—" and readable("") == "—"


def test_stages_off():
    # a flat list is an answer context too: the cut at B can lose a unit there (issue 39), so it is never "off"
    assert stages_off(_trace()) == {"windows", "forest"}
    full = _trace(stages=("seed_retrieval", "discovery", "structuring", "compression", "answer", "judge"))
    assert stages_off(full) == frozenset()


def test_stage_rows_show_stages_not_run_as_off():
    from tmem.viz.question.answers import stage_rows
    from tmem.viz.run_settings import trace_summary

    trace = _trace()
    rows = stage_rows(trace_summary(trace), trace)
    assert list(rows["stage"]) == ["seed_retrieval", "discovery", "structuring", "compression", "answer", "judge"]
    off = rows.set_index("stage")
    assert off.loc["discovery", "seconds"] == "off" and off.loc["answer", "seconds"] == "0.1"
    assert off.loc["discovery", "backend"] == "—" and not rows.isna().any().any()


def test_lost_unit_is_the_first_unit_that_did_not_arrive():
    from tmem.types import Gold
    from tmem.viz.question.answers import lost_unit

    trace = Trace(Question("q", "s", "?"), "flat", "h", "c", evidence_ids=("m1",),
                  stages=(StageTrace("seed_retrieval", 0, {}, Usage(), "b", False),))
    assert lost_unit(trace, Gold("q", "x", (("m1",), ("m2", "m3")))) == ("m2", "m3")
    assert lost_unit(trace, Gold("q", "x", (("m1",),))) == () and lost_unit(trace, None) == ()


def test_the_evidence_line_leads_offline_and_names_the_missing_unit():
    from dataclasses import replace

    from tmem.types import Answer, Gold
    from tmem.viz.question.answers import evidence_line

    gold = Gold("q1", "March 17", (("m04",), ("m09", "m10")))
    answer = Answer("forest", "March 17", "offline:extractive-answerer", True, "h", 10)
    trace = replace(_trace(), answers=(answer,), evidence_ids=("m04",), nodes=(), spans=(), stages=())
    head, rest = evidence_line(trace, gold)
    assert head == "Evidence partial" and "held 1 of 2" in rest and "missing m09 or m10" in rest
    assert "primary" in rest and "secondary" in rest
    real = replace(trace, answers=(replace(answer, offline=False, backend="openai:gpt-4o"),))
    assert "real model" in evidence_line(real, gold)[1]
    assert evidence_line(trace, None)[0] == "Not scored on evidence"


def test_a_failure_recorded_by_both_answers_is_listed_once_per_card():
    forest, _ = answer_cards(_trace((DOWN, DOWN)))
    assert len(forest.errors) == 1


def test_the_caption_tells_the_update_chain_with_real_edges_only(demo_traces):
    """The offline answerer follows the chain through its best match (Msg_1497 -> Msg_2100 on the demo); the caption
    tells it with arrows, and flags a chain whose steps are not UPDATE edges of the forest."""
    from dataclasses import replace

    from tmem.viz.question.answers import update_chain_reason

    trace = demo_traces[0]["full"]
    forest = trace.answer("forest")
    assert "followed UPDATE chain Msg_1497 -> Msg_2100" in forest.reason
    told = update_chain_reason(forest.reason, trace)
    assert "followed UPDATE chain Msg_1497 → Msg_2100" in told and "not an UPDATE chain" not in told
    nodes = {n.message_id: n for n in trace.nodes}
    assert nodes["Msg_2100"].relation == "UPDATE"
    made_up = replace(forest, reason=forest.reason.replace("Msg_1497 -> Msg_2100", "Msg_2094 -> Msg_2100"))
    assert "(not an UPDATE chain of this forest)" in update_chain_reason(made_up.reason, trace)
    assert update_chain_reason("offline: no evidence", trace) == "offline: no evidence"
