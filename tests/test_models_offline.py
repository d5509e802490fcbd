"""The deterministic offline roles: explicit signals only, marked offline."""
from datetime import datetime, timedelta

import pytest

from tmem.models.base import AnswerEvidence
from tmem.models.offline import ABSTENTION, OfflineAnswerer, OfflineEvidenceUtility, OfflineJudge
from tmem.models.relation import CueOverlapRelation
from tmem.pipeline.scope import Scope
from tmem.prompts import Prompt
from tmem.types import EXPAND, UPDATE, Message, Question

T0 = datetime(2025, 5, 1, 9)
Q = Question("q", "s", "Which vendor handles the payment gateway?", "U9")
P = Prompt("p", "", "")


def m(mid, hours, text, author="ann", reply_to=None):
    return Message(mid, "s", text, T0 + timedelta(hours=hours), author=author, topic="pay", reply_to=reply_to)


PARENT = m("p", 0, "We picked Stripe for the payment gateway integration.", author="bob")
FILLER = [m(f"f{i}", 100 + i, f"Unrelated note number {i} about lunch and parking.") for i in range(20)]


def choose(child):
    scope = Scope("c", "s", [PARENT, child, *FILLER])
    return CueOverlapRelation().label_pairs(Q, child, [PARENT], scope).choices


def test_revision_cue_on_the_same_object_is_an_update():
    [choice] = choose(m("c", 30, "Correction, the payment gateway moves to Adyen instead."))
    assert choice.relation == UPDATE and "revision cue" in choice.reason and choice.reason.startswith("offline:")


def test_reply_link_is_an_expand():
    [choice] = choose(m("c", 1, "Good to know.", reply_to="p"))
    assert choice.relation == EXPAND and choice.confidence > 0.85


def test_addressing_the_author_within_the_episode_is_an_expand():
    [choice] = choose(m("c", 2, "bob: which account do we use for it?"))
    assert choice.relation == EXPAND and "addresses bob" in choice.reason
    assert choose(m("c", 30, "bob: which account do we use for it?")) == ()  # a day later: not one episode


def test_the_addressee_answering_is_an_expand_once():
    ask = m("a", 0, "carol: does the sandbox key work for you?", author="ann")
    other = m("o", 0.01, "lunch anyone?", author="dan")
    reply = m("r", 0.02, "yes, since this morning", author="carol")
    scope = Scope("c", "s", [ask, other, reply, *FILLER])
    [choice] = CueOverlapRelation().label_pairs(Q, reply, [ask, other], scope).choices
    assert (choice.parent_id, choice.relation) == ("a", EXPAND) and "who addressed carol" in choice.reason
    # carol has spoken since she was addressed: her later message is not the answer to that question
    spoke = m("s", 0.015, "one sec", author="carol")
    later = CueOverlapRelation().label_pairs(Q, reply, [ask, other, spoke], scope).choices
    assert all(c.parent_id != "a" for c in later)


def test_an_own_message_continued_right_after_is_an_expand():
    first = m("1", 0, "the sandbox key expired", author="carol")
    second = m("2", 0.05, "so every payment test fails", author="carol")  # 3 minutes later, addressing nobody
    scope = Scope("c", "s", [first, second, *FILLER])
    [choice] = CueOverlapRelation().label_pairs(Q, second, [first], scope).choices
    assert (choice.parent_id, choice.relation) == ("1", EXPAND) and "own message" in choice.reason
    late = m("3", 0.5, "so every payment test fails", author="carol")  # 30 minutes later: not one thought
    assert CueOverlapRelation().label_pairs(Q, late, [first], scope).choices == ()
    between = m("b", 0.02, "ok", author="dan")  # somebody spoke in between: not a continuation of carol's line
    assert CueOverlapRelation().label_pairs(Q, second, [first, between], scope).choices == ()


def test_shared_vocabulary_alone_gives_no_parent():
    assert choose(m("c", 1, "The payment gateway integration for Stripe is documented in the wiki.")) == ()


def test_support_cue_needs_the_same_object():
    [choice] = choose(m("c", 1, "Agreed, Stripe for the payment gateway works for us."))
    assert choice.relation == EXPAND
    assert choose(m("c", 1, "Agreed, pizza it is.")) == ()


def test_evidence_utility_context_score_and_its_own_relevance_floor():
    """r(m) = ½ similarity + ½ coverage; s(m) = r(m) + ½ max r of the adjacent candidates (+ ¼ two away).
    The answer right after a relevant message is lifted to KEY by its neighbour; small talk next to the same
    message is lifted above min_score too, but has no relevance of its own (r < 0.05) and stays out."""
    ask = m("a", 0, "Which vendor will handle the payment gateway?", author="bob")
    reply = m("r", 0.1, "Stripe, signed yesterday.", author="cy")
    lunch = m("l", 0.2, "Lunch on Friday?", author="dan")
    scope = Scope("c", "s", [ask, reply, lunch, *FILLER])
    role = OfflineEvidenceUtility()
    sims = [0.6, 0.2, 0.0]
    relevance = role.relevance(Q, [ask, reply, lunch], sims, scope)
    assert relevance[1] == pytest.approx(0.1) and relevance[2] == 0.0  # the reply and the lunch cover no q word
    assert relevance[0] > 0.5  # "vendor", "payment", "gateway" (and "handle") covered
    scores = role.context_scores(relevance, [ask, reply, lunch], scope)
    assert scores[1] == pytest.approx(relevance[1] + 0.5 * relevance[0])
    assert scores[2] == pytest.approx(0.5 * relevance[1] + 0.25 * relevance[0]) and scores[2] >= role.min_score
    labels = {s.message_id: s.label for s in role.select(Q, 0, [ask, reply, lunch], sims, scope).selections}
    assert labels == {"a": "KEY", "r": "KEY"}


def answer(messages, parents, question=Q):
    scope = Scope("c", "s", [*messages, *FILLER])
    return OfflineAnswerer().answer(question, P, AnswerEvidence(tuple(messages), parents), scope)


def test_answerer_follows_the_update_chain_to_the_latest_state():
    new = m("n", 30, "Correction: Adyen now.")
    result = answer([PARENT, new], {"n": ("p", UPDATE)})
    assert result.text == "Correction: Adyen now." and "p -> n" in result.reason
    flat = answer([PARENT, new], {})
    assert "Stripe" in flat.text


def test_answerer_abstains_without_coverage_and_answers_dates():
    assert answer([m("x", 0, "Lunch is at noon.")], {}).text == ABSTENTION
    when = Question("w", "s", "When did we pick the payment gateway vendor?", "U9")
    assert answer([PARENT], {}, when).text == "2025-05-01"


@pytest.mark.parametrize("gold, agent, correct", [
    ("There is no information available.", "Not mentioned in the conversation.", True),
    ("There is no information available.", "Adyen", False),
    ("Adyen", "The gateway is now Adyen.", True),
    ("2025-05-01", "It was decided on 1 May, 2025.", True),
    ("shadow traffic at 20%", "contract checks against the sandbox", False),
])
def test_judge(gold, agent, correct):
    verdict = OfflineJudge().judge(Q, gold, agent, P)
    assert verdict.correct is correct and "offline lexical judge" in verdict.raw
