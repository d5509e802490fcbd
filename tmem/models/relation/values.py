"""What a chat message says about a state, for the offline relation role (tmem/models/relation/):
whether it states one (a decision, rule, owner, date, number, named option), changes one, questions or objects to
one, reaffirms one, and which values (numbers, dates, times, names) it states. Pure functions over the text, per
sentence: "Card-auth Sev1s escalate after 5 minutes. Everything else stays at 15." changes a state even though its
second sentence reaffirms one."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from tmem.text import STATE_CHANGE_CUES as REVISION_CUES

SUPPORT_CUES = re.compile(
    r"\b(yes|yep|agreed?|confirm(ed|s)?|approved?|sounds good|makes sense|because|since|done|will do|on it|"
    r"\+1|lgtm|correct|right|exactly|thanks|noted|to clarify|for context|details?|here is|here's|answer|"
    r"works for|fine by|good call|go ahead|will do)\b",
    re.IGNORECASE)

# Wording that changes a state beyond the shared revision cues: supersession, reversal, a constraint added to
# a standing rule (App. G.3, Fig. 9), a rollback.
STATE_CHANGE = re.compile(
    r"\b(no longer|not any ?more|anymore|rather than|instead of|supersed\w*|revers\w*|back to|roll\w* back|"
    r"undo|drop(ped|ping)? (the|that|this)|change of plan|new (rule|plan|policy|approach|process|deadline|owner|"
    r"date|target|limit|cutoff|scope)|on second thought|after all|reconsider\w*|hold off|pause|paus(ed|ing)|"
    r"effective (immediately|today|now|\w+day)|from (now|today|here) on|going forward|as of (today|now)|"
    r"(we('re| are)|i'm|i am) (moving|switching|changing|reverting|dropping|extending|adding|tightening|"
    r"loosening|narrowing|widening|pushing|pulling)|"
    r"(also|additionally) (require|need|must|add)\w*|on top of (that|this)|in addition|"
    r"(add|adding|added) (a|an|one) (new |extra |additional |second )?(constraint|requirement|rule|condition|"
    r"check|step|gate|flag|field|exception)|"
    r"(update|correction|change)\s*:|(is|are) now|now (is|are|be|goes|moves|sits|starts|ends|requires|needs)|"
    r"moved (to|from)|switched|changed|replaced|postponed|extended|shortened|cancel\w*|retract\w*|override\w*|"
    r"(moves?|goes|slips?|slid|shifts?|drops?) (to|back)|change to|from today|^then\b|now\s*[.;,]|"
    r"rule on top|on top of the)\b",
    re.IGNORECASE)

# A message that states a state: a decision, plan, rule, owner, deadline, threshold or scope (App. K's list).
DECISION = re.compile(
    r"\b(we will|we'll|we('re| are) going to|we go with|going with|let's|lets|decided|decision|decide|plan|policy|"
    r"rule|process|approach|must|shall|should|required?|requires|owner|owns|owned by|assign\w*|deadline|due|"
    r"approved?|agreed|adopt\w*|keep|freeze|gate|limit|cap|budget|scope|target|cutoff|sign[- ]?off|"
    r"review|only|always|never|every|each|all|first pass|phase|rollout|launch|ship|release|migrat\w*|"
    r"schedule\w*|vendor|use)\b|\d",
    re.IGNORECASE)

# A challenge or question about a state is an EXPAND of it, not a new state.
CHALLENGE = re.compile(r"\?\s*$|\b(what about|are we sure|concern\w*|worr(y|ied)|risk\w*|not sure|could we|"
                       r"should we|can we|do we|does (that|this|it)|would (that|this|it)|why not|how about)\b",
                       re.IGNORECASE)
# An objection: a problem raised against a state (the message that answers it with a decision revises that state).
OBJECTION = re.compile(r"\b(too (long|short|late|early|much|many|few|expensive|slow)|breaks?|broken|fail\w*|"
                       r"useless|clash\w*|conflicts?|can't|cannot|won't|doesn't work|isn't enough|not enough|"
                       r"problem|issue|blocker|blocked|sunsetting|deprecat\w*|we need another|need(s)? (another|more)|"
                       r"lose|losing|over budget|incidents?|stale)\b", re.IGNORECASE)
# A restatement or write-up of the standing state elaborates it (Fig. 10's execution detail), it changes nothing.
RESTATE = re.compile(r"^\W*(\+1|for the record|restating|to restate|recap|summary|writing (it|this) up|updated \w+:|"
                     r"go/no-go done)", re.IGNORECASE)
# A report of what happened (past tense, a log or a result) is not a state to revise. Whole words only: without
# the closing boundary "rang", "range", "random", "camera", "sentence" read as "ran", "came", "sent"; the negated
# past ("didn't", "wasnt") is a report in every spelling, which the open end used to catch through "did" / "was".
REPORT = re.compile(r"\b((was|were|did)(n['’]?t)?|used|took|went|came|ran|re-ran|passed|passes|happened|"
                    r"status(?! page)|finished|sent|posted|(is|are) (up|out)|"
                    r"last (night|week(end)?|month|year)|yesterday|heads up|fyi|done(?! by))\b|"
                    r"\b(logs?|quote):", re.IGNORECASE)
# An acknowledgement (+1, agreed, sounds good) or thanks ("thanks Pete ❤️": a name, not a value) backs a state; it
# does not state one of its own.
ACK = re.compile(r"^\W*(\+1|agreed|sounds good|lgtm|fine by me|makes sense|thanks|thank you|cheers)\b",
                 re.IGNORECASE)
# Wording that settles a state: the message a later revision most likely revises. (Not "=": the demo generator's
# "X = Y" decisions put it here; in real chats it writes sums and shell, never a decision: 148 of the 156 settling
# matches on IRC dev, and a recap, a survey and a sum on the cases; tests/test_relation_generator_cues.py.)
DECISIVE = re.compile(r"\b(lock(ed)? in|decided|decision|final|new (rule|plan)|going with|we('ll| will) go with|"
                      r"proposal|policy is)\b", re.IGNORECASE)
# A booking made for a day, a time or a place: the plan it books ("booked the hall for the 3rd", "uhaul van booked
# 8-2", "Booked: both cup ties at Greenway"); not a count of bookings taken ("7 people booked on the 14th")
BOOKED = re.compile(r"(?<!\d )(?<!people )(?<!->)(?<!-> )(?<!:)(?<!: )\b(?:re)?(?:booked|reserved)\b"
                    r"(?!\s*(?:->|→)|\s+(?:so far|already|up|out)\b)", re.IGNORECASE)
# Wording that keeps a state as it is: a reaffirmation elaborates the state, it does not change it.
REAFFIRM = re.compile(r"\b(stays?|still|keeps?|remains?|unchanged|nothing changes|no change|as planned|"
                      r"as agreed|confirm(ed|s)?|restat\w*|for the record|nothing new)\b", re.IGNORECASE)
NEGATED_VALUE = re.compile(r"\b(not|instead of|rather than|no longer)\s+\$?\d", re.IGNORECASE)
# The value a message says is replaced: "45k, not 60", "at 14:00 instead of 09:00", "go from 6 to 8", "to March 17
# instead of March 3"
_REPLACED_VALUE = re.compile(r"\b(?:not|instead of|rather than|no longer|from)\s+(?:the\s+)?(?:[a-z]{3,9}\.?\s+)?"
                             r"(\$?\d[\d.,:/-]*\w*)", re.IGNORECASE)  # "instead of March 3": the day
_NUMBER = re.compile(r"\b\d+(?:[.,:/-]\d+)*\s*(?:%|h|hrs?|hours?|days?|weeks?|k|m)?\b", re.IGNORECASE)
# A sentence told in the past tense early on ("MOB-811 fixed on release/4.2", "Helixdesk accepted 48h") reports what
# happened; present or future wording ("is", "will", "goes") makes it a state again
_PAST = re.compile(r"^\W*(?:\S+\s+){0,3}[a-z]+ed\b", re.IGNORECASE)
_PRESENT = re.compile(r"\b(is|are|will|'ll|go|goes|moves?|from|now|must|should|needs?|gets?|stays?|only)\b",
                      re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?;])\s+(?=\S)")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# A value a state can hold: a number with its unit, a time, an ordinal date, a mention, or a capitalised name
# inside a sentence (a vendor, a tool, a region, a month). Two states of one slot differ in these.
_VALUE = re.compile(r"@[\w.\-]+|\b\d+(?:[.,:/-]\d+)*(?:st|nd|rd|th)?\s*(?i:%|h\b|hrs?\b|hours?\b|min\w*|days?\b|"
                    r"weeks?\b|months?\b|k\b|m\b|eur\b|usd\b|utc\b|cet\b)?|(?<=[\w,:;()] )[A-Z][\w\-]+")


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCES.split(text.strip()) if s]


def values(text: str) -> frozenset[str]:
    """The values a text states, normalised ('18:00', '24th' -> '24', 'Livestorm' -> 'livestorm', '30 days')."""
    return frozenset(_normalised(m.group(0)) for m in _VALUE.finditer(text))


def _normalised(raw: str) -> str:
    v = raw.strip().casefold()
    if v[:1].isalpha():
        return v[:3] if v[:3] in _MONTHS and len(v) <= 9 else v  # 'June' and 'Jun' are one value
    return re.match(r"[\d.,:/-]+", v).group(0).rstrip(".,:/-") if v[0].isdigit() else v  # '48h' -> '48'


class Cues(NamedTuple):
    """What a message says about a state (see the module docstring)."""
    change: str | None  # a state-change cue ('no longer', 'moves to', 'also needs')
    revision: str | None  # a revision cue of tmem.text
    states: bool  # some sentence states a state (a decision, a value, a rule)
    challenge: bool  # it asks or challenges (a question mark or challenge wording)
    numbers: frozenset[str]  # the numbers of the whole text
    objection: bool  # it raises a problem against a state
    new_state: bool  # some sentence states a state without reaffirming it: a candidate UPDATE
    values: frozenset[str]  # the values its state sentences state
    reaffirms: bool  # it only keeps or restates a state


def _states(s: str) -> bool:
    """A sentence states a state: decision wording or a value, and it is no question, objection, report or ack."""
    if "?" in s or CHALLENGE.search(s) or ACK.search(s) and len(s) < 40:
        return False
    change = STATE_CHANGE.search(s) or REVISION_CUES.search(s)
    # settling wording ("Decided: ...", "done deciding") states a decision even in the past tense
    # so does a booking made ("booked the hall for the 3rd", "kickoff call booked for Feb 2"): it sets the plan it
    # books, though told in the past tense
    reported = (REPORT.search(s) or _PAST.match(s) and not _PRESENT.search(s)) and not BOOKED.search(s)
    if (OBJECTION.search(s) or reported) and not change and not DECISIVE.search(s):
        return False
    return bool(DECISION.search(s) or DECISIVE.search(s) or change or values(s))


@lru_cache(maxsize=65536)
def cues(text: str) -> Cues:
    change = STATE_CHANGE.search(text)
    revision = REVISION_CUES.search(text)
    parts = sentences(text) or [text]
    stating = [s for s in parts if _states(s)]
    fresh = [s for s in stating if not (REAFFIRM.search(s) and not STATE_CHANGE.search(s)) and not RESTATE.search(s)]
    challenge = "?" in text or bool(CHALLENGE.search(text))
    return Cues(change.group(0) if change else None, revision.group(0) if revision else None, bool(stating),
                challenge, frozenset(n.strip().casefold() for n in _NUMBER.findall(text)),
                bool(OBJECTION.search(text)), bool(fresh) and not RESTATE.search(text),
                frozenset().union(*(values(s) for s in stating)) if stating else frozenset(),
                bool(stating) and not fresh or bool(RESTATE.search(text)))


_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_OF_MONTH = re.compile(r"(?i)\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b|"
                           r"\b\d{1,2}\s+(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)")
# a day of the month with the year it may carry
_DATE = re.compile(rf"(?:{_DAY_OF_MONTH.pattern.removeprefix('(?i)')})(?:,?\s+\d{{4}}\b)?", re.IGNORECASE)
_KIND = (("time", re.compile(r"^\d{1,2}:\d{2}")), ("percent", re.compile(r"%$")),
         ("date", re.compile(r"(?i)^\d+(st|nd|rd|th)$")), ("money", re.compile(r"(?i)^\$|(k|m|eur|usd)$")),
         ("duration", re.compile(r"(?i)(h|hrs?|hours?|min\w*|days?|weeks?|months?)$")))


def value_kind(raw: str) -> str:
    """What kind of value a raw match of _VALUE is: a time, percent, amount, duration, date, count or name."""
    raw = raw.strip()
    if raw[:1].isalpha() or raw[:1] == "@":
        return "date" if raw[:3].casefold() in _MONTHS + _WEEKDAYS else "name"
    return next((kind for kind, pattern in _KIND if pattern.search(raw)), "count")


@lru_cache(maxsize=65536)
def typed_values(text: str) -> frozenset[tuple[str, str]]:
    """(kind, value) of the values the text's stating sentences state: "Wave 1 is now Saturday 20 March" states
    dates; "Auth moves to wave 2" states a count. Two statements replace each other's value only within a kind."""
    out = set()
    for s in sentences(text) or [text]:
        if _states(s):
            # a number is a date only as part of a day-of-month expression ("Saturday 20 March", "March 3", a range
            # "14-18 may", a year "Jun 30 2026"), not beside one: in "Friday 12 June: 40 seats" the 40 is a count
            days = [d.span() for d in _DATE.finditer(s)]
            for m in _VALUE.finditer(s):
                kind = value_kind(m.group(0))
                if kind == "count" and any(a < m.end() and m.start() < b for a, b in days):
                    kind = "date"
                out.add((kind, _normalised(m.group(0))))
    return frozenset(out)


# A weekday written in lower case ("moved to thursday"): _VALUE reads capitalised names only; a day is a date
_WEEKDAY = re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.IGNORECASE)
# A clock time written with am / pm ("since 8am"): _VALUE reads its number as a count
_AM_PM = re.compile(r"\b(\d{1,2})(?::\d{2})?\s?([ap]\.?m)\b\.?", re.IGNORECASE)
# A move that names where to ("moving the API to 8080", "moved us to 15:40"): the destination is the slot's new
# value, stated though the sentence names the problem that forced it ("8000 clashes with ...") or reads as a report
_MOVED_TO = re.compile(r"\b(?:mov(?:e[sd]?|ing)|push(?:e[sd]|ing)|bump(?:ed|ing)|shift(?:ed|ing)|switch(?:ed|ing)?)"
                       r"\s+(?:\w+\s+){0,2}?to\s+(:?\d[\d:.]*(?:\s*[ap]\.?m\b)?|"
                       r"(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\b(?:\s+\d{1,2}(?:st|nd|rd|th)?(?:\s+[a-z]{3,9}\b)?)?)",
                       re.IGNORECASE)


def dated(text: str, read: frozenset[tuple[str, str]]) -> frozenset[tuple[str, str]]:
    """`read` with the text's lower-case weekdays as dates and its counts written with am / pm as times."""
    days = {("date", d.casefold()) for d in _WEEKDAY.findall(text)}
    clock = {m.group(1): ("time", re.sub(r"[.\s]", "", m.group(0).casefold())) for m in _AM_PM.finditer(text)}
    return frozenset(clock.get(v, (k, v)) if k == "count" else (k, v) for k, v in read) | days


def moved_to(text: str) -> frozenset[tuple[str, str]]:
    """(kind, value) of the destinations a move names: a number or time ("moving the API to 8080" -> ('count',
    '8080'), "moved us to 15:40") or a day ("pushed the delivery to monday", "moving to sat 3 oct")."""
    found = [m.group(1).lstrip(":") for m in _MOVED_TO.finditer(text)]
    return frozenset().union(*(dated(d, typed_values(d)) for d in found)) if found else frozenset()


def kind_replaced(child: frozenset[tuple[str, str]], parent: frozenset[tuple[str, str]]) -> bool:
    """Of some kind (a date, a time, an amount...), the child drops a value of the parent's and brings another:
    it restates that attribute with a new value ("Wave 1 is now Saturday 20 March" after "... on Saturday 13
    March"), whatever else either says."""
    kinds = {k for k, _ in child} & {k for k, _ in parent}
    return any({v for k, v in child if k == kind} - {v for k, v in parent if k == kind}
               and {v for k, v in parent if k == kind} - {v for k, v in child if k == kind} for kind in kinds)


@lru_cache(maxsize=65536)
def replaced_values(text: str) -> frozenset[str]:
    """The values a text names as the ones it replaces ("not 60", "instead of 09:00", "from 6 to 8")."""
    out = set()
    for m in _REPLACED_VALUE.finditer(text):
        if m.group(0).casefold().startswith("from") and not re.match(r"\s+to\b", text[m.end():]):
            continue  # "from 12:30" alone is a start time, not the value being replaced
        out |= values(m.group(1))
    return frozenset(out)


# A name said to be replaced, read whole: "Elephant's Breath not Skimming Stone" -> 'skimming stone'
_REPLACED_NAME = re.compile(r"\b(?i:not|instead of|rather than)\s+(?:(?i:the)\s+)?"
                            r"([A-Z][\w'’&.-]*(?:\s+(?:&\s+)?[A-Z][\w'’.-]*)*)")


def replaced_names(text: str) -> frozenset[str]:
    """The names a text says it replaces ("not Skimming Stone"), casefolded, each read whole. A code of letters and
    digits ("instead of INV-40917") is none: it names a record, not a state, and is never read as its letters."""
    names = {m.group(1).rstrip(".'’").casefold() for m in _REPLACED_NAME.finditer(text)}
    return frozenset(n for n in names if len(n) > 1 and not re.search(r"\d", n))


@lru_cache(maxsize=65536)
def decisive(text: str) -> bool:
    return bool(DECISIVE.search(text))


_DAY = re.compile(r"\b(mon|tue|wed|thu|fri|sat|sun)(?:day|s|sday|nesday|rsday|urday)?\b|\b\d{1,2}(?:st|nd|rd|th)\b",
                  re.IGNORECASE)


def _days(text: str) -> set[str]:
    """The days a text names, a weekday as its first three letters ("Tuesday", "tues" -> "tue"), a date as written."""
    return {m.group(0).casefold()[:3] if m.group(1) else m.group(0).casefold() for m in _DAY.finditer(text)}


def names_its_day(child: str, parent: str) -> bool:
    """The child names a day the parent states ("tue", "the 14th"), in any spelling of the weekday."""
    return bool(_days(child) & _days(parent))


_RETURN = re.compile(r"\bback to\s+(?:the\s+)?(\$?\d[\d.,:/-]*\w*)", re.IGNORECASE)


def returns_to(text: str) -> frozenset[str]:
    """The values a message returns to ("back to 4 business hours", "back to the 12th"), as values.values reads them."""
    return frozenset().union(*(values(m.group(1)) for m in _RETURN.finditer(text)))


_BACK = re.compile(r"\bback to\s+(?:the\s+)?([\w$£€][\w.:,$£€-]*)", re.IGNORECASE)


def returned_word(text: str) -> str | None:
    """The first word of what a text goes back to ("back to 4, sorry" -> "4", "Back to green zellige" -> "green"),
    casefolded; None without "back to"."""
    m = _BACK.search(text)
    return m.group(1).rstrip(".,:").casefold() if m else None


def holds(text: str, word: str) -> bool:
    """The text names the word, or its singular ("tuesdays" in "every Tuesday")."""
    return any(re.search(rf"(?<![\w]){re.escape(w)}(?![\w])", text, re.IGNORECASE)
               for w in (word, word[:-1] if word.endswith("s") and len(word) > 3 else word))


# A message posted in the wrong place or to the wrong person, or taken back ("sorry wrong chat 🙈", "ignore that,
# wrong group", "wrong person sorry!!")
_WRONG_PLACE = re.compile(r"\bwrong (chat|group|channel|thread|room|person|number)\b", re.IGNORECASE)
_IGNORE = re.compile(r"^\W*(sorry,?\s*)?(please\s+)?(ignore|disregard)\s+(that|this|me|my last|the last)\W*$",
                     re.IGNORECASE)


def withdraws(text: str) -> bool:
    """The text takes back its author's previous message and says nothing else: posted in the wrong place or an
    "ignore that" alone. Not "disregard the above re Alvarez, he's keeping the 27th", which withdraws by stating a
    state of its own (a revision)."""
    return bool(_IGNORE.match(text) or _WRONG_PLACE.search(text) and len(text) < 60 and not values(text))
