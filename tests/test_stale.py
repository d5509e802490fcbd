"""Stale answers and revisions without rollback (tmem.analysis.stale) on hand-built traces of the golden
conversation: the launch moved from March 3 (m01) to March 17 (m04)."""
from golden import MESSAGES, QUESTION

from tmem.analysis import stale
from tmem.types import Answer, Edge, ForestNode, Gold, Span, StageTrace, Trace, Usage, Verdict

TEXT = {m.id: m for m in MESSAGES}
TIMES = {m.id: m.timestamp for m in MESSAGES}
GOLD = Gold("q1", "March 17 instead of March 3", (("m04",),), superseded="March 3")
CHAIN = Gold("q1", "March 17", (("m01", "m02"), ("m04",)), superseded="March 3")


def trace(answer: str, correct: bool, evidence=("m01", "m04"), edges=(), offline=True, omitted=()) -> Trace:
    nodes = tuple(ForestNode(i + 1, 0, "ROOT", 0, i + 1, mid, TEXT[mid].timestamp, TEXT[mid].author,
                             TEXT[mid].text) for i, mid in enumerate(evidence))
    stages = (StageTrace("structuring", 0.0, {}, Usage(), "offline", True),)
    spans = tuple(Span(mid, 0, TEXT[mid].text, 5, 0.0, 0.0, None, False) for mid in omitted)
    return Trace(QUESTION, "full", "h", "golden", evidence_ids=tuple(evidence), nodes=nodes, edges=tuple(edges),
                 spans=spans, stages=stages,
                 answers=(Answer("forest", answer, "offline:x" if offline else "llm:m", offline, "p", 10),),
                 verdicts=(Verdict("forest", correct, "", "offline:lexical-judge", True),))


def test_an_answer_that_states_the_superseded_state_is_stale():
    found = stale.stale_answer(trace("The product launch is on March 3.", False), GOLD)
    assert found and found.category == stale.STALE and found.source == "gold superseded"
    assert "'March 3'" in found.detail and "offline stand-in" in found.detail
    llm = stale.stale_answer(trace("The product launch is on March 3.", False, offline=False), GOLD)
    assert "offline stand-in" not in llm.detail


def test_contrast_the_current_state_or_a_correct_answer_is_not_stale():
    assert stale.stale_answer(trace("Moved to March 17 instead of March 3.", False), GOLD) is None
    assert stale.stale_answer(trace("It is not March 3 any more.", False), GOLD) is None  # negated
    assert stale.stale_answer(trace("March 3, then March 17.", False), GOLD) is None  # says the new state too
    assert stale.stale_answer(trace("March 3", True), GOLD) is None  # the judge said correct
    assert stale.stale_answer(trace("The newsletter is on Friday.", False), GOLD) is None


def test_an_answer_restating_the_replaced_side_of_a_forest_update_is_stale():
    edge = Edge("m01", "m04", "UPDATE", 0.9)
    no_superseded = Gold("q1", "March 17", (("m04",),))
    restated = "The product launch is scheduled for March 3 with a soft launch to beta users first."
    found = stale.stale_answer(trace(restated, False, edges=[edge]), no_superseded)
    assert found and found.source == "forest UPDATE" and found.messages == ("m01", "m04")
    # two topic words in common are not a restatement of m01
    assert stale.stale_answer(trace("The product team is happy.", False, edges=[edge]), no_superseded) is None
    # an EXPAND edge does not replace anything
    expand = Edge("m01", "m04", "EXPAND", 0.9)
    assert stale.stale_answer(trace(restated, False, edges=[expand]), no_superseded) is None


def test_revision_without_rollback_by_gold_evidence_order():
    held_old_only = trace("x", False, evidence=("m01", "m09"))
    found = stale.revision_without_rollback(held_old_only, CHAIN, TIMES)
    assert found and found.category == stale.ROLLBACK_MISSED and found.messages == ("m01", "m04")
    assert found.source == "gold evidence order"
    assert stale.revision_without_rollback(trace("x", False, evidence=("m01", "m04")), CHAIN, TIMES) is None
    assert stale.revision_without_rollback(trace("x", False, evidence=("m04",)), CHAIN, TIMES) is None
    # compression omitted the rollback's text: the answer context holds only the earlier state
    cut = trace("x", False, evidence=("m01", "m04"), omitted=("m04",))
    assert stale.revision_without_rollback(cut, CHAIN, TIMES) is not None


def test_revision_without_rollback_needs_a_state_change():
    two_facts = Gold("q1", "March 17", (("m01",), ("m04",)))  # no superseded state, no gold edges
    assert stale.revision_without_rollback(trace("x", False, evidence=("m01",)), two_facts, TIMES) is None


def test_gold_update_edges_decide_which_state_replaces_which():
    # gold edges: m01 -UPDATE-> m04 -EXPAND-> m05; the later EXPAND m05 is not a rollback of m04
    edges = [("m04", "m01", "UPDATE"), ("m05", "m04", "EXPAND"), ("m01", None, "ROOT")]
    gold = Gold("q1", "March 17", (("m01",), ("m04",), ("m05",)))
    holds_current = trace("x", False, evidence=("m04",))
    assert stale.revision_without_rollback(holds_current, gold, TIMES, edges) is None
    old_only = stale.revision_without_rollback(trace("x", False, evidence=("m01", "m05")), gold, TIMES, edges)
    assert old_only and old_only.source == "gold UPDATE edges" and old_only.messages == ("m01", "m04")


def test_findings_lists_both_categories():
    both = stale.findings(trace("The product launch is on March 3.", False, evidence=("m01",)), CHAIN, TIMES)
    assert [f.category for f in both] == [stale.STALE, stale.ROLLBACK_MISSED]
    assert all(c in stale.EXPLAIN for c in stale.CATEGORIES)
