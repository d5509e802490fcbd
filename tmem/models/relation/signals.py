"""Signals the offline relation rules share (tmem/models/relation/): a scope's IDF, the IDF-weighted overlap of a child
with its candidates, names a message addresses or mentions, the first names that stand for authors, and the openings
that reject a change ("No, ...") or follow up on one ("I'll ...", "thanks"). Pure functions over messages and a
scope; what they derive per scope is kept on the scope itself (`per_scope`), so a scope's figures go with it."""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from tmem.models.relation.revision import own_text, quoted_text
from tmem.types import Message

T = TypeVar("T")


def per_scope(scope, reading: tuple, compute: Callable[[], T]) -> T:
    """compute(), kept on the scope under `reading` (tmem.pipeline.scope.Scope.derived: a mutable value, such as a
    cache, stays the scope's); computed afresh for a stand-in scope that keeps nothing (a test double)."""
    derived = getattr(scope, "derived", None)
    return compute() if derived is None else derived(reading, lambda _scope: compute())


def scope_idf(scope) -> Callable[[str], float]:
    cache: dict[str, float] = per_scope(scope, ("relation idf",), dict)  # a scope's IDF is fixed

    def idf(unit: str) -> float:
        value = cache.get(unit)
        if value is None:
            value = cache[unit] = scope.idf(unit)
        return value
    return idf


# "No, ..." to a challenge rejects the change it asks for: the state stands, the answer elaborates it
REJECTS = re.compile(r"^\W*(no|nope)\b", re.IGNORECASE)
FOLLOW_UP = re.compile(r"^\W*(\w+[,.!]\s+)?(i'll|i will|i can|i'm|will do|thank|understood|good|ok\b|fine\b)",
                        re.IGNORECASE)


def weighted_overlap(a: set[str], b: set[str], scope) -> float:
    """Share of the smaller side's IDF mass that the two unit sets have in common (0..1)."""
    if not a or not b:
        return 0.0
    idf = scope_idf(scope)
    shared = sum(idf(u) for u in a & b)
    return shared / min(sum(idf(u) for u in a), sum(idf(u) for u in b))


def candidate_overlaps(child: Message, candidates: Sequence[Message], scope) -> list[float]:
    """`weighted_overlap` of the child with each candidate, each candidate's IDF mass computed once per scope."""
    idf, masses = scope_idf(scope), per_scope(scope, ("idf mass",), dict)  # message id -> its units' mass
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


# First names a message speaks to, where authors go by handles the text never uses ("User_3" who is "Gary"): after
# a thanks or an apology ("thanks Steve", "Sorry Sophie!"), opening a message with a comma ("Jess, anything ...?"),
# or asking ("Pete can you ...", "Gary will the 26th work?"). A greeting ("Hi Tom & Aisha,") names people its
# writer is not, and nothing more: the greeted often do not answer an announcement.
_THANKED = re.compile(r"\b(?i:thanks|thank you|cheers|sorry)\s+([A-Z][a-z]{2,})\b")
_CALLED = re.compile(r"^\W*([A-Z][a-z]{2,}),\s+(?=[A-Za-z])")
_ASKED = re.compile(r"\b([A-Z][a-z]{2,}),?\s+(?:can|could|will|would|did|do|any)\b")
_GREETED = re.compile(r"^\W*(?i:hi|hey|hello|morning|evening|dear)\s+([A-Z][a-z]{2,})"
                      r"(?:\s*(?:&|and)\s*([A-Z][a-z]{2,}))?")
_OPENING = re.compile(r"^\W*(?:(?i:hi|hey|ok|thanks|thank you|cheers|sorry)[,!]?\s+)?([A-Z][a-z]{2,})\b")


def spoken_to(text: str) -> set[str]:
    """First names the text speaks to (thanks, apology, a comma-vocative opening, a question), as written."""
    names = {n for rx in (_THANKED, _CALLED, _ASKED) for n in rx.findall(text)}
    return names | {n for n in _OPENING.findall(text)}


def thanked(text: str) -> bool:
    """Whether the text thanks or apologises to someone by name ("thanks Steve", "Sorry Sophie!")."""
    return _THANKED.search(text) is not None


def first_names(scope, candidates: Sequence[Message]) -> dict[str, str]:
    """First name (casefolded) -> the author it names, read from the whole conversation (its messages, else the
    candidates) where authors are handles: a name thanked or apologised to votes for the author of the latest turn
    of another speaker before it, a name asked ("Jess, anything similar in stock?", "Pete can you ...") for the
    author of the next turn of another speaker; the writer of a message that names or greets someone is not that
    someone. A name whose most votes are shared, or that names an author's own handle, maps to nobody."""
    messages = sorted(getattr(scope, "messages", None) or candidates, key=lambda m: m.timestamp)

    def read() -> dict[str, str]:
        authors = {m.author.casefold() for m in messages if m.author}
        # a name is written with a capital wherever it occurs: a word also written in lower case is none
        # ("Great, go ahead", "Quartz, the Calacatta white one")
        lower = {w for m in messages for w in re.findall(r"\b[a-z]{3,}\b", m.text)}
        votes: dict[str, dict[str, int]] = {}
        not_them: dict[str, set[str]] = {}
        for i, m in enumerate(messages):
            text = own_text(m.text) or m.text
            for name in spoken_to(text) | {n for g in _GREETED.findall(text) for n in g if n}:
                not_them.setdefault(name.casefold(), set()).add(m.author)
            before = next((p.author for p in reversed(messages[:i]) if p.author != m.author), None)
            after = next((p.author for p in messages[i + 1:] if p.author != m.author), None)
            for name, voted in [*((n, before) for n in _THANKED.findall(text)),
                                *((n, after) for rx in (_CALLED, _ASKED) for n in rx.findall(text))]:
                if voted is not None and name.casefold() not in authors | lower and not AGREES.match(name):
                    tally = votes.setdefault(name.casefold(), {})
                    tally[voted] = tally.get(voted, 0) + 1
        mapped = {}
        for name, tally in votes.items():
            tally = {a: n for a, n in tally.items() if a not in not_them.get(name, ())}
            ranked = sorted(tally.values(), reverse=True)
            if ranked and (len(ranked) == 1 or ranked[0] > ranked[1]):
                mapped[name] = max(tally, key=tally.get)
        return mapped
    return per_scope(scope, ("first names",), read)


MIN_REPLY_SHARE = 0.1  # a conversation marks replies where at least this share of its messages carries a link: a
# flat issue thread with one reply in a review (1 of 23) still says nothing by a missing link; every typed dev
# style's conversations link 0.22 or more of their messages, IRC's none (docs/evaluation.md "Reply-less chats")


def replies_marked(scope, candidates: Sequence[Message]) -> bool:
    """Whether the conversation records reply links (at least `MIN_REPLY_SHARE` of the messages of the scope, else
    of the candidates, reply to another). A log without them (IRC, an issue thread's flat comments) says nothing by
    a missing link: who answers whom is read from the words and the order of the turns."""
    messages = getattr(scope, "messages", None) or candidates

    def marked() -> bool:
        return bool(messages) and sum(1 for m in messages if m.reply_to) >= MIN_REPLY_SHARE * len(messages)
    return per_scope(scope, ("replies marked",), marked)


MANY_SPEAKERS = 12  # a conversation of more speakers is a public log's many parties, not a thread's few: on the
# dev corpora every chat that marks replies, and the issue threads and job chats that mark none (oss, renovation),
# have 2-8 speakers per scope, each IRC dev log 76-166; any bound from 9 to 76 splits them alike


def party(scope, candidates: Sequence[Message]) -> str:
    """"many" when more than MANY_SPEAKERS people write in the conversation (its messages, else the candidates):
    an open channel where several conversations interleave and a turn's parent is told by whom it addresses and
    when (IRC), else "few" (a thread, a group chat, an issue)."""
    messages = getattr(scope, "messages", None) or candidates
    return per_scope(scope, ("party",), lambda: "many" if len({m.author for m in messages}) > MANY_SPEAKERS else "few")


# An opening that agrees, accepts, thanks or takes something on: it answers the turn before it ("+1", "sure, got
# it", "fair", "fine, we'll run it", "LGTM", "👍"), whoever that turn was addressed to.
AGREES = re.compile(r"^\W*(?:\+1|👍|(?:ok(?:ay)?|sure|fair|fine|thanks?|thank you|thx|ty|lgtm|agreed|yes|yep|yeah|"
                    r"sounds good|makes sense|got it|will do|great|cool|nice|perfect|works for|confirm(?:ed|s)?)\b)",
                    re.IGNORECASE)
# An opening that says the message is beside the conversation ("side note: ...", "unrelated, but ...", "btw is
# there ...", "off topic"): it starts a thread of its own, whatever it follows
ASIDE = re.compile(r"^\W*(?:side ?note|unrelated|btw|by the way|off[- ]topic|random question)\b", re.IGNORECASE)
# A progress report on work under way ("Strip out done ✅", "Rewire complete", "Finish slips to 7 July", "Status:
# ...", "on track", "blocked until ..."): a job's state, which the same speaker's next report replaces
PROGRESS = re.compile(r"✅|\b(?:done|complete[d]?|finish(?:ed|ing)?|on track|delayed|blocked|on hold|postponed|"
                      r"slip(?:s|ped)?)\b|^\W*status\s*:", re.IGNORECASE)
# A command typed into a chat ("/reopen", "/label confirmed", "/assign @sam"): its verb is what a later report echoes
_COMMAND = re.compile(r"^\s*/([a-z][\w-]{3,})", re.IGNORECASE | re.MULTILINE)
# A value a message takes away: a command that removes or un-sets ("/remove-label x", "/unassign @x"), or a field
# line saying what was removed ("Label `x` removed", "Labels removed: `x`, `y`")
_REMOVE_COMMAND = re.compile(r"^\s*/(?:remove-\w+|un[a-z]\w+)\s+(.+)$", re.IGNORECASE | re.MULTILINE)
_REMOVED_AFTER = re.compile(r"((?:`[^`\n]+`\s*,?\s*(?:and\s+)?)+)\s*(?:was |were )?removed\b", re.IGNORECASE)
_REMOVED_BEFORE = re.compile(r"\bremoved\s*:?\s*((?:`[^`\n]+`\s*,?\s*(?:and\s+)?)+)", re.IGNORECASE)
_ITEM = re.compile(r"`([^`\n]+)`|(@?[\w.\-]+)")


# A field a sentence sets, named first with a capital as in a form or a bot's line: "Labels added: `bug`",
# "Milestone set: v1.0", "Label `in progress` added", "Status changed Open -> Pending"; or a command that sets or
# clears one ("/label x", "/remove-label y", "/unassign @z")
_FIELD_SET = re.compile(r"(?:^|(?<=[.!?]\s))\s*([A-Z][a-z]{2,})\s+(?:`[^`\n]+`\s+)?(?:added|set|changed|removed)\b",
                        re.MULTILINE)
_FIELD_COMMAND = re.compile(r"^\s*/(?:remove-|un(?=[a-z]))?([a-z]{3,})(?=\s|$)", re.IGNORECASE | re.MULTILINE)


def _singular(word: str) -> str:
    word = word.casefold()
    return word[:-1] if word.endswith("s") and not word.endswith(("ss", "us")) else word


def changed_fields(text: str) -> set[str]:
    """The fields a message sets or clears, casefolded and singular: a command ("/label x", "/remove-label y",
    "/unassign @z" -> 'label', 'assign') or a field sentence ("Labels added: ...", "Label `x` removed", "Milestone
    set: v1.0" -> 'label', 'milestone')."""
    return {_singular(f) for rx in (_FIELD_SET, _FIELD_COMMAND) for f in rx.findall(text)}


def only_fields(text: str) -> bool:
    """Whether every line of the message sets a field or types a command ("/milestone v0.14.1", "Label `merged`
    removed, `reverted` added"): a tracker's bookkeeping, which says nothing a later turn would take up."""
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and all(changed_fields(line) or command_verbs(line) for line in lines)


def command_verbs(text: str) -> set[str]:
    """The verbs of the chat commands a message types ("/reopen" -> 'reopen'), casefolded."""
    return {v.casefold() for v in _COMMAND.findall(text)}


def removed_values(text: str) -> set[str]:
    """The values a message says it takes away (casefolded, without backticks or '@'): '/remove-label needs-triage'
    -> {'needs-triage'}, "Label `fixed` removed" -> {'fixed'}. Empty when it removes nothing by name."""
    found = [m.group(1) for m in _REMOVE_COMMAND.finditer(text)]
    found += [m.group(1) for rx in (_REMOVED_AFTER, _REMOVED_BEFORE) for m in rx.finditer(text)]
    return {(a or b).strip().lstrip("@").casefold() for f in found for a, b in _ITEM.findall(f) if (a or b).strip()}


def names_value(text: str, value: str) -> bool:
    """Whether the text names the value as a whole word ('needs-triage', 'sam-o', 'in progress')."""
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text, re.IGNORECASE) is not None


def quoted_message(child: Message, candidates: Sequence[Message]) -> Message | None:
    """The latest candidate of another speaker holding the lines the child quotes ("> polling only, no watchdog"),
    compared without case and spacing; None when the child quotes nothing found."""
    quote = " ".join(quoted_text(child.text).casefold().split())
    if len(quote) < 8:
        return None
    holding = [p for p in candidates if p.author != child.author and quote in " ".join(p.text.casefold().split())]
    return max(holding, key=lambda m: m.timestamp) if holding else None


def turn_before(child: Message, candidates: Sequence[Message], minutes: float) -> Message | None:
    """The turn just before the child, when another speaker wrote it within `minutes` and the child neither sets a
    field or types a command nor opens as an aside (`ASIDE`); a tracker's bookkeeping in between (`only_fields`) is
    no turn. For a chat of few speakers without reply links (the state rule asks): there a turn that nothing else
    places most often answers the one before it; in an open log of many it need not."""
    text = own_text(child.text) or child.text
    if not minutes or changed_fields(text) or command_verbs(text) or ASIDE.match(text):
        return None
    said = [p for p in candidates if not only_fields(p.text)]
    latest = max(said, key=lambda m: m.timestamp) if said else None
    if latest is None or latest.author == child.author or \
            (child.timestamp - latest.timestamp).total_seconds() > 60 * minutes:
        return None
    return latest
