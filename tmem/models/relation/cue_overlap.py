"""The cue-overlap baseline relation rule ("offline:cue-overlap-relation", `structuring.relation_rule = cue-overlap`,
variant `cue-overlap-structuring`): the earlier rule (a reply link, a revision cue with shared words, an addressee,
a support cue, a continuation), kept as the named baseline. Deterministic, lexical only, marked offline."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tmem.models.base import RelationResult
from tmem.models.relation.signals import addressed_names, weighted_overlap
from tmem.models.relation.values import REVISION_CUES, SUPPORT_CUES
from tmem.types import EXPAND, UPDATE, Message, Question, RelationChoice


@dataclass(frozen=True)
class CueOverlapRelation:
    """The baseline: App. K's direct-relation gate approximated with explicit signals only.
    UPDATE: a revision cue in the child about the same object as the parent (IDF-weighted overlap).
    EXPAND: a reply link; or, within one episode (`episode_hours`), the child addresses the parent's author by
    name, or the parent addressed the child's author (the child is the addressee's answer), or the child carries an
    answer/confirmation cue about the same object; or the child continues its author's own message right before it
    (no other candidate between, within `continuation_minutes`, addressing nobody): one thought split over lines.
    Shared vocabulary, topic or chronology alone give NONE (the child roots a new tree)."""

    min_update_overlap: float = 0.12
    min_support_overlap: float = 0.15
    episode_hours: float = 12.0
    continuation_minutes: float = 5.0
    backend: str = "offline:cue-overlap-relation"
    offline: bool = True

    @classmethod
    def from_config(cls, config, embedder=None) -> CueOverlapRelation:
        return cls()  # its thresholds are its own (lexical only: no embedder)

    def with_embedder(self, embedder) -> CueOverlapRelation:
        return self  # lexical only

    def label_pairs(self, question: Question, child: Message, candidates: Sequence[Message],
                    scope) -> RelationResult:
        child_units = scope.units_of(child)
        revision = REVISION_CUES.search(child.text)
        support = SUPPORT_CUES.search(child.text)
        addressed = addressed_names(child.text)
        # the child's author's last earlier message: an addressee answers once, later messages continue their own
        spoke_last = max((m.timestamp for m in candidates if m.author and m.author == child.author), default=None)
        latest = max(candidates, key=lambda m: m.timestamp, default=None)
        continues = (latest is not None and latest.author and latest.author == child.author and not addressed
                     and (child.timestamp - latest.timestamp).total_seconds() <= 60 * self.continuation_minutes)
        choices = []
        for parent in candidates:
            overlap = weighted_overlap(child_units, scope.units_of(parent), scope)
            hours = (child.timestamp - parent.timestamp).total_seconds() / 3600
            recency = 0.05 * min(1.0, hours / 24)
            same_episode = hours <= self.episode_hours
            choice = None
            if child.reply_to == parent.id:
                relation = UPDATE if revision and overlap >= self.min_update_overlap else EXPAND
                choice = (relation, 0.9 + 0.05 * overlap, f"reply link; overlap {overlap:.2f}")
            elif revision and overlap >= self.min_update_overlap:
                choice = (UPDATE, 0.5 + 0.4 * overlap, f"revision cue '{revision.group(0)}'; overlap {overlap:.2f}")
            elif same_episode and parent.author and parent.author.casefold() in addressed:
                choice = (EXPAND, 0.6 + 0.2 * overlap, f"addresses {parent.author}; overlap {overlap:.2f}")
            elif same_episode and child.author and child.author.casefold() in addressed_names(parent.text) \
                    and parent.author != child.author and (spoke_last is None or spoke_last < parent.timestamp):
                choice = (EXPAND, 0.5 + 0.2 * overlap, f"answers {parent.author or 'the parent'}, who addressed "
                                                       f"{child.author}; overlap {overlap:.2f}")
            elif same_episode and support and overlap >= self.min_support_overlap:
                choice = (EXPAND, 0.4 + 0.4 * overlap, f"support cue '{support.group(0)}'; overlap {overlap:.2f}")
            elif continues and parent is latest:
                choice = (EXPAND, 0.35 + 0.2 * overlap, f"continues {parent.author}'s own message; "
                                                        f"overlap {overlap:.2f}")
            if choice:
                relation, confidence, reason = choice
                choices.append(RelationChoice(parent.id, relation, round(confidence - recency, 4),
                                              f"offline: {reason}"))
        return RelationResult(choices=tuple(choices))
