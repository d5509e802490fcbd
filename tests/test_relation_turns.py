"""Readings of a conversation's turn structure in the default relation role (tmem/models/relation/turns.py): a reply
link that names a thread rather than a message, and, in a chat without reply links, the turn just before a child
standing for its reply target. Every conversation here is written by hand for the test; the expected parents were
worked out from the texts and the reply links."""
from dataclasses import replace
from datetime import datetime, timedelta

from tmem.config import StructuringConfig
from tmem.models.base import RelationResult
from tmem.models.embedders import LexicalEmbedder
from tmem.models.relation import rule_for
from tmem.models.relation.turns import (
    answered_turn,
    carried_turn,
    dialogue,
    dialogue_turn,
    thread_targets,
    threaded,
)
from tmem.pipeline.scope import Scope
from tmem.types import EXPAND, UPDATE, Message, Question, RelationChoice

T0 = datetime(2026, 5, 4, 9)
Q = Question("q", "s", "what is booked?", None)


def chat(rows):
    """Messages from (id, author, minutes after T0, text[, reply_to]) rows."""
    return [Message(r[0], "s", r[3], T0 + timedelta(minutes=r[2]), author=r[1],
                    reply_to=r[4] if len(r) > 4 else None) for r in rows]


# A desk's thread: every reply points at the thread's first message, as Slack records it
FLAT = chat([
    ("t", "ed", 0, "Ferry piece for Thursday, 600 words, page 5"),
    ("a", "kim", 10, "photos from the harbour or the old pier?", "t"),
    ("b", "ed", 15, "the old pier, the light is better", "t"),
    ("c", "sam", 20, "fine by me", "t"),
    ("x", "kim", 30, "canteen shuts at 2 today"),
])


def test_a_reply_in_a_flat_thread_answers_the_threads_latest_message():
    scope = Scope("c", "s", FLAT)
    assert thread_targets(scope, FLAT) == {"a": "t", "b": "a", "c": "b"}
    child, candidates = threaded(FLAT[3], FLAT[:3], scope)
    assert child.reply_to == "b" and [p.reply_to for p in candidates] == [None, "t", "a"]
    # the default role: "fine by me" takes up the answer just before it in the thread, not the thread's top
    role = rule_for(StructuringConfig(), LexicalEmbedder())
    [choice] = role.label_pairs(Q, FLAT[3], FLAT[:3], scope).choices
    assert (choice.parent_id, choice.relation) == ("b", EXPAND)


def test_reply_links_that_nest_name_the_message_answered():
    nested = [*FLAT[:3], replace(FLAT[3], reply_to="b")]  # one reply to a reply: links name messages
    scope = Scope("c", "s", nested)
    assert thread_targets(scope, nested) == {}
    assert threaded(nested[2], nested[:2], scope) == (nested[2], nested[:2])
    alone = [FLAT[0], FLAT[1], FLAT[4]]  # a thread with one reply: nothing to re-point
    assert thread_targets(Scope("c", "s", alone), alone) == {"a": "t"}


# An SMS dialogue with a restaurant, no reply links; answers come hours apart
SMS = chat([
    ("m1", "guest", 0, "Hi, a table for 4 on Friday at 19:00 please, at the Olive Tree"),
    ("m2", "host", 15, "Booked: Olive Tree, Friday 19:00, table for 4, ref OT-5531"),
    ("m3", "guest", 2000, "make it 6 people not 4, my cousins are coming"),
    ("m4", "host", 2700, "Done, 6 people at the Olive Tree on Friday 19:00, same ref OT-5531"),
])


def _update(parent):
    return RelationResult(choices=(RelationChoice(parent, UPDATE, 0.8, "offline: test"),))


def test_in_a_dialogue_a_confirmation_carries_out_the_turn_before():
    scope = Scope("c", "s", SMS)
    assert dialogue(scope, SMS)
    # the host's "Done, 6 people" (11 h 40 min later, the same day) carries out the guest's change: an EXPAND of it,
    # not a second UPDATE of the booking m2
    assert carried_turn(SMS[3], SMS[:3], scope, _update("m2"), 180.0).id == "m3"
    assert carried_turn(SMS[3], SMS[:3], scope, _update("m3"), 180.0) is None  # the decision is the turn already
    late = [*SMS[:3], replace(SMS[3], timestamp=T0 + timedelta(minutes=2000 + 26 * 60))]
    assert carried_turn(late[3], late[:3], Scope("c", "s", late), _update("m2"), 180.0) is None  # a day later
    asked = [*SMS[:2], replace(SMS[2], text="could you make it 6 people?"), SMS[3]]
    assert carried_turn(asked[3], asked[:3], Scope("c", "s", asked), _update("m2"), 180.0) is None  # a request
    field = [*SMS[:3], replace(SMS[3], text="Status changed Pending -> Confirmed for 6 people on Friday")]
    assert carried_turn(field[3], field[:3], Scope("c", "s", field), _update("m2"), 180.0) is None  # its own change
    other = [*SMS[:3], replace(SMS[3], text="Kitchen closes at 22:00 on Fridays")]  # takes up nothing of m3
    assert carried_turn(other[3], other[:3], Scope("c", "s", other), _update("m2"), 180.0) is None
    marked = [*SMS[:3], replace(SMS[3], reply_to="m3")]
    marked = [replace(m, reply_to="m1") if m.id == "m2" else m for m in marked]
    assert carried_turn(marked[3], marked[:3], Scope("c", "s", marked), _update("m2"), 180.0) is None


def test_in_a_dialogue_an_answer_to_a_question_of_fact_expands_the_question():
    rows = [*SMS[:2], replace(SMS[2], text="is the terrace heated in May?"),
            replace(SMS[3], text="Yes, heaters from 18:00, your table for 4 on Friday can go outside")]
    scope = Scope("c", "s", rows)
    assert answered_turn(rows[3], rows[:3], scope, _update("m2")).id == "m3"
    request = [*rows[:2], replace(rows[2], text="any chance of a table on the terrace?"), rows[3]]
    assert answered_turn(request[3], request[:3], Scope("c", "s", request), _update("m2")) is None  # asks a change
    assert answered_turn(rows[3], rows[:3], scope, RelationResult(choices=(
        RelationChoice("m2", EXPAND, 0.5, "offline: test"),))) is None  # only an UPDATE of another message


def test_the_turn_before_in_a_dialogue_is_answered_the_same_day_and_not_among_three():
    scope = Scope("c", "s", SMS)
    assert dialogue_turn(SMS[3], SMS[:3], scope).id == "m3"  # 700 minutes later
    assert dialogue_turn(SMS[2], SMS[:2], scope) is None  # 33 hours after the host's turn: a new request
    three = [*SMS[:3], replace(SMS[3], author="chef")]
    assert not dialogue(Scope("c", "s", three), three)
    assert dialogue_turn(three[3], three[:3], Scope("c", "s", three)) is None
