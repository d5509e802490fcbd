"""The default offline relation role, revision-first (tmem/models/relation/revision_first.py): the revision layer
decides first and says so; everything else is the fitted role's decision, unchanged but for the reason, which names
the layer; the old default stays selectable as the `fitted-structuring` variant."""
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from test_relation_revision import ASSISTANT, UPLOAD

from tmem.config import StructuringConfig, variant_config
from tmem.models.base import RelationResult
from tmem.models.embedders import LexicalEmbedder
from tmem.models.relation import ConfiguredRule, FittedRelation, RevisionFirstRelation, rule_for
from tmem.pipeline.scope import Scope
from tmem.types import NONE, UPDATE, Message, Question, RelationChoice

Q = Question("q", "s", "what is the plan?", None)


def test_the_default_is_revision_first_and_says_it_is_offline():
    role = rule_for(StructuringConfig(), LexicalEmbedder())
    assert isinstance(role, RevisionFirstRelation) and role.backend == "offline:revision-first" and role.offline
    assert ConfiguredRule().backend == "offline:revision-first"
    assert rule_for(variant_config("fitted-structuring").structuring).backend == "offline:fitted-relation"
    assert rule_for(StructuringConfig(revision_relevance=0.6)).thresholds.min_relevance == 0.6


def test_the_layer_decides_a_revision_and_the_fitted_model_the_rest_unchanged():
    scope = Scope("c", "s", UPLOAD)
    decision, challenge, revision = UPLOAD
    role = rule_for(StructuringConfig(), LexicalEmbedder())
    [choice] = role.label_pairs(Q, revision, [decision, challenge], scope).choices
    assert (choice.parent_id, choice.relation) == ("d", UPDATE)  # the reply to the challenge settles its proposal
    assert choice.reason.startswith("offline: revision layer: settles the proposal c: takes up the proposed value")
    uploaded = replace(revision, reply_to=None)  # an uploaded chat without reply links: the revision layer
    [choice] = role.label_pairs(Q, uploaded, [decision, replace(challenge, reply_to=None)], scope).choices
    assert (choice.parent_id, choice.relation) == ("d", UPDATE)
    assert choice.reason.startswith("offline: revision layer: explicit revision ('Change of plan')")
    fitted = FittedRelation(embedder=LexicalEmbedder())
    [mine] = role.label_pairs(Q, challenge, [decision], scope).choices  # a question: the fitted layer
    [theirs] = fitted.label_pairs(Q, challenge, [decision], scope).choices
    assert replace(mine, reason="") == replace(theirs, reason="")
    assert mine.reason == theirs.reason.replace("offline: ", "offline: fitted layer (no explicit revision wording): ")


def test_revision_wording_without_a_stated_slot_goes_to_the_fitted_layer():
    scope = Scope("c", "s", ASSISTANT)
    u1, a1 = ASSISTANT[:2]
    role = rule_for(StructuringConfig(), LexicalEmbedder())
    child = replace(u1, id="z", text="Actually I love cooking outdoors.", timestamp=a1.timestamp.replace(hour=23))
    [choice] = role.label_pairs(Q, child, [u1, a1], scope).choices
    assert "fitted layer (revision wording but no new value for a slot stated earlier)" in choice.reason


@dataclass(frozen=True)
class RootingFitted:
    """A fitted role that roots every child, as weights fitted on chats with reply links do on IRC held out."""

    def label_pairs(self, question, child, candidates, scope) -> RelationResult:
        return RelationResult(choices=(RelationChoice(candidates[-1].id, NONE, 0.9, "offline: fitted model: ROOT"),))


def test_where_no_message_marks_a_reply_the_fitted_root_yields_to_the_state_rules_parent():
    t0 = datetime(2026, 3, 2, 9)
    log = [Message("a", "s", "anyone know why grub fails after the kernel upgrade", t0, author="alice"),
           Message("b", "s", "what's the weather like over there", t0 + timedelta(minutes=1), author="carol"),
           Message("c", "s", "alice: reinstall grub from a live usb, then run update-grub",
                   t0 + timedelta(minutes=2), author="bob")]
    role = replace(rule_for(StructuringConfig(), LexicalEmbedder()), fitted=RootingFitted())
    [choice] = role.label_pairs(Q, log[2], log[:2], Scope("c", "s", log)).choices
    assert (choice.parent_id, choice.relation) == ("a", "EXPAND")  # the state rule: bob addresses alice
    assert choice.confidence >= 0.5 and choice.reason.startswith("offline: state layer (the fitted role's ROOT")
    marked = [*log[:2], replace(log[2], reply_to="a")]  # replies are marked: the fitted role's ROOT stands
    [choice] = role.label_pairs(Q, replace(log[2], reply_to=None), marked[:2], Scope("c", "s", marked)).choices
    assert choice.relation == NONE and choice.reason.startswith("offline: fitted layer (no explicit revision")
