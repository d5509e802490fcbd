"""End to end on the golden conversation, variants, and bad input handled before any stage runs."""
import re
from dataclasses import replace

import pytest

from tmem.config import TMemConfig, variant_config
from tmem.demo.golden import GOLD, QUESTION
from tmem.pipeline.run import run_question
from tmem.pipeline.scope import Scope
from tmem.types import UPDATE, Question, Trace


@pytest.fixture(scope="module")
def trace():
    from tmem.demo.golden import MESSAGES
    from tmem.models.offline import offline_roles

    return run_question(QUESTION, Scope("g", "golden", MESSAGES), TMemConfig(), offline_roles(), corpus="g",
                        variant="full", gold=GOLD)


def test_golden_update_is_recovered_and_linked_with_update(trace):
    anchors = {a.message_id for a in trace.anchors}
    assert len(trace.anchors) == 36 and "m04" not in anchors  # BM25 ranks the decisive update low
    assert "m04" in trace.evidence_ids
    [window] = [w for w in trace.windows if any(c.message_id == "m04" for c in w.candidates)]
    assert [c for c in trace.clusters if c.cluster_id == window.cluster_id][0].topic == "launch"
    assert {s.message_id: s.label for s in trace.selections}["m04"] in ("KEY", "SUPPORT")
    [edge] = [e for e in trace.edges if e.child_id == "m04"]
    assert edge.relation == UPDATE and edge.parent_id in {"m01", "m02", "m03"}  # the March 3 state


def test_forest_answer_follows_the_update_and_is_judged(trace):
    forest, flat = trace.answer("forest"), trace.answer("flat")
    assert "March 17" in forest.text and forest.offline
    assert trace.verdict("forest").correct
    assert "March 17" not in flat.text and not trace.verdict("flat").correct


def test_trace_is_complete_and_round_trips(trace):
    assert [s.name for s in trace.stages] == ["seed_retrieval", "discovery", "structuring", "compression",
                                              "answer", "judge"]
    assert all(s.seconds >= 0 for s in trace.stages)
    assert trace.stage("discovery").offline and trace.stage("discovery").usage.source == "offline"
    assert trace.context.count("\n[") + trace.context.count("\n  [") >= 1
    assert len(trace.nodes) == len(trace.evidence_ids)
    assert Trace.from_json(trace.to_json()) == trace
    parents = {}
    for e in trace.edges:
        assert e.child_id not in parents
        parents[e.child_id] = e.parent_id


def test_flat_variant_skips_discovery_and_structuring():
    from tmem.demo.golden import MESSAGES
    from tmem.models.offline import offline_roles

    t = run_question(QUESTION, Scope("g", "golden", MESSAGES), variant_config("flat"), offline_roles(), corpus="g",
                     variant="flat", gold=GOLD)
    assert [s.name for s in t.stages] == ["seed_retrieval", "answer", "judge"]
    assert "m04" not in t.evidence_ids and [a.presentation for a in t.answers] == ["flat"]


@pytest.mark.parametrize("mode", ["compress", "truncate"])
def test_small_budget_is_respected(mode, offline, trace):
    from tmem.demo.golden import MESSAGES

    chatty = Scope("g", "golden", [replace(m, text=m.text + " Anyway, thanks everyone for the quick turnaround.")
                                   for m in MESSAGES])
    budget = trace.tokens_before_compression + 100
    config = TMemConfig().with_("compression", budget_tokens=budget, mode=mode)
    t = run_question(QUESTION, chatty, config, offline, corpus="g", gold=GOLD)
    assert offline.tokens.count(t.context) <= budget < t.tokens_before_compression
    if mode == "compress":
        assert t.budget_met and any(not s.kept for s in t.spans)
        assert {n.message_id for n in t.nodes} == set(t.evidence_ids)  # no node deleted
        assert len(re.findall(r"\[\d+\] parent=", t.context)) == len(t.nodes)  # every node still serialized


def test_infeasible_budget_is_reported_not_hidden_and_the_context_is_still_capped(golden_scope, offline):
    config = TMemConfig().with_("compression", budget_tokens=300)
    t = run_question(QUESTION, golden_scope, config, offline, corpus="g")
    [error] = [e for e in t.stage("compression").errors if "exceed B = 300" in e.message]
    assert not t.budget_met and "context cut at B tokens" in error.fallback
    # the answer model never gets more than B tokens, as with the flat context
    assert offline.tokens.count(t.context) <= 300 and t.tokens_after_compression <= 300


def test_question_from_another_scope_is_rejected(golden_scope, offline):
    with pytest.raises(ValueError, match="belongs to scope 'elsewhere'"):
        run_question(replace(QUESTION, scope="elsewhere"), golden_scope, TMemConfig(), offline, corpus="g")


def test_empty_scope_is_rejected():
    with pytest.raises(ValueError, match="has no messages"):
        Scope("g", "empty", [])


def test_unicode_question_without_matches_abstains(golden_scope, offline):
    q = Question("u", "golden", "¿Dónde está el 🦄 unicornio?", None)
    t = run_question(q, golden_scope, TMemConfig(), offline, corpus="g")
    assert t.anchors == () and "no information" in t.answer("forest").text.lower()


def test_the_trace_carries_its_configuration_values_and_bm25_query(trace):
    from tmem.config import config_hash

    assert trace.config["discovery"]["eps_hours"] == 12.0 and trace.config["retrieval"]["k"] == 36
    assert trace.config_hash == config_hash(TMemConfig())  # the values are the ones the hash names
    assert trace.query.split()[0] == QUESTION.asking_user.casefold()  # asking user first (App. C)
    assert Trace.from_json(trace.to_json()) == trace
