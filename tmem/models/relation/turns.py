"""Readings of a conversation's turn structure for the default relation role (revision_first.py): where a chat's
reply links name threads rather than messages (`threaded`), and, where it marks no reply link, the turn just before
a child standing for its reply target (`carried_turn`, `answered_turn`, and in a dialogue of two the turn before as
the parent nothing else gives). Pure functions of the messages, their authors, times and reply links. Dev figures
in docs/evaluation.md, "Eleventh pass: chats the rules were not written for"."""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from tmem.models.base import RelationResult
from tmem.models.relation.revision import old_values, own_text, states_slot
from tmem.models.relation.signals import party, per_scope, replies_marked, turn_before
from tmem.models.relation.values import cues, values
from tmem.types import UPDATE, Message


def thread_targets(scope, candidates: Sequence[Message]) -> dict[str, str]:
    """Message id -> the message its reply answers, where the conversation never replies to a reply and a thread
    top has several replies (Slack's threads: every reply points at the thread's first message): the thread's
    latest earlier message (its top, or the reply before it). Empty where replies nest (a reply link then names
    the message answered). Dev: in the scopes that nest, a reply to a message other replies answered before
    answers that message (gold 73 of 89 on cases dev); in the flat ones (newsroom) it answers the thread's latest
    reply (8 of 16; the top 2)."""
    messages = sorted(getattr(scope, "messages", None) or candidates, key=lambda m: m.timestamp)

    def read() -> dict[str, str]:
        ids = {m.id for m in messages}
        replies = [m for m in messages if m.reply_to in ids]
        tops = {m.id for m in messages if m.reply_to is None}
        if not replies or any(m.reply_to not in tops for m in replies):
            return {}
        latest: dict[str, str] = {}
        out = {}
        for m in replies:
            out[m.id] = latest.get(m.reply_to, m.reply_to)
            latest[m.reply_to] = m.id
        return {k: v for k, v in out.items() if v}
    return per_scope(scope, ("thread targets",), read)


def threaded(child: Message, candidates: Sequence[Message], scope) -> tuple[Message, Sequence[Message]]:
    """The child and candidates with each reply link re-pointed at the thread's latest earlier message, where the
    conversation's reply links name threads (`thread_targets`); unchanged elsewhere."""
    targets = thread_targets(scope, candidates)
    if not targets or child.id not in targets and not any(p.id in targets for p in candidates):
        return child, candidates
    def moved(m: Message) -> Message:
        return replace(m, reply_to=targets[m.id]) if m.id in targets and targets[m.id] != m.reply_to else m
    return moved(child), [moved(p) for p in candidates]


DIALOGUE_MINUTES = 24 * 60.0  # in a dialogue without reply links (two speakers: SMS with an agent, a chat with a
# shop) the other speaker's turn answers the turn before it when it comes the same day, hours later as often as not
# (travel dev: answers 700-900 minutes after the turn; a new request after a day or more)
TURN_CONFIDENCE = 0.5  # a dialogue's turn before, where the fitted model rooted and the state rule placed nothing


def dialogue(scope, candidates: Sequence[Message]) -> bool:
    """Whether exactly two people write in the conversation (its messages, else the candidates): a dialogue, in
    which every turn speaks to the other speaker."""
    messages = getattr(scope, "messages", None) or candidates
    return per_scope(scope, ("dialogue",), lambda: len({m.author for m in messages}) == 2)


def dialogue_turn(child: Message, candidates: Sequence[Message], scope) -> Message | None:
    """In a dialogue without reply links, the other speaker's turn just before the child when it came the same day
    (`DIALOGUE_MINUTES`): the turn a child that nothing else places answers. None elsewhere."""
    if replies_marked(scope, candidates) or not dialogue(scope, candidates):
        return None
    return turn_before(child, candidates, DIALOGUE_MINUTES)


# A question that asks for a change or proposes another option ("could we swap Hiroshima for Osaka?", "can you
# add her?", "any chance of switching back?", "what about MySQL?"): its answer may make the change (issue 38's
# class 6: a revision of a choice is no answer to the question about the other option); a question of fact ("is
# Hiroshima doable as a day trip?", "plan b?") is answered, not settled
REQUEST = re.compile(r"(?:^|[,;:]\s*)\W*(could|can|would|will)\s+(you|we|i|the|it|they|she|he)\b|"
                     r"\b(any chance|please|pls|what about|how about|why not)\b", re.IGNORECASE)


def answered_turn(child: Message, candidates: Sequence[Message], scope, result: RelationResult) -> Message | None:
    """In a dialogue without reply links, the other speaker's question just before the child (within a day), when
    it asks for no change (`REQUEST`) and the child asks nothing: the child answers it, an EXPAND of it, not an
    UPDATE of another message (a state the answer names). Returns that question where `result` UPDATEs another
    message, else None."""
    choice = result.choices[0] if result.choices else None
    if choice is None or choice.relation != UPDATE:
        return None
    turn = dialogue_turn(child, candidates, scope)
    if turn is None or turn.id == choice.parent_id or "?" in own_text(child.text):
        return None
    asked = [s for s in re.split(r"(?<=[.!?])\s+", own_text(turn.text)) if "?" in s]
    return turn if asked and not any(REQUEST.search(s) for s in asked) else None


# A code of letters and digits (a booking reference "EST-33189", a ticket "INV-40917", a seat "18C"): it names a
# record, not a value a slot holds, so a confirmation that brings one brings no new value
_CODE = re.compile(r"^(?=[\w-]*\d)(?=[\w-]*[a-z])[\w-]+$")
_WORD = re.compile(r"\b[A-Z][\w-]+")


def carried_turn(child: Message, candidates: Sequence[Message], scope, result: RelationResult,
                 minutes: float) -> Message | None:
    """Where no message carries a reply link among few speakers, the turn just before the child (another
    speaker's within `minutes`, in a dialogue the same day: `signals.turn_before`) stands for its reply target. A
    child that asks nothing and takes up a value or a name that turn states ("Park Inn 8-11 June, conf PI-772031"
    after "Park Inn then"; "Moved to 7 June" after "I need to fly on the 7th, not the 8th") carries out the change
    the turn states, as a reply carrying out its target's change does (`revision_first.carries_out`): an EXPAND of
    the turn, not an UPDATE of an earlier message. Not a child that names a value it replaces ("not the 8th",
    "Status changed Open -> Pending"): that changes a state of its own. Codes of letters and digits are no values.
    Returns that turn where the decision in `result` UPDATEs another message, else None."""
    choice = result.choices[0] if result.choices else None
    if choice is None or choice.relation != UPDATE or replies_marked(scope, candidates) \
            or party(scope, candidates) != "few":
        return None
    turn = turn_before(child, candidates, DIALOGUE_MINUTES if dialogue(scope, candidates) else minutes)
    if turn is None or turn.id == choice.parent_id:
        return None
    mine, theirs = own_text(child.text), own_text(turn.text)
    if "?" in mine or "?" in theirs or cues(theirs).challenge or not states_slot(turn.text):
        return None
    said = {v for v in values(mine) if not _CODE.match(v)}
    told = {v for v in values(theirs) if not _CODE.match(v)}
    words = {w.casefold() for w in _WORD.findall(mine)} & {w.casefold() for w in _WORD.findall(theirs)}
    if not (said & told or words):
        return None
    return None if old_values(child.text) else turn  # naming a value it replaces, it changes a state of its own
