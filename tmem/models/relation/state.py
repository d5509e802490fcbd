"""The state-seeking offline relation rule ("offline:state-relation", variant `state-structuring`; the default
`fitted` role, tmem/models/relation/fitted.py, weighs its choice with the other signals): looks for the state a
message changes. A child that changes a state (revision wording, the answer to a challenge, or the same slot stated
with other values) is an UPDATE of the earlier same-topic message that states that state, found by embedding
similarity and shared content, whichever message the child replies to. Otherwise the child EXPANDs what it replies
to, answers, addresses or continues, or the state it elaborates; otherwise it is a ROOT. Where a chat marks no
reply link (`reply_less`, `_reply_less`), a report echoing the command before it, a value taken away or a field set
again, an agreement and a quote are read from the words and the order of the turns; where few people write
(`signals.party`), also a progress report (the same speaker's latest report), a question or thanks to a first name
that stands for an author (`signals.first_names`) and a turn that takes up the turn just before it. Every choice
carries its reason.
Deterministic and marked offline: it reads only the child, its Eq. 4 candidates, the scope's units, IDF and message
vectors of the packaged embedder, which discovery has computed anyway.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from tmem.models.base import RelationResult
from tmem.models.relation.revision import own_text
from tmem.models.relation.signals import (
    AGREES,
    FOLLOW_UP,
    PROGRESS,
    REJECTS,
    addressed_names,
    candidate_overlaps,
    changed_fields,
    command_verbs,
    first_names,
    mentioned_authors,
    names_value,
    party,
    quoted_message,
    removed_values,
    replies_marked,
    spoken_to,
    thanked,
    turn_before,
)
from tmem.models.relation.values import DECISIVE, SUPPORT_CUES, cues, decisive
from tmem.types import EXPAND, NONE, UPDATE, Message, Question, RelationChoice


def _replaced(child: frozenset[str], state: frozenset[str]) -> str:
    """The child's values that replace the state's: of one kind (numbers, names), the child drops some of the
    state's values and brings new ones. An elaboration keeps the state's values and adds detail; '' when none."""
    numbers = {v for v in child if v[:1].isdigit()}
    # names (a vendor, a tool, a person) count only when the child states no number: next to numbers they are
    # mostly added detail
    mine = numbers
    theirs = {v for v in state if v[:1].isdigit() == bool(numbers)}
    return ", ".join(sorted(mine - theirs)[:3]) if mine - theirs and theirs - mine else ""


# Share of right edges per kind of decision on the dev data (IRC dev + data/cases/dev, `python -m tmem links
# --details`): what a decision of that kind is worth. ROOT: the gold is a root when nothing qualified.
CALIBRATION = {"reply": 0.85, "answers": 0.7, "addresses": 0.65, "continues": 0.55, "own exchange": 0.5,
               "elaborates": 0.35, "resolves": 0.6, "cue": 0.45, "values": 0.4, "root": 0.65,
               # chats without reply links (`_reply_less`, IRC dev + oss dev): a field set or a value taken away
               # 13 of 15 right (all on oss), a report echoing a command 1 of 1, a "yes" to a question or request
               # 7 of 12, any other agreement in an open log of many 5 of 18 (below the default's
               # MIN_STATE_CONFIDENCE: not taken there); among few speakers (oss + renovation dev, docs/evaluation.md
               # "Reply-less chats, second pass"): an agreement 14 of 20, the turn before 16 of 27, a progress report
               # 8 of 9; a quote 4 of 5 (oss)
               "field": 0.85, "echoes": 0.6, "agrees": 0.3, "accepts": 0.6, "turn before": 0.6,
               "quotes": 0.75, "progress": 0.85, "agrees among few": 0.7}
# Readings of a chat without reply links made from wording the revision layer reads too (a status word: "delayed",
# "done"): they do not decide before that layer where it takes the same parent (revision_first takes them where that
# layer takes another statement, or its fitted layer roots); a field line or a command ("field") is bookkeeping that
# layer cannot read, and decides first
REVISION_WORDED = frozenset({"progress"})


@dataclass(frozen=True)
class StateRelation:
    """Finds the state a child changes (UPDATE), the state or turn it elaborates (EXPAND), or none (ROOT).

    relevance(p) = `similarity_weight` * cosine(child, p) + (1 - `similarity_weight`) * IDF-weighted overlap
    (overlap alone, announced in the reason, when no embedder is given).
    UPDATE (the child states a new state, read per sentence by tmem.models.relation.values, and asks nothing):
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
    turn_minutes: float = 180.0  # a few-party chat without reply links: a turn within this time of another
    # speaker's turn, that nothing else places, takes it up (`signals.turn_before`)
    reply_less: bool = False  # the readings of a chat that marks no reply link (`_reply_less`); on for the state
    # role and the default's state layer (from_config), off in the fitted role's features, fitted without them
    embedder: object | None = field(default=None, compare=False)
    backend: str = "offline:state-relation"
    offline: bool = True

    @classmethod
    def from_config(cls, config, embedder=None) -> StateRelation:
        return cls(min_update_relevance=config.update_relevance, min_expand_relevance=config.expand_relevance,
                   reply_less=True, embedder=embedder)

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
        reply_less = self.reply_less and not replies_marked(scope, candidates)
        if reply_less:
            found = self._reply_less(child, candidates, scope)
            if found is not None:
                p, relation, kind, why = found
                r, s_, o = by_id[p.id][:3]
                return RelationResult(choices=(RelationChoice(
                    p.id, relation, self.confidence(kind, r),
                    f"offline: {why}; relevance {r:.2f} ({basis}: sim {s_:.2f}, overlap {o:.2f})"),))

        # -- the current state on the child's object: among the candidates that state a state, the latest one whose
        # relevance is within `recency_margin` of the best (a later revision supersedes what it revises)
        current = self._current(info)
        reply = by_id.get(child.reply_to) if child.reply_to else None
        reply_msg = next((p for p in candidates if p.id == child.reply_to), None) if reply else None

        # -- UPDATE: the child states a state (not only a question, objection or reaffirmation); its parent is the
        # state it changes, whatever it replies to
        update = None
        # an acknowledgement, a support or a commitment to act ("Works for me. I'll add ...") executes a state
        answer = bool(SUPPORT_CUES.match(child.text) or FOLLOW_UP.search(child.text))
        if c.new_state and not c.challenge:
            cue = c.change or c.revision
            if reply_msg is not None and (reply[3].challenge or reply[3].objection) and not reply[3].new_state \
                    and not REJECTS.match(child.text):
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
        expand = self._explicit_expand(child, candidates, by_id, reply_less, scope)
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
            elif reply_less and party(scope, candidates) == "few" and \
                    (turn := turn_before(child, candidates, self.turn_minutes)) is not None:
                r = by_id[turn.id][0]
                expand = (turn, "turn before", r, f"takes up {turn.id}, another speaker's turn just before it in "
                                                  f"a chat of few speakers without reply links; relevance {r:.2f}")
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

    def _explicit_expand(self, child: Message, candidates: Sequence[Message], by_id,
                         reply_less: bool = False, scope=None) -> tuple | None:
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
        if reply_less and party(scope, candidates) == "few" and (names := first_names(scope, candidates)) \
                and turn_before(child, candidates, self.turn_minutes) is None:
            # a question or thanks to a first name standing for an author's handle ("Sophie, any chance ...?"),
            # however long ago they last wrote (a supplier answers a job chat days apart); a decision addressed to
            # someone ("Steve, for the stair runner we want ...") opens a subject of its own; where another speaker
            # wrote just before, the child takes that turn up ("Gary will the 26th work?" after "with you 26 June")
            text = own_text(child.text) or child.text
            called = {names[n.casefold()] for n in spoken_to(text)
                      if n.casefold() in names and names[n.casefold()] != child.author} \
                if "?" in text or thanked(text) else set()
            named = [p for p in candidates if p.author in called]
            if named:
                p = max(named, key=lambda m: m.timestamp)
                r = by_id[p.id][0]
                return p, "addresses", r, (f"speaks to {p.author} by a first name that stands for them in this "
                                           f"conversation (their latest message); relevance {r:.2f}")
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
        if reply_less and (p := quoted_message(child, candidates)) is not None:
            r = by_id[p.id][0]
            return p, "quotes", r, f"quotes {p.id}, the latest message with the lines it quotes; relevance {r:.2f}"
        if reply_less and (p := self._agrees(child, candidates)) is not None:
            r = by_id[p.id][0]
            if cues(own_text(p.text)).challenge:  # "yes" to a question or a request: the answer to it
                return p, "accepts", r, f"answers {p.id}, the question or request before it; relevance {r:.2f}"
            kind = "agrees among few" if party(scope, candidates) == "few" else "agrees"
            return p, kind, r, f"agrees with or takes up {p.id}, the turn before it; relevance {r:.2f}"
        latest = max(candidates, key=lambda m: m.timestamp)
        if (latest.author and latest.author == child.author and not addressed
                and (child.timestamp - latest.timestamp).total_seconds() <= 60 * self.continuation_minutes):
            r = by_id[latest.id][0]
            return latest, "continues", r, f"continues {latest.author}'s own message; relevance {r:.2f}"
        return None

    def reply_less_kind(self, child: Message, candidates: Sequence[Message], scope) -> str | None:
        """The kind of reading `_reply_less` makes of the child ("echoes", "field"), where this rule reads chats
        without reply links and the conversation marks none; else None. revision-first lets a kind whose dev
        precision (`CALIBRATION`) is at least its revision layer's decide first."""
        if not (self.reply_less and candidates and not replies_marked(scope, candidates)):
            return None
        found = self._reply_less(child, candidates, scope)
        return found[2] if found is not None else None

    def _reply_less(self, child: Message, candidates: Sequence[Message], scope=None) -> tuple | None:
        """(parent, relation, kind, reason) where a chat marks no reply link and the child's words say what it
        answers; else None. In order: a report echoing the command typed just before it ("/reopen" -> "Issue
        reopened by ...") EXPANDs the command ("echoes"); a message taking away a value by name ("/remove-label
        needs-triage", "Label `confirmed` removed") UPDATEs the latest message that set that value, and one setting
        a field again ("Label `in progress` added") the latest message that set or cleared that field ("field");
        among few speakers (`party`), a progress report that asks nothing ("First fix done ✅", `PROGRESS`) UPDATEs
        the same speaker's latest report ("progress"). A quote and an agreement addressing no one are read later,
        after the addressee and answer readings (`_explicit_expand`, `quoted_message`, `_agrees`), and the turn
        before last of all (`turn_before`)."""
        text = own_text(child.text) or child.text
        ordered = sorted(candidates, key=lambda m: m.timestamp)
        others = [p for p in ordered if p.author != child.author]
        if others and (verbs := command_verbs(others[-1].text)) and not command_verbs(text):
            words = set(re.findall(r"[a-z][\w-]+", text.casefold()))
            echoed = sorted(v for v in verbs if any(w.startswith(v) for w in words))
            if echoed:
                return others[-1], EXPAND, "echoes", (f"reports the command '/{echoed[0]}' of {others[-1].id}, "
                                                      f"typed just before it")
        for value in sorted(removed_values(text)):
            setters = [p for p in ordered if names_value(own_text(p.text) or p.text, value)
                       and value not in removed_values(p.text)]
            # the message that set it in a field or a command, before one that only mentions it ("not stale")
            setters = [p for p in setters if changed_fields(p.text)] or setters
            if setters:
                return setters[-1], UPDATE, "field", f"takes away '{value}', which {setters[-1].id} set"
        if fields := changed_fields(text):
            setters = [p for p in ordered if fields & changed_fields(p.text)]
            if setters:
                field = sorted(fields & changed_fields(setters[-1].text))[0]
                return setters[-1], UPDATE, "field", (f"sets the field '{field}' again, which {setters[-1].id} "
                                                      f"set last")
        # among few speakers, a progress report replaces the same speaker's latest report on the job
        if PROGRESS.search(text) and "?" not in text and party(scope, candidates) == "few":
            reports = [p for p in ordered if p.author == child.author and PROGRESS.search(own_text(p.text) or p.text)]
            if reports:
                return reports[-1], UPDATE, "progress", (f"reports progress again, replacing {child.author}'s latest "
                                                         f"report {reports[-1].id}")
        return None

    @staticmethod
    def _agrees(child: Message, candidates: Sequence[Message]) -> Message | None:
        """Where a chat marks no reply link: the turn an agreement, acceptance or thanks addressing no one answers
        ("+1", "sure, got it", "fine, we'll run it"): the latest turn of another speaker that says something of its
        own (not itself an agreement, nor only a quote); None when the child says it changes something or has more
        to say than a line."""
        text = own_text(child.text) or child.text
        agrees = AGREES.match(text)
        if agrees is None or len([line for line in text.splitlines() if line.strip()]) > 1:
            return None  # a turn of several lines says more than that it agrees (a greeting that also sets labels)
        c = cues(text)
        # "sure, got it" addresses no one: its opening word is no name ("name, ..." is the chat convention)
        if addressed_names(text) - {agrees.group(0).strip(" ,:").casefold()} or c.change or c.revision:
            return None
        said = [p for p in sorted(candidates, key=lambda m: m.timestamp) if p.author != child.author
                and (own_text(p.text) or "").strip() and not AGREES.match(own_text(p.text))]
        return said[-1] if said else None

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
