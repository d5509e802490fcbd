"""Validators of batch runs (paper App. D.3): counts, keys, forests, and leakage of gold into prompts."""
import re
from dataclasses import replace
from datetime import timedelta

import pytest

from tmem.evaluation.batch import validators as v
from tmem.types import UPDATE, Edge, Gold


@pytest.fixture
def golden(golden_trace):
    from tmem.demo.golden import MESSAGES, QUESTION

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


def test_an_expected_question_without_a_usable_record_is_an_error():
    q1, q2, q3 = ("s", "t", "q1"), ("s", "t", "q2"), ("s", "t", "q3")
    found = v.check_records("full", "answer", {q1: 2}, {q1}, [q1, q2, q3], [(7, "torn last line")],
                            {q2: "failed: TimeoutError: down"})
    assert [f.level for f in found] == [v.ERROR, v.NOTE, v.WARNING]
    assert found[0].message.startswith("full/answer: 2 question(s) incomplete") and \
        found[0].message.endswith("e.g. s/t/q2: failed: TimeoutError: down")
    assert v.check_records("full", "answer", {}, {q1}, [q1], []) == []


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
@pytest.mark.parametrize("variant", ["untyped-forest", "untyped-full"])
def test_an_untyped_forest_rebuilds_its_own_answer_prompt(variant):
    """The untyped variants answer with the untyped wording (App. E.3); the check used to rebuild the typed one and
    reported every question of a run as a leak."""
    from tmem.api import open_scope
    from tmem.config import variant_config
    from tmem.demo.golden import GOLD, MESSAGES, QUESTION, SCOPE
    from tmem.models.offline import offline_roles
    from tmem.pipeline.run import run_question
    from tmem.store import CorpusData, Store

    store = Store(":memory:")
    store.replace_corpus("golden", CorpusData(MESSAGES, [QUESTION], [(SCOPE, GOLD)]), format="test")
    trace = run_question(QUESTION, open_scope(store, "golden", SCOPE), variant_config(variant), offline_roles(),
                         corpus="golden", variant=variant, gold=GOLD)
    assert trace.answers and any(a.presentation == "forest" for a in trace.answers)
    messages = {m.id: m for m in MESSAGES}
    assert errors(v.check_leakage(trace, QUESTION, GOLD, evidence(trace, messages))) == []


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
    text = [" ".join(messages["m04"].text.split())]
    assert v._derived("Heads up: legal review slipped, … instead of March 3.", text)  # retained spans
    assert not v._derived("Heads up: legal review slipped, … the answer is March 17.", text)  # a foreign piece


def planted(trace, question, context):
    """`trace` with its forest context replaced and the forest prompt hash recomputed to match, as a consistent
    forgery would: the hash check alone cannot see it."""
    from tmem.prompts import answer_prompt

    answers = tuple(replace(a, prompt_hash=answer_prompt("forest", question.asking_user, question.text,
                                                         context).hash) if a.presentation == "forest" else a
                    for a in trace.answers)
    return replace(trace, context=context, answers=answers)


PLANTS = {
    "an extra line inside the passages": lambda c, gold: c.replace("\n<<<END", f"\nhint: the answer is {gold}\n<<<END"),
    "a line before the passages": lambda c, gold: f"gold answer: {gold}\n" + c,
    "a metadata field": lambda c, gold: c.replace("text=", f"note={gold} text=", 1),
    "a line after the passages": lambda c, gold: c + f"\nanswer={gold}",
    # right after the second passage's index, whatever its parent and relation (the forest's shape is not the point)
    "the head of a passage line": lambda c, gold: re.sub(r"^(\s*)\[2\] ", rf"\g<1>[2] {gold} ", c, count=1, flags=re.M),
}


@pytest.mark.parametrize("where", PLANTS)
def test_a_gold_answer_planted_outside_the_message_bodies_is_caught(golden, where):
    trace, gold, question, messages = golden
    leaked = planted(trace, question, PLANTS[where](trace.context, gold.answer))
    assert leaked.context != trace.context, "the plant did not change the context"
    found = [f.message for f in errors(v.check_leakage(leaked, question, gold, evidence(trace, messages)))]
    assert not any("does not rebuild" in m for m in found)  # consistent: only the content checks can see it
    assert any("gold answer outside the message bodies of the forest answer prompt" in m for m in found), found
    assert any("not the rendering of the recorded evidence" in m for m in found)


def test_a_gold_evidence_id_anywhere_in_the_prompt_is_caught(golden):
    trace, gold, question, messages = golden
    leaked = planted(trace, question, trace.context.replace("go-live", "go-live (m04)"))  # inside a body
    found = [f.message for f in errors(v.check_leakage(leaked, question, gold, evidence(trace, messages)))]
    assert "full golden/q1: gold evidence id m04 in the forest answer prompt" in found
    assert any("not stored messages" in m for m in found)


def test_a_stored_message_with_another_author_is_not_the_recorded_evidence(golden):
    trace, gold, question, messages = golden
    leaked = planted(trace, question, trace.context.replace("author=User_4", "author=User_9"))
    found = [f.message for f in errors(v.check_leakage(leaked, question, gold, evidence(trace, messages)))]
    assert len(found) == 1 and "1 foreign line(s)" in found[0]


@pytest.mark.parametrize("answer", ["3", "Mar", "no"])
def test_short_answers_are_matched_as_whole_words(golden, answer):
    """"3" is in "[3]", "depth=3" and "March 3", "Mar" in "March", "no" in "Noted": none of that is a leak; the
    same short answer on a line of its own is."""
    trace, gold, question, messages = golden
    short = replace(gold, answer=answer)
    assert errors(v.check_leakage(trace, question, short, evidence(trace, messages))) == []
    leaked = planted(trace, question, trace.context.replace("\n<<<END", f"\nhint: {answer}.\n<<<END"))
    found = [f.message for f in errors(v.check_leakage(leaked, question, short, evidence(trace, messages)))]
    assert any("gold answer outside the message bodies" in m for m in found)


def test_numeric_gold_ids_are_looked_for_outside_the_rendering_only(golden):
    trace, gold, question, messages = golden
    numeric = replace(gold, evidence=(("3",),))  # an id such as an IRC line number
    assert errors(v.check_leakage(trace, question, numeric, evidence(trace, messages))) == []  # "[3]", "March 3"
    leaked = planted(trace, question, trace.context + "\nsee 3")
    found = [f.message for f in errors(v.check_leakage(leaked, question, numeric, evidence(trace, messages)))]
    assert any("gold evidence id 3 in the forest answer prompt" in m for m in found)


@pytest.mark.parametrize("mode", ["compress", "truncate"])
def test_compressed_and_truncated_contexts_are_clean(mode):
    """Span compression and the w/o-compression cut at B (which can end inside a line) are renderings of the
    recorded evidence; a cut context with a planted tail is not."""
    from tmem.api import open_scope
    from tmem.config import variant_config
    from tmem.demo.golden import GOLD, MESSAGES, QUESTION, SCOPE
    from tmem.models.offline import offline_roles
    from tmem.pipeline.run import run_question
    from tmem.store import CorpusData, Store

    store = Store(":memory:")
    store.replace_corpus("golden", CorpusData(MESSAGES, [QUESTION], [(SCOPE, GOLD)]), format="test")
    config = variant_config("full").with_("compression", budget_tokens=300, mode=mode)
    trace = run_question(QUESTION, open_scope(store, "golden", SCOPE), config, offline_roles(), corpus="golden",
                         variant="full", gold=GOLD)
    ev = {m.id: m for m in MESSAGES if m.id in trace.evidence_ids}
    assert not trace.context.endswith(">>>") or any(not s.kept for s in trace.spans)  # really compressed or cut
    assert not trace.flat_context.endswith(">>>")  # the flat context is cut at B inside a line
    assert errors(v.check_leakage(trace, QUESTION, GOLD, ev)) == []
    leaked = planted(trace, QUESTION, trace.context + "\nthe answer is March 17")
    assert errors(v.check_leakage(leaked, QUESTION, GOLD, ev))


def test_a_question_that_contains_its_own_answer_is_a_note_not_a_leak(golden):
    trace, _, question, messages = golden
    gold = Gold(question.id, "product launch", (("m04",),))
    found = v.check_leakage(trace, question, gold, evidence(trace, messages))
    assert not errors(found) and any(f.level == v.NOTE for f in found)
