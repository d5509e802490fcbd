"""Offline relation roles for Temporal Memory Structuring (Eq. 5, App. K), without a language model.

- `StateRelation` ("offline:state-relation", variant `state-structuring`; the default `fitted` role, tmem/models/
  relation_learned.py, weighs its choice with the other signals): looks for the state a message changes. A child that
  changes a state (revision wording, the answer to a challenge, or the same slot stated with other values) is an UPDATE
  of the earlier same-topic message that states that state, found by embedding similarity and shared content,
  whichever message the child replies to. Otherwise the child EXPANDs what it replies to, answers, addresses or
  continues, or the state it elaborates; otherwise it is a ROOT. Every choice carries its reason.
- `CueOverlapRelation` ("offline:cue-overlap-relation"): the earlier rule (a reply link, a revision cue with
  shared words, an addressee, a support cue, a continuation), kept as the named baseline
  (`structuring.relation_rule = cue-overlap`, variant `cue-overlap-structuring`).

Both are deterministic and marked offline. They read only the child, its Eq. 4 candidates, the scope's units,
IDF and (StateRelation) the scope's message vectors of the packaged embedder, which discovery has computed anyway.
"""
from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from tmem.models.base import RelationResult
from tmem.models.state_values import DECISIVE, REVISION_CUES, STATE_CHANGE, SUPPORT_CUES, Cues, cues, decisive  # noqa: F401
from tmem.types import EXPAND, NONE, UPDATE, Message, Question, RelationChoice

_IDF: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # scope -> {unit: idf}; a scope's IDF is fixed


def _idf(scope) -> Callable[[str], float]:
    try:
        cache = _IDF.setdefault(scope, {})
    except TypeError:  # not weak-referenceable (a test double): no cache
        return scope.idf

    def idf(unit: str) -> float:
        value = cache.get(unit)
        if value is None:
            value = cache[unit] = scope.idf(unit)
        return value
    return idf


# "No, ..." to a challenge rejects the change it asks for: the state stands, the answer elaborates it
_REJECTS = re.compile(r"^\W*(no|nope)\b", re.IGNORECASE)
_FOLLOW_UP = re.compile(r"^\W*(\w+[,.!]\s+)?(i'll|i will|i can|i'm|will do|thank|understood|good|ok\b|fine\b)",
                        re.IGNORECASE)


def _replaced(child: frozenset[str], state: frozenset[str]) -> str:
    """The child's values that replace the state's: of one kind (numbers, names), the child drops some of the
    state's values and brings new ones. An elaboration keeps the state's values and adds detail; '' when none."""
    numbers = {v for v in child if v[:1].isdigit()}
    # names (a vendor, a tool, a person) count only when the child states no number: next to numbers they are
    # mostly added detail
    mine = numbers
    theirs = {v for v in state if v[:1].isdigit() == bool(numbers)}
    return ", ".join(sorted(mine - theirs)[:3]) if mine - theirs and theirs - mine else ""


_MASS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # scope -> {message id: its units' IDF mass}


def _weakable(scope) -> bool:
    try:
        weakref.ref(scope)
        return True
    except TypeError:
        return False


def weighted_overlap(a: set[str], b: set[str], scope) -> float:
    """Share of the smaller side's IDF mass that the two unit sets have in common (0..1)."""
    if not a or not b:
        return 0.0
    idf = _idf(scope)
    shared = sum(idf(u) for u in a & b)
    return shared / min(sum(idf(u) for u in a), sum(idf(u) for u in b))


def candidate_overlaps(child: Message, candidates: Sequence[Message], scope) -> list[float]:
    """`weighted_overlap` of the child with each candidate, each candidate's IDF mass computed once per scope."""
    idf, masses = _idf(scope), _MASS.setdefault(scope, {}) if _weakable(scope) else {}
    child_units = scope.units_of(child)
    child_mass = sum(idf(u) for u in child_units)
    out = []
    for p in candidates:
        units = scope.units_of(p)
        mass = masses.get(p.id)
        if mass is None:
            mass = masses[p.id] = sum(idf(u) for u in units)
        out.append(sum(idf(u) for u in child_units & units) / min(child_mass, mass) if child_mass and mass else 0.0)
    return out


def addressed_names(text: str) -> set[str]:
    """Names the message addresses: '@name' anywhere, or 'name:' / 'name,' at the start (chat convention)."""
    names = {m.casefold() for m in re.findall(r"@([\w.\-]+)", text)}
    head = re.match(r"\s*@?([^\s:,]+)[:,]\s", text)
    if head:
        names.add(head.group(1).casefold())
    return names


def mentioned_authors(text: str, authors: set[str]) -> set[str]:
    """Authors (casefolded, 3+ characters) the text names anywhere as a word: 'nick I think...', '<nick>',
    'nick>'; chat users often address without the 'nick:' convention."""
    words = set(re.findall(r"[\w.\-|\[\]^`{}]+", text.casefold()))
    return {a for a in authors if len(a) >= 3 and a in words}


# Share of right edges per kind of decision on the dev data (IRC dev + data/cases/dev, `python -m tmem links
# --details`): what a decision of that kind is worth. ROOT: the gold is a root when nothing qualified.
CALIBRATION = {"reply": 0.85, "answers": 0.7, "addresses": 0.65, "continues": 0.55, "own exchange": 0.5,
               "elaborates": 0.35, "resolves": 0.6, "cue": 0.45, "values": 0.4, "root": 0.65}


@dataclass(frozen=True)
class StateRelation:
    """Finds the state a child changes (UPDATE), the state or turn it elaborates (EXPAND), or none (ROOT).

    relevance(p) = `similarity_weight` * cosine(child, p) + (1 - `similarity_weight`) * IDF-weighted overlap
    (overlap alone, announced in the reason, when no embedder is given).
    UPDATE (the child states a new state, read per sentence by tmem.models.state_values, and asks nothing):
    a decision answering a challenge (not "No, ...") changes the state the challenge is about; a reply to a state
    with replaced values (some of its numbers dropped, new ones brought) changes that state; else, with relevance
    >= `min_update_relevance`, a state-change cue or replaced values change the current state (the latest
    matching stated state), whether or not the child replies to it.
    EXPAND, in order: the reply target; the latest message of an author the child addresses; the message that
    addressed the child's author (the answer); the author's own message right before (a continuation); the
    candidate it elaborates: relevance >= `min_expand_relevance`, preferring stated states and later messages.
    Confidence: the dev accuracy of the decision's kind (CALIBRATION; docs/evaluation.md gives the reliability
    curve)."""

    similarity_weight: float = 0.6
    min_update_relevance: float = 0.25
    min_state_relevance: float = 0.25
    recency_margin: float = 0.1
    min_expand_relevance: float = 0.45
    episode_hours: float = 12.0
    continuation_minutes: float = 5.0
    own_thread_minutes: float = 5.0
    decisive_bonus: float = 0.1
    new_decision_relevance: float = 0.7
    numbers_rule: bool = True
    expand_any: bool = False  # relevance alone links only to a stated state (App. K: no topical links)
    mentions: bool = True
    embedder: object | None = field(default=None, compare=False)
    backend: str = "offline:state-relation"
    offline: bool = True

    def with_embedder(self, embedder) -> StateRelation:
        return replace(self, embedder=embedder)

    def _similarities(self, child: Message, candidates: Sequence[Message], scope) -> np.ndarray | None:
        """cosine(child, p) from the scope's message vectors (computed once per scope and embedder)."""
        if self.embedder is None or not hasattr(scope, "vectors"):
            return None
        rows = [scope.position.get(m.id) for m in (child, *candidates)]
        if any(r is None for r in rows):
            return None
        try:
            vectors = scope.vectors_at(self.embedder, rows) if hasattr(scope, "vectors_at") else \
                scope.vectors(self.embedder)[rows]  # on demand: these messages only
        except Exception:  # an unavailable embedder: lexical relevance only, said so in every reason
            return None
        return vectors[1:] @ vectors[0]

    def label_pairs(self, question: Question, child: Message, candidates: Sequence[Message],
                    scope, relevance: tuple | None = None) -> RelationResult:
        """`relevance` = (cosines or None, overlaps) when the caller computed them already (the fitted role)."""
        if not candidates:
            return RelationResult()
        c = cues(child.text)
        sims, overlaps = relevance if relevance is not None else (
            self._similarities(child, candidates, scope), candidate_overlaps(child, candidates, scope))
        w = self.similarity_weight if sims is not None else 0.0
        basis = "similarity+overlap" if sims is not None else "overlap only (no embedder)"
        info = []
        for i, (p, overlap) in enumerate(zip(candidates, overlaps)):
            sim = float(sims[i]) if sims is not None else 0.0
            info.append((p, w * sim + (1 - w) * overlap, sim, overlap, cues(p.text)))
        by_id = {p.id: x for p, *x in info}

        # -- the current state on the child's object: among the candidates that state a state, the latest one whose
        # relevance is within `recency_margin` of the best (a later revision supersedes what it revises)
        current = self._current(info)
        reply = by_id.get(child.reply_to) if child.reply_to else None
        reply_msg = next((p for p in candidates if p.id == child.reply_to), None) if reply else None

        # -- UPDATE: the child states a state (not only a question, objection or reaffirmation); its parent is the
        # state it changes, whatever it replies to
        update = None
        # an acknowledgement, a support or a commitment to act ("Works for me. I'll add ...") executes a state
        answer = bool(SUPPORT_CUES.match(child.text) or _FOLLOW_UP.search(child.text))
        if c.new_state and not c.challenge:
            cue = c.change or c.revision
            if reply_msg is not None and (reply[3].challenge or reply[3].objection) and not reply[3].new_state \
                    and not _REJECTS.match(child.text):
                # a decision answering a challenge resolves it: it changes the state the challenge was about
                asked = next((x for x in info if x[0].id == reply_msg.reply_to), None)
                target = (asked if asked is not None and asked[4].new_state
                          else self._current([x for x in info if x[0].id != reply_msg.id]))
                if target is not None:
                    update = (target, "resolves", f"a decision answering the challenge {reply_msg.id}: changes "
                                                  f"the state {target[0].id}")
            elif reply_msg is not None and reply[3].new_state and not reply[3].challenge and not answer \
                    and reply[0] >= self.min_update_relevance and (changed := _replaced(c.values, reply[3].values)):
                update = (next(x for x in info if x[0].id == reply_msg.id), "values",
                          f"replies to the state {reply_msg.id} with other values ({changed})")
            if update is None and current is not None and current[1] >= self.min_update_relevance:
                if cue:
                    update = (current, "cue", f"changes the current state ('{cue}')")
                elif self.numbers_rule and not answer and (changed := _replaced(c.values, current[4].values)):
                    update = (current, "values", f"states other values ({changed}) than the current state")
        choices: list[RelationChoice] = []
        if update is not None:
            (p, r, s_, o, _), kind, why = update
            choices.append(RelationChoice(p.id, UPDATE, self.confidence(kind, r),
                                          f"offline: {why}; relevance {r:.2f} ({basis}: sim {s_:.2f}, "
                                          f"overlap {o:.2f})"))
            return RelationResult(choices=tuple(choices))

        # -- EXPAND: explicit conversational links first, then the current state the child elaborates
        expand = self._explicit_expand(child, candidates, by_id)
        if expand is None:
            best = max(info, key=lambda x: (x[1], x[0].timestamp))
            # a decision settled without a reply or a change cue opens its own tree unless it is near-identical
            floor = (self.new_decision_relevance if DECISIVE.search(child.text) and not c.change and not c.revision
                     else self.min_expand_relevance)
            target = current if current is not None and current[1] >= floor else None
            # a challenge or objection is about something even when no stated state qualifies
            if target is None and (self.expand_any or c.challenge or c.objection) \
                    and best[1] >= self.min_expand_relevance:
                target = best
            if target is not None:
                p, r, s_, o, _ = target
                what = "the current state" if target is current else "the message"
                expand = (p, "elaborates", r, f"elaborates {what} {p.id}; relevance {r:.2f} ({basis}: "
                                              f"sim {s_:.2f}, overlap {o:.2f})")
            elif (own := self._own_thread(child, candidates, by_id)) is not None:
                expand = own
            else:
                p, r = best[0], best[1]
                why = (f"best candidate {p.id} relevance {r:.2f} < {self.min_expand_relevance}" if current is None
                       or r < self.min_expand_relevance else f"{p.id} (relevance {r:.2f}) states no state")
                choices.append(RelationChoice(p.id, NONE, self.confidence("root", 1 - r),
                                              f"offline: {why} ({basis}); no reply, address or continuation: "
                                              f"no direct parent"))
        if expand is not None:
            p, kind, r, reason = expand
            choices.append(RelationChoice(p.id, EXPAND, self.confidence(kind, r), f"offline: {reason}"))
        return RelationResult(choices=tuple(choices))

    def _current(self, info: list) -> tuple | None:
        """The candidate stating the current state: among those that state a state (not a question), the latest
        whose relevance is within `recency_margin` of the best one's and at least `min_state_relevance`."""
        states = [x for x in info if x[4].states and not x[4].challenge]
        if not states:
            return None
        weight = {x[0].id: x[1] + self.decisive_bonus * decisive(x[0].text) for x in states}
        top = max(weight.values())
        near = [x for x in states if weight[x[0].id] >= max(top - self.recency_margin, self.min_state_relevance)]
        # a reaffirmation ("stays at 8k") restates the state it keeps: the state itself is the current one, unless
        # the reaffirmation is all there is
        near = [x for x in near if x[4].new_state] or near
        return max(near, key=lambda x: x[0].timestamp) if near else None

    def _explicit_expand(self, child: Message, candidates: Sequence[Message], by_id) -> tuple | None:
        """(parent, score, reason) for a reply link, an addressee, an answer or a continuation; else None."""
        if child.reply_to in by_id:
            r = by_id[child.reply_to][0]
            parent = next(p for p in candidates if p.id == child.reply_to)
            return parent, "reply", r, f"reply link; relevance {r:.2f}"
        in_episode = [p for p in candidates
                      if (child.timestamp - p.timestamp).total_seconds() <= 3600 * self.episode_hours]
        addressed = addressed_names(child.text)
        if self.mentions:
            others = {p.author.casefold() for p in in_episode if p.author and p.author != child.author}
            addressed |= mentioned_authors(child.text, others)
        if addressed:
            named = [p for p in in_episode if p.author and p.author.casefold() in addressed]
            if named:
                p = max(named, key=lambda m: m.timestamp)
                r = by_id[p.id][0]
                return p, "addresses", r, f"addresses {p.author} (their latest message); relevance {r:.2f}"
        if child.author:
            spoke_last = max((m.timestamp for m in candidates if m.author == child.author), default=None)
            asked = [p for p in in_episode if p.author != child.author
                     and child.author.casefold() in addressed_names(p.text)
                     and (spoke_last is None or spoke_last < p.timestamp)]
            if asked:
                p = max(asked, key=lambda m: m.timestamp)
                r = by_id[p.id][0]
                return p, "answers", r, f"answers {p.author}, who addressed {child.author}; relevance {r:.2f}"
        latest = max(candidates, key=lambda m: m.timestamp)
        if (latest.author and latest.author == child.author and not addressed
                and (child.timestamp - latest.timestamp).total_seconds() <= 60 * self.continuation_minutes):
            r = by_id[latest.id][0]
            return latest, "continues", r, f"continues {latest.author}'s own message; relevance {r:.2f}"
        return None

    def _own_thread(self, child: Message, candidates: Sequence[Message], by_id) -> tuple | None:
        """The author's own latest message within `own_thread_minutes`: in a fast chat a speaker who addresses
        nobody most often continues the exchange they were in."""
        if not child.author or not self.own_thread_minutes:
            return None
        own = [p for p in candidates if p.author == child.author
               and (child.timestamp - p.timestamp).total_seconds() <= 60 * self.own_thread_minutes]
        if not own:
            return None
        p = max(own, key=lambda m: m.timestamp)
        r = by_id[p.id][0]
        return p, "own exchange", r, (f"continues {p.author}'s own exchange (their latest message, within "
                                      f"{self.own_thread_minutes:g} min); relevance {r:.2f}")

    @staticmethod
    def confidence(kind: str, relevance: float) -> float:
        """P(right edge): the dev accuracy of the decision's kind (IRC dev and the dev cases pooled,
        docs/evaluation.md), nudged by relevance within +-0.05 so that closer matches rank higher."""
        return round(min(0.99, max(0.01, CALIBRATION[kind] + 0.1 * (min(max(relevance, 0.0), 1.0) - 0.5))), 4)


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
