"""Validators of batch runs (paper App. D.3): counts, keys, forests, and leakage of gold into prompts."""
from dataclasses import replace
from datetime import timedelta

import pytest

from tmem.evaluation import validators as v
from tmem.types import UPDATE, Edge, Gold


@pytest.fixture
def golden(golden_trace):
    from golden import MESSAGES, QUESTION

    trace, gold, _ = golden_trace
    messages = {m.id: m for m in MESSAGES}
    return trace, gold, QUESTION, messages


def evidence(trace, messages):
    return {i: messages[i] for i in trace.evidence_ids}


def errors(findings):
    return [f for f in findings if f.level == v.ERROR]


# ------------------------------------------------------------------------------------------------- counts, keys
def test_question_counts():
    assert not errors(v.check_question_counts("locomo", 1986, 1986, filtered=False))
    assert [f.level for f in v.check_question_counts("locomo", 1986, 100, filtered=False)] == [v.NOTE, v.ERROR]
    assert not errors(v.check_question_counts("locomo", 1986, 100, filtered=True))
    warned = v.check_question_counts("groupmembench", 214, 214, filtered=False)
    assert [f.level for f in warned] == [v.WARNING] and "745" in warned[0].message
    assert v.check_question_counts("jsonl", 5, 5, filtered=False) == []


def test_duplicate_question_keys_are_errors():
    assert v.check_unique_keys([("s", "t", "q1"), ("s", "t", "q2"), ("s2", "t", "q1")]) == []
    found = v.check_unique_keys([("s", "temporal", "q1"), ("s", "multi_hop", "q1")])
    assert len(found) == 1 and found[0].level == v.ERROR and "s/q1" in found[0].message


# ------------------------------------------------------------------------------------------------------ forests
def test_the_golden_forest_is_valid(golden):
    trace, _, _, messages = golden
    assert trace.edges and v.check_forest(trace, messages) == []


def test_two_parents_and_backward_edges_are_caught(golden):
    trace, _, _, messages = golden
    child = trace.edges[0].child_id
    extra = Edge(trace.evidence_ids[0], child, UPDATE, 0.5)
    assert any("two parents" in f.message for f in v.check_forest(replace(trace, edges=trace.edges + (extra,)),
                                                                    messages))
    e = trace.edges[0]
    backward = replace(trace, edges=(Edge(e.child_id, e.parent_id, e.relation, e.confidence),) + trace.edges[1:])
    assert any("not earlier" in f.message for f in v.check_forest(backward, messages))


def test_same_timestamp_parent_is_not_earlier(golden):
    trace, _, _, messages = golden
    e = trace.edges[0]
    moved = {**messages, e.child_id: replace(messages[e.child_id], timestamp=messages[e.parent_id].timestamp)}
    assert errors(v.check_forest(trace, moved))


def test_nodes_out_of_preorder_are_caught(golden):
    trace, _, _, messages = golden
    nodes = list(trace.nodes)
    nodes[0], nodes[-1] = replace(nodes[0], timestamp=nodes[-1].timestamp + timedelta(days=1)), nodes[-1]
    assert errors(v.check_forest(replace(trace, nodes=tuple(nodes)), messages))


# ------------------------------------------------------------------------------------------------------ leakage
def test_a_clean_trace_has_no_leak(golden):
    trace, gold, question, messages = golden
    assert errors(v.check_leakage(trace, question, gold, evidence(trace, messages), "user_6 when is the product "
                                  "launch scheduled")) == []


def test_a_planted_gold_answer_in_the_question_is_caught(golden):
    trace, gold, question, messages = golden
    leaked = replace(trace, question=replace(question, text=question.text + " (gold: March 17)"))
    found = errors(v.check_leakage(leaked, question, gold, evidence(trace, messages)))
    assert any("differs from the stored question" in f.message for f in found)
    assert any("gold answer in the question" in f.message for f in found)


def test_a_planted_gold_evidence_id_in_the_seed_query_is_caught(golden):
    trace, gold, question, messages = golden
    found = errors(v.check_leakage(trace, question, gold, evidence(trace, messages), "when is the launch m04"))
    assert any("gold evidence id m04 in the seed-retrieval query" in f.message for f in found)


def test_a_planted_passage_that_is_no_stored_message_is_caught(golden):
    trace, gold, question, messages = golden
    context = trace.context.replace("\n<<<END", '\n[99] parent=0 ROOT depth=0 text="The answer is March 17."\n<<<END')
    found = errors(v.check_leakage(replace(trace, context=context), question, gold, evidence(trace, messages)))
    assert any("not stored messages" in f.message for f in found)
    assert any("does not rebuild" in f.message for f in found)  # the recorded prompt hash no longer matches


def test_compressed_passages_still_derive_from_their_messages(golden):
    trace, gold, question, messages = golden
    assert not v._passage_bodies("no passages here")
    text = [" ".join(messages["m04"].text.split())]
    assert v._derived("Heads up: legal review slipped, … instead of March 3.", text)  # retained spans
    assert not v._derived("Heads up: legal review slipped, … the answer is March 17.", text)  # a foreign piece


def test_a_question_that_contains_its_own_answer_is_a_note_not_a_leak(golden):
    trace, _, question, messages = golden
    gold = Gold(question.id, "product launch", (("m04",),))
    found = v.check_leakage(trace, question, gold, evidence(trace, messages))
    assert not errors(found) and any(f.level == v.NOTE for f in found)
