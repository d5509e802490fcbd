"""The default offline relation role ("offline:revision-first", `structuring.relation_rule = revision-first`):
the precision-first revision layer (tmem/models/relation/revision.py) decides first, the fitted model
(tmem/models/relation/fitted.py, variant `fitted-structuring` alone) decides the rest. Which layer decides follows
what the conversation shows, not its style's name (chosen by leave-one-style-out, docs/evaluation.md "Issue 38:
revision-first"):
- where no message carries a reply link, a reading of the state rule at least as precise on dev as the revision
  layer (a field set again or a value taken away by name, "Label `fixed` added, `in progress` removed": 13 of 15
  right on oss dev, calibrated 0.85 against the layer's 0.8) decides first, unless it reads status wording the
  revision layer reads too (a progress report, `state.REVISION_WORDED`), which decides first only where that layer
  would take another statement than the speaker's latest report;
- an explicit revision of a stated slot, or a reply that settles a proposal: the revision layer;
- a conversation that marks no reply link, when the fitted weights saw no such conversation of its party size
  (more than MANY_SPEAKERS speakers, an open log, or fewer, a thread) or did worse there than the state rule, as
  they record (`unmarked_layer`): the state rule (weights fitted on threads misattach a public log's turns);
- a fitted ROOT of a message that replies and states nothing new ("in", "i can bring the trailer too"): its reply
  link, as EXPAND (a reply that states nothing starts no tree);
- a fitted ROOT where no reply is marked: the state rule's parent, when that rule is confident;
- a fitted UPDATE of another speaker's message by a top-level message without revision wording, where replies
  are marked: ROOT (such a message restates no one else's state; `changes_unsaid`).
- a fitted UPDATE of another message than the reply target, from a reply that carries out a change its target
  states ("please plan for 48 rather than 55" -> "Updated to 48 guests"): EXPAND of the target (`carries_out`).
- where replies are marked, a fitted EXPAND of the speaker's own report by their state following it, and a fitted
  ROOT of a top-level change: UPDATEs of the report and of the post it is about (follow_ups.py), and a fitted ROOT of a
  top-level "fixed": an UPDATE of the latest report that named the thing broken (follow_ups.fixes_problem).
- the turn structure (turns.py): where no reply answers a reply, a reply link names a thread and the child answers
  the thread's latest message; where no reply is marked, an UPDATE by a child carrying out the change the turn
  just before states, or answering that turn's question of fact (in a dialogue), is an EXPAND of that turn; in a
  dialogue a fitted ROOT that nothing else places answers the turn before (the same day). A withdrawal ("sorry
  wrong chat") is a ROOT.
Each decision's reason names the layer that made it and why; an offline stand-in for a language-model relation
role."""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache

from tmem.models.base import RelationResult
from tmem.models.relation import state as state_rule
from tmem.models.relation.features import SIMILARITY_WEIGHT
from tmem.models.relation.fitted import FIRST_PASS, FittedRelation, load_weights
from tmem.models.relation.follow_ups import fixes_problem, follows_up_own, restates_post, revises_post
from tmem.models.relation.revision import (
    Revision,
    Thresholds,
    answers_a_challenge,
    brings_new,
    own_text,
    revise,
    revision_cue,
    settles_proposal,
    slot_values,
    states_slot,
    status_of,
)
from tmem.models.relation.signals import MANY_SPEAKERS, candidate_overlaps, party, replies_marked  # noqa: F401
from tmem.models.relation.state import StateRelation
from tmem.models.relation.turns import TURN_CONFIDENCE, answered_turn, carried_turn, dialogue_turn, threaded
from tmem.models.relation.values import NEGATED_VALUE, cues, withdraws
from tmem.types import EXPAND, NONE, UPDATE, Message, Question, RelationChoice

# (MANY_SPEAKERS and party live in signals, which the state rule reads too; tests and fit-relation's record read
# them through this module)
MIN_STATE_CONFIDENCE = 0.5  # the state rule's parents that replace a fitted ROOT where replies are unmarked: the
# kinds right at least half the time on dev (addressee, answer, continuation, own exchange; not a bare cue or value
# match). IRC dev, where the shipped weights root 365 children: its 87 cue/value parents there were right 24 times,
# the fitted ROOT 27; with IRC dev held out (weights fitted on the typed styles) the fitted role roots 97 % of it.
REPLY_CONFIDENCE = 0.5  # a reply's EXPAND where the fitted model rooted it: about the fitted ROOT's own confidence
# there (P(ROOT) 0.44-0.72 on the dev folds where it happened, docs/evaluation.md "Third pass")
SETTLED_CONFIDENCE = 0.7  # a reply settling a proposal: 5 of its 6 UPDATEs right on the eight dev corpora; below
# the revision layer's 0.8, as six children measure little
POST_CONFIDENCE = 0.6  # a fitted ROOT of a top-level revision, re-read as an UPDATE of a post (`restates_post`):
# its 3 decisions on the seven typed dev corpora right (docs/evaluation.md "Fifth pass"): few, so below the layer's 0.8
UNSAID_ROOT_CONFIDENCE = 0.45  # a top-level message re-read as a new tree (`changes_unsaid`): 13 of the 27 such
# children of the typed dev corpora are gold ROOTs (9 of 19 held out, 4 of 8 in-sample; docs/evaluation.md "Sixth pass")
ANSWERED_CONFIDENCE = 0.6  # an owner's answer settling a challenge to their statement (`settles_own`), an asker
# settling their own question (`answers_own_question`): their 4 and 2 decisions on the eleven reply-marked dev
# corpora right, few, so below SETTLED_CONFIDENCE
CARRIED_CONFIDENCE = 0.5  # a fitted UPDATE re-read as carrying out the reply target's change (`carries_out`)
FOLLOW_UP_CONFIDENCE = 0.6  # a fitted EXPAND re-read as the speaker's state following their own report
# (`follows_up_own`): its 3 decisions on the fifteen typed dev corpora right, few, so below the layer's 0.8
WITHDRAWN_CONFIDENCE = 0.7  # a withdrawal ("sorry wrong chat") as a ROOT: its 3 children on the dev corpora gold
# ROOTs (renovation 2, travel 1), few, so below the layer's 0.8
FIRST_PASS_GATE = "the fitted model alone (its first pass needs revision wording or the speaker's own statement)"
# the first pass (a state stated in reply to a message that states none UPDATEs what that message is about) holds
# only where the reply says it changes something or restates its speaker's own statement (`first_pass_holds`); dev
# figures in docs/evaluation.md, "Fourth pass"
def first_pass_of(result: RelationResult) -> str | None:
    """The parent the fitted role's first pass chose (`slots.settled_state`, its reason "slots first"), or None."""
    return next((c.parent_id for c in result.choices if c.reason.startswith(FIRST_PASS)), None)


def first_pass_holds(child: Message, candidates: Sequence[Message], parent_id: str) -> bool:
    """Whether the first pass's UPDATE of `parent_id` stands: the child says it changes something (revision
    wording), or its speaker restates their own statement in reply to someone else's challenge, question or
    objection ("we drop X and switch to Y" after "X looks shaky"). Someone answering a question about another's
    statement, or carrying out a request ("can we move wednesday to thursday?" -> the new week), changes nothing
    by that alone: the fitted model decides it."""
    by_id = {p.id: p for p in candidates}
    replied, stated = by_id.get(child.reply_to), by_id.get(parent_id)
    if replied is not None and replied.author != child.author and revision_cue(replied.text) is not None:
        return False
    if revision_cue(child.text) is not None:
        return True
    return replied is not None and stated is not None and stated.author == child.author != replied.author


def changes_unsaid(child: Message, candidates: Sequence[Message], choice: RelationChoice) -> bool:
    """Whether `choice` UPDATEs another speaker's message from a top-level child that says nothing of a change (no
    revision wording, `revision_cue`): in a chat that marks replies, a message that neither replies nor says it
    changes anything restates no one else's state. On the typed dev corpora none of these UPDATEs was right (0 of 19
    held out, 0 of 8 in-sample), and about half of the children were gold ROOTs (a notice, a new rule, a
    reminder); the speaker's own statement stays open to it (a speaker restates what they said)."""
    parent = next((p for p in candidates if p.id == choice.parent_id), None)
    return choice.relation == UPDATE and child.reply_to is None and parent is not None \
        and parent.author != child.author and revision_cue(child.text) is None


def carries_out(child: Message, candidates: Sequence[Message], choice: RelationChoice) -> bool:
    """Whether `choice` UPDATEs an earlier message other than the reply target, from a reply without revision
    wording of its own to another speaker's message that states the change ("please plan for 48 rather than 55" ->
    "Updated to 48 guests"): the change is the reply target's; the reply carries it out."""
    replied = next((p for p in candidates if p.id == child.reply_to), None)
    if choice.relation != UPDATE or replied is None or choice.parent_id == replied.id \
            or replied.author == child.author or revision_cue(child.text) is not None:
        return False
    # a change of value it states; a status it reports ("cancelled", "on hold") is an event the reply may act on
    # in a state of its own, and a challenge ("I don't trust them anymore") states no slot: its reply settles it
    cue = revision_cue(replied.text)
    return cue is not None and not status_of(cue) and states_slot(replied.text)


def fitted_on_unmarked(weights_path: str | None) -> bool:
    """Whether the fitted weights saw conversations that mark no reply link (`unmarked_children` > 0, which
    `fit-relation` records; weights without the record, or a fitted layer without a weights file, are taken to
    have seen them, as before the record existed)."""
    return weights_path is None or load_weights(weights_path).get("unmarked_children", 1) > 0


def unmarked_layer(weights_path: str | None, size: str) -> str:
    """Which layer decides a child of a conversation without reply links of party size `size` ("fitted" or
    "state"), from what the fitted weights record of such conversations (`fit-relation`'s `unmarked_by_party`: the
    fitted model's and the state rule's gold parents, in-sample, per party size): the fitted layer where it was at
    least as right as the state rule on them. Where the weights saw none of that size: a many-party log goes to the
    state rule (weights fitted on threads root or misattach its turns: IRC held out, the fitted role 0.24 against
    the state rule's 0.64, docs/evaluation.md "Eighth pass"); a few-party one to the fitted layer when the weights
    saw any conversation without reply links, as before the record existed (`fitted_on_unmarked`)."""
    weights = load_weights(weights_path) if weights_path is not None else {}
    seen = (weights.get("unmarked_by_party") or {}).get(size)
    if seen and seen.get("children"):
        return "fitted" if seen["fitted_right"] >= seen["state_right"] else "state"
    if size == "many" and "unmarked_by_party" in weights:
        return "state"
    return "fitted" if fitted_on_unmarked(weights_path) else "state"


def relevance_of(child: Message, candidates: Sequence[Message], scope, embedder) -> tuple[list[float], str]:
    """Per candidate: SIMILARITY_WEIGHT * cosine + the rest IDF-weighted overlap, as the fitted role's features
    (overlap alone without an embedder), and the basis, for the reason."""
    overlaps = candidate_overlaps(child, candidates, scope)
    sims = StateRelation(embedder=embedder)._similarities(child, candidates, scope)
    if sims is None:
        return list(overlaps), "overlap only (no embedder)"
    return [SIMILARITY_WEIGHT * float(s) + (1 - SIMILARITY_WEIGHT) * o for s, o in zip(sims, overlaps)], \
        "similarity+overlap"


@dataclass(frozen=True)
class RevisionFirstRelation:
    """An explicit revision naming a new value for a stated slot -> UPDATE of the slot's tip; else the fitted role;
    where the conversation records no reply links, the fitted role's ROOT yields to the state rule's parent."""

    thresholds: Thresholds = Thresholds()
    fitted: FittedRelation = FittedRelation()
    state: StateRelation = StateRelation()
    embedder: object | None = field(default=None, compare=False)
    backend: str = "offline:revision-first"
    offline: bool = True

    @classmethod
    def from_config(cls, config, embedder=None) -> RevisionFirstRelation:
        return cls(Thresholds(config.revision_relevance), FittedRelation.from_config(config, embedder),
                   StateRelation.from_config(config, embedder), embedder)

    @property
    def query_ties(self) -> bool:  # the fitted layer's settings, as the config set them
        return self.fitted.query_ties

    @property
    def query_margin(self) -> float:
        return self.fitted.query_margin

    def with_embedder(self, embedder) -> RevisionFirstRelation:
        return replace(self, fitted=self.fitted.with_embedder(embedder), state=self.state.with_embedder(embedder),
                       embedder=embedder)

    def label_pairs(self, question: Question, child: Message, candidates: Sequence[Message],
                    scope) -> RelationResult:
        if not candidates:
            return RelationResult()
        # where no message replies to a reply, a reply link names the thread: it answers the thread's latest message
        child, candidates = threaded(child, candidates, scope)
        if withdraws(own_text(child.text)):  # "sorry wrong chat": it takes its author's message back, no one's state
            return decided(
                candidates[-1].id, NONE, WITHDRAWN_CONFIDENCE,
                "offline: root layer: the author takes back their message (posted in the wrong place or to the "
                "wrong person): it continues no exchange, so it starts a tree")
        result = self._label_pairs(question, child, candidates, scope)
        if (turn := carried_turn(child, candidates, scope, result, self.state.turn_minutes)) is not None:
            return decided(
                turn.id, EXPAND, CARRIED_CONFIDENCE,
                f"offline: turn layer: carries out {turn.id}, another speaker's turn just before it that states "
                f"the change, in a chat of few speakers without reply links, so it EXPANDs it "
                f"({result.choices[0].reason})")
        if (turn := answered_turn(child, candidates, scope, result)) is not None:
            return decided(
                turn.id, EXPAND, CARRIED_CONFIDENCE,
                f"offline: turn layer: answers {turn.id}, the other speaker's question just before it, which asks "
                f"for no change, in a dialogue without reply links, so it EXPANDs it ({result.choices[0].reason})")
        return result

    def _label_pairs(self, question: Question, child: Message, candidates: Sequence[Message],
                     scope) -> RelationResult:
        challenged, cue = answers_a_challenge(child, candidates), revision_cue(child.text)
        # the child's relevance to each candidate (it embeds them), computed once and only when a layer asks
        relevance = cache(lambda: relevance_of(child, candidates, scope, self.embedder))
        # the state rule's reading, computed once and only where no message carries a reply link
        state_read = cache(lambda: self.state.label_pairs(question, child, candidates, scope))
        revised = cache(lambda: revise(child, candidates, relevance()[0], self.thresholds))  # read at most once
        marked = replies_marked(scope, candidates)
        kind = self.state.reply_less_kind(child, candidates, scope)
        if kind is not None and state_rule.CALIBRATION[kind] >= self.thresholds.confidence:
            if kind not in state_rule.REVISION_WORDED:
                return self._relabelled(state_read(), "state layer (a reading of a chat without reply links at least "
                                                      "as precise on dev as the revision layer)")
            # status wording the revision layer reads too ("Finish slips to 7 July", "All done ✅"): where that
            # layer takes another statement of the slot than the speaker's latest report, the report it replaces
            # is the chain's tip (renovation dev: 2 children, both right; the layer's parents there were the
            # chain's first statement and an earlier report)
            if cue is not None and (found := revised()) is not None \
                    and found.parent.id not in {c.parent_id for c in state_read().choices}:
                return self._relabelled(state_read(), "state layer (a progress report among few speakers without "
                                                      "reply links: the speaker's latest report, not the revision "
                                                      f"layer's {found.parent.id})")
        passed = "no explicit revision wording" if cue is None else \
            "answers a challenge or question: its first pass finds the state challenged" \
            if challenged else "revision wording but no new value for a slot stated earlier"
        if passed.startswith("revision wording"):
            basis = relevance()[1]
            if (found := revised()) is not None:
                return self._update(found.parent.id, self.thresholds.confidence, f"{found.reason}; {basis}")
        # a correction naming the value it replaces ("288 EUR, not 240") under a message that states nothing: the
        # named value tells the slot, whatever the reply answers (tickets dev: 1 decision, right)
        if challenged and cue is not None and NEGATED_VALUE.search(own_text(child.text)):
            scores, basis = relevance()
            found = revise(child, candidates, scores, self.thresholds, named_only=True)
            if found is not None:
                return self._update(found.parent.id, self.thresholds.confidence, f"{found.reason}; {basis}")
        # under a question that states no slot itself, any answer taking the value up; under one that does ("can
        # the room take 55?") only an answer that accepts in so many words: one naming the value discusses it
        # (e-mail dev: one false UPDATE, and no style gained more than one)
        if (found := settles_proposal(child, candidates, accepted=not challenged)) is not None:
            return self._update(found.parent.id, SETTLED_CONFIDENCE, found.reason)
        if (found := settles_own(child, candidates) or answers_own_question(child, candidates)) is not None:
            return self._update(found.parent.id, ANSWERED_CONFIDENCE, found.reason)
        if not marked and unmarked_layer(getattr(self.fitted, "weights_path", None),
                                         size := party(scope, candidates)) == "state":
            return self._relabelled(state_read(),
                                    "state layer (no message carries a reply link and the fitted weights saw no "
                                    f"such conversation of {size} speakers, or did worse there than the state "
                                    "rule)")
        result = self.fitted.label_pairs(question, child, candidates, scope)
        if (settled := first_pass_of(result)) and not first_pass_holds(child, candidates, settled):
            result = replace(self.fitted, slots_first=False).label_pairs(question, child, candidates, scope)
            passed += f"; {FIRST_PASS_GATE}"
        if marked and result.choices and changes_unsaid(child, candidates, result.choices[0]):
            return decided(
                result.choices[0].parent_id, NONE, UNSAID_ROOT_CONFIDENCE,
                f"offline: root layer: a top-level message without revision wording UPDATEs no other speaker's "
                f"message, so it starts a tree ({result.choices[0].reason})")
        if marked and result.choices and carries_out(child, candidates, result.choices[0]):
            return decided(
                child.reply_to, EXPAND, CARRIED_CONFIDENCE,
                f"offline: reply layer: the change was stated in {child.reply_to}, which this reply carries out, so "
                f"it EXPANDs it ({result.choices[0].reason})")
        if marked and result.choices and (found := follows_up_own(
                child, candidates, result.choices[0], lambda: relevance()[0], self.thresholds.min_own_relevance)):
            return self._update(found.parent.id, FOLLOW_UP_CONFIDENCE, f"{found.reason} ({result.choices[0].reason})")
        if any(c.relation != NONE for c in result.choices):
            return self._relabelled(result, f"fitted layer ({passed})")
        if marked and child.reply_to in {p.id for p in candidates} and not states_slot(child.text):
            return decided(
                child.reply_to, EXPAND, REPLY_CONFIDENCE,
                f"offline: reply layer: the fitted model rooted a reply that states nothing new, so it EXPANDs "
                f"its reply target {child.reply_to} ({result.choices[0].reason if result.choices else 'no reason'})"
            )
        if marked and child.reply_to is None and cue is not None:
            if (found := fixes_problem(child, candidates)) is not None:
                return self._update(found.parent.id, POST_CONFIDENCE, found.reason)
            scores, basis = relevance()
            if (found := restates_post(child, candidates, scores, self.thresholds)) is not None:
                return self._update(found.parent.id, POST_CONFIDENCE, f"{found.reason}; {basis}")
            if (found := revises_post(child, candidates, scores)) is not None:
                return self._update(found.parent.id, POST_CONFIDENCE, f"{found.reason}; {basis}")
        if not marked:
            found = state_read()
            if any(c.relation != NONE and c.confidence >= MIN_STATE_CONFIDENCE for c in found.choices):
                return self._relabelled(found, "state layer (the fitted role's ROOT, where no message carries a "
                                               "reply link: its ROOT weights were fitted on chats that mark replies)")
            if (turn := dialogue_turn(child, candidates, scope)) is not None:
                return decided(
                    turn.id, EXPAND, TURN_CONFIDENCE,
                    f"offline: turn layer: in a dialogue without reply links a turn that nothing else places "
                    f"answers the other speaker's turn before it, {turn.id} (the fitted layer ({passed}) rooted it: "
                    f"{result.choices[0].reason if result.choices else 'no reason'})")
        return self._relabelled(result, f"fitted layer ({passed})")

    def _update(self, parent: str, confidence: float, reason: str) -> RelationResult:
        return decided(parent, UPDATE, confidence, f"offline: revision layer: {reason}")

    @staticmethod
    def _relabelled(result: RelationResult, layer: str) -> RelationResult:
        return replace(result, choices=tuple(replace(c, reason=c.reason.replace("offline: ", f"offline: {layer}: ", 1))
                                             for c in result.choices))


def decided(parent: str | None, relation: str, confidence: float, reason: str) -> RelationResult:
    """One layer's decision: a single choice (the parent, the relation, the confidence and why)."""
    return RelationResult(choices=(RelationChoice(parent, relation, confidence, reason),))


# A statement's owner answering a challenge or question about it in a way that settles it ("Then it's 36 talks"
# under "we can fit 36 talk slots, not 40" under the owner's "40 accepted talks"; "ok tuesday then" under "could the
# easy run move to Tuesday?" under "sunday long runs from now on")
SETTLES = re.compile(r"\bthen\b|^\W*(ok(ay)?|fine|agreed|deal|yes|sure|right)\b", re.IGNORECASE)


def _two_up(child: Message, candidates: Sequence[Message]) -> tuple[Message | None, Message | None, str]:
    """(the message the child replies to, the message that one replies to, the child's own text): the question or
    challenge answered and the statement it was about, for the two readings below."""
    by_id = {p.id: p for p in candidates}
    asked = by_id.get(child.reply_to)
    return asked, by_id.get(asked.reply_to) if asked is not None else None, own_text(child.text)


def settles_own(child: Message, candidates: Sequence[Message]) -> Revision | None:
    """A reply to another speaker's message about the replier's own statement (the reply target replies to it) that
    settles it: wording of consequence or assent ("then", "ok", "fine"), no question, and of a kind of value the
    statement holds a value it does not ("36" for "40", "tuesday" for "sunday"), while the value reader reads no new
    state in the reply itself (it keeps a value, objects, or acknowledges: "we keep 08:30 for now", "7 not 6 then").
    The statement need only hold the value: a policy "as agreed on Friday's call" reads as a report, yet it is the
    state the challenge questions.
    The answer changes the statement the challenge was about: an UPDATE of it. A reply that states a new state of
    its own ("75 it is", "Fine. Freeze is 12:00 on the 18th") is left to the fitted model: on dev the annotation
    makes such answers EXPANDs of the question as often as UPDATEs (a speaker answering a challenge to their own
    statement with a new value: pooled 2 right UPDATEs more for 21 built, docs/evaluation.md "Ninth pass")."""
    asked, stated, text = _two_up(child, candidates)
    if stated is None or asked.author == child.author or stated.author != child.author or not text:
        return None
    if "?" in text or not SETTLES.search(text) or states_slot(child.text):
        return None
    if not brings_new(slot_values(child.text), slot_values(stated.text)):
        return None
    return Revision(stated, f"settles {asked.id}, a challenge to the speaker's own statement {stated.id}, with "
                            f"another value of a kind it holds: UPDATE of {stated.id}", (stated.id,))


def answers_own_question(child: Message, candidates: Sequence[Message]) -> Revision | None:
    """A speaker's follow-up to their own question or challenge about another speaker's statement, which states a
    state and asks nothing: the asker settles what they asked ("Which roles go?" -> "Dropping the SRE req and one
    platform req. So platform 2, mobile 4."; "does B work on mobile tho?" -> "they want B after all ... go with the
    illustration instead"), an UPDATE of the statement asked about. Dev: 3 such children over the eleven
    reply-marked corpora, all gold UPDATEs of that statement (one already built by the layer)."""
    asked, stated, text = _two_up(child, candidates)
    if stated is None or asked.author != child.author or stated.author == child.author or not text:
        return None
    if "?" in text or not ("?" in own_text(asked.text) or cues(asked.text).challenge) or not states_slot(child.text):
        return None
    return Revision(stated, f"settles {asked.id}, the speaker's own question about {stated.id}: UPDATE of "
                            f"{stated.id}", (stated.id,))
