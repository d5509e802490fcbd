"""Chaining the states first (tmem/models/relation/slots.py): slot head, addressed state, the first pass that
settles a challenged state, the no-UPDATE-without-a-state constraint, and the fitted role following the first pass
with its runner-up in the reason. Expectations computed by hand on a five-message conversation."""
from datetime import datetime, timedelta

import numpy as np
import pytest

from tmem.models.relation.features import PAIR_FEATURES, relation_features
from tmem.models.relation.fitted import FittedRelation
from tmem.models.relation.revision import states_slot
from tmem.models.relation.slots import addressed_state, no_update_between, settled_state, slot_head, states_a_state
from tmem.models.relation.values import cues
from tmem.pipeline.scope import Scope
from tmem.types import EXPAND, UPDATE, Message, Question

T0 = datetime(2025, 3, 10, 9)


def m(mid, hours, text, author="rm", reply_to=None):
    return Message(mid, "s", text, T0 + timedelta(hours=hours), author=author, topic="freeze", reply_to=reply_to)


DECISION = m("d", 0, "Code freeze is Thursday March 13 at 18:00, release branch cut the same evening.")
CHALLENGE = m("c", 20, "Are we sure about Thursday for the freeze? The regression suite is still red.", "qa")
SIDE = m("s", 21, "For the record, the freeze date was fine until the suite broke.", "rm", "c")
REVISION = m("r", 40, "Code freeze is Tuesday the 18th at 18:00, release branch cut that evening.", "rm", "c")
THANKS = m("t", 41, "Thanks, noted.", "qa", "r")


def test_reading_what_states_a_state():
    assert states_a_state(cues(DECISION.text)) and states_a_state(cues(REVISION.text))
    assert not states_a_state(cues(CHALLENGE.text))  # a question about a state states none
    assert not states_a_state(cues(THANKS.text))
    assert no_update_between(cues(THANKS.text), cues(DECISION.text))  # the child states nothing
    assert no_update_between(cues(REVISION.text), cues(CHALLENGE.text))  # the parent states nothing
    assert not no_update_between(cues(REVISION.text), cues(DECISION.text))
    assert no_update_between(cues(DECISION.text), cues(DECISION.text), DECISION.text, " " + DECISION.text.upper())
    # a message that states a value and asks about it states no state either: "Can they get it earlier?" is the
    # question a revision answers, not the state it changes
    asking = cues("Two beta customers (Acme Freight, Lumen Bank) bought specifically for export. Can they get it "
                  "earlier?")
    assert asking.states and asking.challenge
    assert no_update_between(cues(REVISION.text), asking)


def test_slot_head_and_addressed_state_by_hand():
    relevance = np.array([0.6, 0.5, 0.7])
    stated = np.array([1.0, 0.0, 1.0])
    assert slot_head(relevance, stated) == 2 and slot_head(relevance, stated, exclude=2) == 0
    assert slot_head(relevance, np.zeros(3)) is None
    # a reply to candidate 1 (states none): its own parent when that states a state, else the most relevant
    # statement before it (candidate 2 came after the challenge, so candidate 0)
    assert addressed_state(relevance, stated, 1, 0) == 0
    assert addressed_state(relevance, stated, 1, None, np.array([1.0, 0.0, 0.0])) == 0
    assert addressed_state(relevance, stated, 1, None) == 2
    assert addressed_state(relevance, stated, None, None) is None


def test_the_first_pass_settles_the_challenged_state_not_the_reply():
    candidates = [DECISION, CHALLENGE, SIDE]
    reads = [cues(p.text) for p in candidates]
    micros = np.array([0, 20, 21]) * 3_600_000_000
    relevance = np.array([0.5, 0.6, 0.55])
    child = cues(REVISION.text)
    # the revision replies to the challenge (index 1): the state challenged is the decision, not the later SIDE
    assert settled_state(child, REVISION.text, False, relevance, reads, 1, None, micros) == 0
    assert settled_state(child, REVISION.text, True, relevance, reads, 1, None, micros) is None  # an ack, no cue
    assert settled_state(cues("Then " + REVISION.text), "OK. Then " + REVISION.text, True, relevance, reads, 1, None,
                         micros) == 0  # an ack that changes the state
    assert settled_state(child, "No, " + REVISION.text, False, relevance, reads, 1, None, micros) is None
    assert settled_state(child, REVISION.text, False, relevance, reads, None, None, micros) is None  # no reply
    assert settled_state(child, REVISION.text, False, np.array([0.2, 0.6, 0.55]), reads, 1, None, micros) is None


def test_the_fitted_role_follows_the_first_pass_and_names_its_runner_up():
    scope = Scope("c", "s", [DECISION, CHALLENGE, SIDE, REVISION, THANKS])
    pair, _, _ = relation_features(REVISION, [DECISION, CHALLENGE, SIDE], scope, None)
    col = {n: i for i, n in enumerate(PAIR_FEATURES)}
    assert list(pair[:, col["settled_state"]]) == [1.0, 0.0, 0.0]
    assert list(pair[:, col["addressed_state"]]) == [1.0, 0.0, 0.0]
    assert list(pair[:, col["child_states_x_reply_states_none"]]) == [0.0, 1.0, 0.0]
    question = Question("q", "s", "When is the code freeze?", "u")
    choice = FittedRelation().label_pairs(question, REVISION, [DECISION, CHALLENGE, SIDE], scope).choices[0]
    assert (choice.parent_id, choice.relation) == ("d", UPDATE)
    assert "slots first" in choice.reason and "runner-up" in choice.reason and "margin" in choice.reason
    thanks = FittedRelation().label_pairs(question, THANKS, [DECISION, CHALLENGE, SIDE, REVISION], scope).choices[0]
    assert thanks.relation in (EXPAND, "NONE") and "runner-up" in thanks.reason or "margin" in thanks.reason


def test_no_update_in_any_demo_forest_joins_a_message_that_states_no_state():
    """The issue's demo target on all of the demo's forests, not only the curated one: every UPDATE of the offline
    pipeline joins two messages that state a state, a parent that names values but asks counting as none (the
    count tmem/evaluation/relation/update_sides.py makes and scripts/demo_update_sides.py prints)."""
    from tmem import api
    from tmem.demo import DEMO_JSONL
    from tmem.evaluation.relation.update_sides import states_none, update_sides
    from tmem.models.embedders import make_embedder
    from tmem.models.offline import offline_roles

    if not DEMO_JSONL.exists():
        pytest.skip("no demo corpus in data/")
    store = api.open_store(":memory:")
    sides = update_sides(store, offline_roles(make_embedder("lexical")), api.resolve_config("full"))
    store.close()
    assert len(sides) > 50  # the demo's forests do hold state chains
    # a side states a state as slots.states_a_state reads it, or as the default role's revision layer reads a
    # slot statement (revision.states_slot: a status such as "on track" or "Status: Open" is a state, issue 38)
    wrong = [(p, c) for p, c in states_none(sides) if not (states_slot(p) and states_slot(c))]
    assert not wrong, wrong[:3]
