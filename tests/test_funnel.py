"""The evidence verdict reads the context the answer model saw: every cut at B is recorded in the trace (Cut), and a
gold unit counts as held only when a message of it reached the primary answer's context whole. Checked against the
context text itself on the shipped demo with a small budget B, on every variant whose context is cut at B."""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from tmem.analysis.funnel import CUT_AT_B, evidence_funnel, first_loss, stage_sets, stored_context_cuts
from tmem.corpora.jsonl import load_jsonl_file
from tmem.pipeline.compression import budget_cut
from tmem.pipeline.methods import get_method
from tmem.pipeline.scope import Scope
from tmem.pipeline.stages import Context, run_all
from tmem.types import Cut

DEMO = Path(__file__).resolve().parent.parent / "data" / "demo.jsonl"
SMALL_B = 1500
CUT_VARIANTS = ("no-compression", "flat", "bm25", "no-structuring", "bm25-forest", "full")


@pytest.fixture(scope="module")
def demo():
    data = load_jsonl_file(DEMO)
    golds = {g.question_id: g for _, g in data.golds}
    questions = {q.id: q for q in data.questions}
    scope = Scope("demo", "Technology", [m for m in data.messages if m.scope == "Technology"])
    return questions, golds, scope


def _run(demo, offline, variant: str, question_id: str, budget: int):
    questions, golds, scope = demo
    method = get_method(variant)
    method = replace(method, config=method.config.with_("compression", budget_tokens=budget))
    gold = golds[question_id]
    return run_all(questions[question_id], scope, Context(method, offline, gold=lambda q: gold), "demo"), gold


def _units_in_text(trace, gold, scope) -> int:
    """Gold units with a message whose whole line (its full text, then the next line) is in the primary context."""
    context = trace.context if trace.answers[0].presentation == "forest" else trace.flat_context
    whole = lambda i: f"text={json.dumps(scope.by_id[i].text, ensure_ascii=False)}\n" in context  # noqa: E731
    return sum(any(whole(i) for i in unit) for unit in gold.evidence)


def test_budget_cut_records_each_message_it_shortened_or_removed():
    lines = [(None, "BEGIN"), ("a", "x" * 10), ("b", "y" * 10), ("c", "z" * 10), (None, "END")]
    count = len  # one token per character
    text, cuts = budget_cut(lines, count, 22, "flat", "why")
    assert text == "BEGIN\n" + "x" * 10 + "\n" + "y" * 5
    assert cuts == (Cut("b", "flat", 5, 10, "why"), Cut("c", "flat", 0, 10, "why"))
    assert budget_cut(lines, count, 1000, "flat", "why")[1] == ()


@pytest.mark.parametrize("variant", CUT_VARIANTS)
def test_evidence_verdict_counts_only_what_the_cut_at_b_left(demo, offline, variant):
    _, golds, scope = demo
    for question_id in ("knowledge_update_1", "knowledge_update_2", "temporal_1", "multi_hop_1"):
        trace, gold = _run(demo, offline, variant, question_id, SMALL_B)
        held = evidence_funnel(trace, gold)["after_compression"]
        assert held == _units_in_text(trace, gold, scope), (variant, question_id)
        # a trace stored before the cuts were recorded reads them off its stored contexts, with the same verdict
        assert stage_sets(replace(trace, cuts=None))["after_compression"] == stage_sets(trace)["after_compression"]
        if trace.tokens_before_compression > SMALL_B:
            assert trace.cuts, "a context over B was cut, and the cut is in the trace"


def test_the_audited_case_no_compression_at_small_b_holds_no_unit(demo, offline):
    """Issue 39: knowledge_update_1 under no-compression read 'evidence complete' at B = 1,500 with 0 of its 2
    units in the context; at B = 8,192 it holds 2 of 2."""
    _, _, scope = demo
    trace, gold = _run(demo, offline, "no-compression", "knowledge_update_1", 8192)
    assert evidence_funnel(trace, gold)["after_compression"] == 2 == _units_in_text(trace, gold, scope)
    trace, gold = _run(demo, offline, "no-compression", "knowledge_update_1", SMALL_B)
    assert evidence_funnel(trace, gold)["after_compression"] == 0 == _units_in_text(trace, gold, scope)
    lost = first_loss(trace, gold, scope.by_id)
    assert lost is not None and lost.category == CUT_AT_B and f"B = {SMALL_B}" in lost.detail
    # the offline answerer reads only what its context holds whole
    assert all(c.message_id not in trace.answers[0].reason for c in trace.cuts if c.context == "forest")


def test_a_context_that_fits_has_no_cut(demo, offline):
    trace, _ = _run(demo, offline, "full", "knowledge_update_1", 8192)
    assert trace.cuts == () and stored_context_cuts(trace) == ()
