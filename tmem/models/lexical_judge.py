"""The offline lexical judge's rules (tmem.models.offline.OfflineJudge): a verdict from the gold answer and the
agent's answer alone, with its reason. Pure functions, no model.

Order of the rules (the first that decides wins; each names itself in the reason):
1. abstention: an abstaining gold wants an abstaining answer, and an abstaining answer is wrong for any other
   gold. Abstention is a statement that the answer is not available ("no information", "not mentioned", "cannot
   be determined", an answer that is just "unknown" or says "… is unknown"); the word "unknown" inside an
   answer ("an unknown caller") is not.
2. polarity: a gold that starts with yes/no wants an answer of the same polarity (its own leading yes/no, else
   "no" when it negates something, else "yes"); "no" is never found *inside* an answer that merely says "no".
3. negation: the answer negates a content word the gold affirms ("Bob owns it, not Alice" for "Alice owns
   it"), or the gold plainly negates what an answer with no negation affirms ("Alice owns it" for "Alice does
   not own it"). Words are compared by a crude stem (owns = own). A gold's "instead of X" is a contrast, not a
   plain negation: an answer may mention the old value it replaced, but an answer that gives only the replaced
   value (none of the gold's other words) is wrong, whatever its F1.
4. dates and numbers: every full date of the gold must be a date of the answer (a different date is wrong, even
   if the two share a year and month), and every number, month and weekday of the gold must appear in the answer
   (number words count as digits).
5. containment: the gold's tokens appear as a whole-token run in the answer.
6. content-word F1 >= min_f1.
"""
from __future__ import annotations

import re
from datetime import datetime

from tmem.text import STOPWORDS, content_units, tokenize

ABSTAIN = re.compile(
    r"no information|not mentioned|not (stated|available|specified|provided)|cannot be (determined|answered)|"
    r"can't be determined|not (enough|sufficient) information|does not (say|mention|specify)|"
    r"^\W*(it is |it's |that is |this is )?unknown\W*$|\b(is|are|remains?) unknown\W*$|^\W*i don'?t know\b|"
    r"^\W*not known\W*$", re.IGNORECASE)
LEADING_POLARITY = re.compile(r"^\W*(yes|yeah|yep|correct|no|nope|not really)\b", re.IGNORECASE)
# A yes/no that is an answer of its own: followed by punctuation or the end ("yes, they did"; not "no doubt").
STANDALONE_POLARITY = re.compile(r"\b(yes|yeah|yep|no|nope)\b\s*(?=[,.;:!]|$)", re.IGNORECASE)
# Words the negation rules compare: content words, keeping the few stopwords that carry the claim ("own").
CLAIM_STOPWORDS = STOPWORDS - {"own", "off", "out", "up", "down", "over", "under", "before", "after", "same"}
CUE_WORDS = {"instead", "rather", "longer"}
# Plain negation, and contrast (the negated words were replaced by others).
PLAIN_NEGATION = re.compile(r"\b(not|never|no|none|nobody|nothing|neither|nor|without|cannot)\b|n't\b|\bn’t\b",
                            re.IGNORECASE)
CONTRAST = re.compile(r"\b(no longer|instead of|rather than|not any ?more)\b", re.IGNORECASE)
# Where a negation's scope ends: punctuation or a clause word.
SCOPE_END = re.compile(r"[,;.:!?()\[\]]|\b(but|and|so|because|while|although|though|whereas|instead)\b",
                       re.IGNORECASE)
SCOPE_WORDS = 4
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NUMBER_WORDS = {w: str(i) for i, w in enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven",
                                                  "eight", "nine", "ten", "eleven", "twelve"))}
_ISO = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_LONG_DATE = re.compile(r"\b\d{1,2}(?:st|nd|rd|th)? [A-Z][a-z]+,? \d{4}\b|\b[A-Z][a-z]+ \d{1,2}(?:st|nd|rd|th)?,? "
                        r"\d{4}\b")
_ORDINAL = re.compile(r"^(\d+)(st|nd|rd|th)$")


def is_abstention(text: str) -> bool:
    return bool(ABSTAIN.search(text.strip()))


def stem(word: str) -> str:
    """A crude stem, enough to match owns/own, approved/approve, changing/change."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def stems(text: str) -> set[str]:
    return {stem(t) for t in tokenize(text) if t not in CLAIM_STOPWORDS} - CUE_WORDS


def negated(text: str, pattern: re.Pattern = None) -> set[str]:
    """Stems of the content words in the scope of a negation (up to SCOPE_WORDS tokens after the cue, until
    punctuation or a clause word)."""
    return _split_negation(text, pattern)[0]


def affirmed(text: str) -> set[str]:
    """Stems of the content words outside every negation's scope."""
    return _split_negation(text, None)[1]


def _split_negation(text: str, pattern: re.Pattern | None) -> tuple[set[str], set[str]]:
    out: set[str] = set()
    outside, last = [], 0
    for cue in (pattern or _ANY_NEGATION).finditer(text):
        if cue.start() < last:
            continue
        outside.append(text[last:cue.start()])
        rest = text[cue.end():]
        end = SCOPE_END.search(rest)
        inside = rest[: end.start()] if end else rest
        words = list(re.finditer(r"\w+", inside))[:SCOPE_WORDS]
        stop = cue.end() + (words[-1].end() if words else 0)
        out |= stems(text[cue.end():stop])
        last = stop
    outside.append(text[last:])
    return out, stems(" ".join(outside))


_ANY_NEGATION = re.compile(f"{CONTRAST.pattern}|{PLAIN_NEGATION.pattern}", re.IGNORECASE)


def has_negation(text: str) -> bool:
    return bool(_ANY_NEGATION.search(text))


def polarity(text: str) -> str:
    lead = LEADING_POLARITY.search(text) or STANDALONE_POLARITY.search(text)
    if lead:
        return "yes" if lead.group(1).lower() in ("yes", "yeah", "yep", "correct") else "no"
    return "no" if has_negation(text) else "yes"


def dates(text: str) -> set[str]:
    found = set(_ISO.findall(text))
    for match in _LONG_DATE.finditer(text):
        cleaned = re.sub(r"(\d)(st|nd|rd|th)", r"\1", match.group(0)).replace(",", "")
        for fmt in ("%d %B %Y", "%B %d %Y", "%d %b %Y", "%b %d %Y"):
            try:
                found.add(datetime.strptime(cleaned, fmt).date().isoformat())
                break
            except ValueError:
                pass
    return found


def key_tokens(text: str) -> set[str]:
    """Numbers (number words as digits, ordinals as their number), weekdays, and months next to a number (so the
    verb "may" is no month; "Mar 3" is March)."""
    tokens = [NUMBER_WORDS.get(t, t) for t in tokenize(text)]
    tokens = [_ORDINAL.sub(r"\1", t) for t in tokens]
    out = set()
    for i, t in enumerate(tokens):
        if t.isdigit():
            out.add(str(int(t)))
        elif t in WEEKDAYS:
            out.add(t)
        elif t in _MONTH_OF and any(n.isdigit() for n in tokens[max(0, i - 1): i + 2]):
            out.add(_MONTH_OF[t])
    return out


_MONTH_OF = {m: m for m in MONTHS} | {m[:3]: m for m in MONTHS} | {"sept": "september"}


def content_f1(gold: str, answer: str) -> float:
    g, a = content_units(gold), content_units(answer)
    common = len(g & a)
    return 2 * common / (len(g) + len(a)) if common else 0.0


def _strip_polarity(text: str) -> str:
    return LEADING_POLARITY.sub("", text, count=1).lstrip(" ,.;:!-")


def lexical_verdict(gold: str, answer: str, min_f1: float = 0.5) -> tuple[bool, str]:
    """(correct, the rule that decided and why)."""
    gold_abstains, answer_abstains = is_abstention(gold), is_abstention(answer)
    if gold_abstains or answer_abstains:
        if gold_abstains and answer_abstains:
            return True, "abstention match"
        return False, "gold abstains, the answer does not" if gold_abstains else "answer abstains, the gold does not"
    if LEADING_POLARITY.search(gold):
        want, got = polarity(gold), polarity(answer)
        if want != got:
            return False, f"polarity: gold says {want}, the answer {got}"
        gold, answer = _strip_polarity(gold), _strip_polarity(answer)
        if not content_units(gold):
            return True, f"polarity match ({want})"
    affirmed_gold = stems(gold) - negated(gold)
    denied = (negated(answer) & affirmed_gold) - affirmed(answer)  # "March 17 instead of March 3" keeps march
    if denied:
        return False, f"negation: the answer negates {', '.join(sorted(denied))}"
    plain = negated(gold, PLAIN_NEGATION) - negated(gold, CONTRAST)
    flipped = plain & stems(answer)
    if flipped and not has_negation(answer):
        return False, f"negation: the gold negates {', '.join(sorted(flipped))}, the answer affirms it"
    replaced, kept = negated(gold, CONTRAST), stems(gold) - negated(gold)
    if replaced & stems(answer) and kept and not kept & stems(answer):
        return False, f"the answer gives the replaced value ({', '.join(sorted(replaced & stems(answer)))})"
    gold_dates, answer_dates = dates(gold), dates(answer)
    if gold_dates:
        if gold_dates <= answer_dates:
            return True, "same date"
        return False, (f"different date ({', '.join(sorted(answer_dates))} for {', '.join(sorted(gold_dates))})"
                       if answer_dates else f"date {', '.join(sorted(gold_dates))} not in the answer")
    missing = key_tokens(gold) - key_tokens(answer)
    if missing:
        return False, f"numbers/dates differ: {', '.join(sorted(missing))} not in the answer"
    gold_tokens = tokenize(gold)
    if gold_tokens and f" {' '.join(gold_tokens)} " in f" {' '.join(tokenize(answer))} ":
        return True, "gold contained in answer"
    f1 = content_f1(gold, answer)
    return f1 >= min_f1, f"content F1 {f1:.2f}"
