"""The default offline relation role ("offline:revision-first", `structuring.relation_rule = revision-first`):
the precision-first revision layer (tmem/models/relation/revision.py) decides first, the fitted model
(tmem/models/relation/fitted.py, variant `fitted-structuring` alone) decides the rest, unchanged. Each decision's
reason names the layer that made it and why; an offline stand-in for a language-model relation role."""
from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from tmem.models.base import RelationResult
from tmem.models.relation.features import SIMILARITY_WEIGHT
from tmem.models.relation.fitted import FittedRelation
from tmem.models.relation.revision import Thresholds, answers_a_challenge, revise, revision_cue
from tmem.models.relation.signals import candidate_overlaps
from tmem.models.relation.state import StateRelation
from tmem.types import NONE, UPDATE, Message, Question, RelationChoice

MIN_STATE_CONFIDENCE = 0.5  # the state rule's parents that replace a fitted ROOT where replies are unmarked: the
# kinds right at least half the time on dev (addressee, answer, continuation, own exchange; not a bare cue or value
# match). IRC dev, where the shipped weights root 365 children: its 87 cue/value parents there were right 24 times,
# the fitted ROOT 27; with IRC dev held out (weights fitted on the typed styles) the fitted role roots 97 % of it.
_MARKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # scope -> whether any message replies


def marks_replies(scope, candidates: Sequence[Message]) -> bool:
    """Whether the conversation records reply links at all (some message of the scope, else of the candidates,
    replies to another): a chat log without them (IRC, a transcript) says nothing by a missing link."""
    messages = getattr(scope, "messages", None) or candidates
    try:
        known = _MARKS.get(scope)
    except TypeError:  # not weak-referenceable (a test double): no cache
        return any(m.reply_to for m in messages)
    if known is None:
        known = _MARKS[scope] = any(m.reply_to for m in messages)
    return known


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
        passed = "no explicit revision wording" if revision_cue(child.text) is None else \
            "answers a challenge or question: its first pass finds the state challenged" \
            if answers_a_challenge(child, candidates) else "revision wording but no new value for a slot stated earlier"
        if passed.startswith("revision wording"):
            relevance, basis = relevance_of(child, candidates, scope, self.embedder)
            found = revise(child, candidates, relevance, self.thresholds)
            if found is not None:
                return RelationResult(choices=(RelationChoice(
                    found.parent.id, UPDATE, self.thresholds.confidence,
                    f"offline: revision layer: {found.reason}; {basis}"),))
        result = self.fitted.label_pairs(question, child, candidates, scope)
        if all(c.relation == NONE for c in result.choices) and not marks_replies(scope, candidates):
            found = self.state.label_pairs(question, child, candidates, scope)
            if any(c.relation != NONE and c.confidence >= MIN_STATE_CONFIDENCE for c in found.choices):
                return self._relabelled(found, "state layer (the fitted role's ROOT, where no message carries a "
                                               "reply link: its ROOT weights were fitted on chats that mark replies)")
        return self._relabelled(result, f"fitted layer ({passed})")

    @staticmethod
    def _relabelled(result: RelationResult, layer: str) -> RelationResult:
        return replace(result, choices=tuple(replace(c, reason=c.reason.replace("offline: ", f"offline: {layer}: ", 1))
                                             for c in result.choices))
