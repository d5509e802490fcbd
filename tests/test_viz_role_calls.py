"""tmem.viz.question.role_calls: each model role's prompt (rebuilt from the templates and the stored trace, checked
against the recorded hash) and response, for the Stages tab."""
from __future__ import annotations

from dataclasses import replace

from tmem.viz.question.role_calls import relation_replies, role_calls, selection_replies


def test_the_answer_prompts_rebuild_to_their_recorded_hash(golden_trace):
    trace, gold, _ = golden_trace
    calls = role_calls(trace, gold)
    answers = [c for c in calls if c.role.startswith("answer")]
    assert [c.role for c in answers] == [f"answer ({a.presentation})" for a in trace.answers]
    assert all(c.rebuilt is True for c in answers), "the prompt the answer role saw, not a look-alike"
    forest = answers[0]
    assert trace.question.text in forest.user and trace.context in forest.user
    assert forest.response.startswith(trace.answers[0].text)
    judges = [c for c in calls if c.role.startswith("judge")]
    assert judges and gold.answer in judges[0].user


def test_a_prompt_that_does_not_rebuild_says_so(golden_trace):
    trace, gold, _ = golden_trace
    changed = replace(trace, context=trace.context + "\n(edited)")
    assert role_calls(changed, gold)[0].rebuilt is False
    assert not [c for c in role_calls(trace, None) if c.role.startswith("judge")], "no gold answer: no judge prompt"


def test_per_message_replies(golden_trace):
    trace, _, _ = golden_trace
    assert len(selection_replies(trace)) == len(trace.selections)
    relations = relation_replies(trace)
    assert len(relations) == len(trace.decisions) and set(relations["relation"]) <= {"UPDATE", "EXPAND", "ROOT",
                                                                                      "RELATED"}
