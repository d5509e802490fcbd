"""The default role's re-readings of the fitted layer's decision (tmem/models/relation/follow_ups.py): a speaker's
state following their own report UPDATEs the report; a top-level change the fitted model rooted UPDATEs the
top-level post it is about. Both only where both sides state a state."""
from dataclasses import replace
from datetime import timedelta

from test_relation_revision_first import VENUE_T0, Q, RootingFitted

from tmem.config import StructuringConfig
from tmem.models.base import RelationResult
from tmem.models.embedders import LexicalEmbedder
from tmem.models.relation import rule_for
from tmem.models.relation.follow_ups import follows_up_own, revises_post
from tmem.pipeline.scope import Scope
from tmem.types import EXPAND, UPDATE, Message, RelationChoice

# A loading bay, written here: the plan, then the speaker's own report of the count (a state the fitted role reads,
# no slot the revision layer reads), then the speaker's new state of it.
MOVE = [Message("m1", "s", "bay 2 loads 12 crates tomorrow, pickup 06:00", VENUE_T0, author="ravi"),
        Message("m2", "s", "final count for bay 2: 12, one crate failed the seal check",
                VENUE_T0 + timedelta(hours=20), author="ravi")]
VAN = Message("c", "s", "resealed the crate, 13 go", VENUE_T0 + timedelta(hours=22), author="ravi", reply_to="m2")


class ExpandingFitted:
    """A fitted role that EXPANDs every child's reply target (or the latest candidate), as the shipped weights do for
    a speaker following up their own report."""

    def label_pairs(self, question, child, candidates, scope) -> RelationResult:
        return RelationResult(choices=(RelationChoice(child.reply_to or candidates[-1].id, EXPAND, 0.8,
                                                      "offline: fitted model: EXPAND"),))


def test_a_speakers_state_following_their_own_report_updates_the_report():
    expand = RelationChoice("m2", EXPAND, 0.8, "")
    far = lambda: [0.1, 0.1]  # noqa: E731 (a reply at the 0.1 floor for a speaker's own statement)
    found = follows_up_own(VAN, MOVE, expand, far)
    assert found.parent.id == "m2" and found.reason.startswith("the speaker's own report m2, which states no slot")
    assert follows_up_own(replace(VAN, author="kim"), MOVE, expand, far) is None  # another speaker's report
    assert follows_up_own(replace(VAN, text="resealed the crate, 13 go?"), MOVE, expand, far) is None  # asks
    assert follows_up_own(replace(VAN, text="ugh. calling around"), MOVE, expand, far) is None  # states nothing
    assert follows_up_own(VAN, MOVE, expand, lambda: [0.1, 0.05]) is None  # a reply about something else
    assert follows_up_own(VAN, MOVE, replace(expand, relation=UPDATE), far) is None  # only a fitted EXPAND
    assert follows_up_own(VAN, MOVE, replace(expand, parent_id="m1"), far) is None  # m1 states a slot itself
    stateless = [MOVE[0], replace(MOVE[1], text="uhaul just texted, they double booked, no van :(")]
    assert follows_up_own(VAN, stateless, expand, far) is None  # an UPDATE changes a state: m2 states none
    top = replace(VAN, reply_to=None)  # not a reply: only as close to the report as a reply would be
    assert follows_up_own(top, MOVE, expand, far) is None
    assert follows_up_own(top, MOVE, expand, lambda: [0.1, 0.6]).parent.id == "m2"
    role = replace(rule_for(StructuringConfig(), LexicalEmbedder()), fitted=ExpandingFitted())
    [choice] = role.label_pairs(Q, VAN, MOVE, Scope("c", "s", [*MOVE, VAN])).choices
    assert (choice.parent_id, choice.relation, choice.confidence) == ("m2", UPDATE, 0.6)
    assert choice.reason.startswith("offline: revision layer: the speaker's own report m2")
    other = replace(VAN, author="kim")  # a reply to another speaker's report stays the fitted model's EXPAND
    [choice] = role.label_pairs(Q, other, MOVE, Scope("c", "s", [*MOVE, other])).choices
    assert (choice.parent_id, choice.relation) == ("m2", EXPAND)


# A clinic's order thread, written here: the order list, a reply to it, another speaker's unrelated post; then a
# third speaker corrects the order in a top-level message whose value reader sees no state ("6 is too many, 4").
ORDER = [Message("o1", "s", "Doing the monthly order today: gloves 10 boxes M, 6 boxes L, 200 flu doses", VENUE_T0,
                 author="una"),
         Message("x1", "s", "thanks una, add sharps bins too", VENUE_T0 + timedelta(minutes=5), author="bo",
                 reply_to="o1"),
         Message("o2", "s", "Friday drinks on the terrace at 5", VENUE_T0 + timedelta(minutes=9), author="bo")]
GLOVES = Message("c", "s", "actually L gloves 6 is too many, 4", VENUE_T0 + timedelta(minutes=30), author="cem")


def test_a_rooted_top_level_change_updates_the_top_level_post_it_is_about():
    found = revises_post(GLOVES, ORDER, [0.35, 0.1, 0.1])
    assert found.parent.id == "o1" and "('actually')" in found.reason and "(relevance 0.35)" in found.reason
    assert revises_post(GLOVES, ORDER, [0.35, 0.9, 0.1]).parent.id == "o1"  # a reply is no post
    assert revises_post(GLOVES, ORDER, [0.35, 0.1, 0.3]).parent.id == "o2"  # the latest post near the best one
    assert revises_post(GLOVES, ORDER, [0.25, 0.1, 0.1]) is None  # under the 0.3 floor
    assert revises_post(replace(GLOVES, reply_to="o1"), ORDER, [0.35, 0.1, 0.1]) is None  # a reply
    assert revises_post(replace(GLOVES, text="L gloves 4 please"), ORDER, [0.35, 0.1, 0.1]) is None  # no wording
    assert revises_post(replace(GLOVES, text="L gloves blocked at the supplier"), ORDER, [0.35, 0.1, 0.1]) is None
    asked = [replace(ORDER[0], text="should we order gloves 10 boxes M, 6 boxes L?"), *ORDER[1:]]
    assert revises_post(GLOVES, asked, [0.35, 0.1, 0.1]) is None  # an UPDATE changes a state: o1 now asks
    role = replace(rule_for(StructuringConfig(), LexicalEmbedder()), fitted=RootingFitted())
    [choice] = role.label_pairs(Q, GLOVES, ORDER, Scope("c", "s", [*ORDER, GLOVES])).choices
    assert (choice.parent_id, choice.relation, choice.confidence) == ("o1", UPDATE, 0.6)
    assert "UPDATE of the top-level post it is about, o1" in choice.reason
    unmarked = [replace(m, reply_to=None) for m in ORDER]  # a log without reply links: the state rule's turn
    [choice] = role.label_pairs(Q, GLOVES, unmarked, Scope("c", "s", [*unmarked, GLOVES])).choices
    assert "top-level post it is about" not in choice.reason
