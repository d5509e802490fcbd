"""LoCoMo's conversations interleaved in one memory scope, each conversation a channel (format `locomo-interleaved`).

LoCoMo gives each conversation its own scope, so Temporal Evidence Discovery never meets other people's messages
inside its windows. A workspace export looks different: many conversations run over the same weeks in one scope,
told apart only by their channel. This loader builds that setting from the real LoCoMo file, deterministically:

- every conversation of `locomo10.json` (read by tmem.corpora.locomo) goes into one scope, `interleaved`, with its
  `sample_id` as the message channel (no topic, phase or reply metadata: LoCoMo has none);
- message ids become `<sample_id>:<dia_id>` ("conv-26:D1:3"), so the gold evidence keeps pointing at the same
  turns; question ids stay LoCoMo's (`conv-26_q1`), so a question's source conversation is its id's prefix
  (`question_group`), which gives the dev split (conversations 0-4's questions) and the test split (5-9);
- clocks are shifted so the conversations overlap: each conversation is moved by a whole number of days so that
  its first session falls on the first session day of conversation 0 (times of day and every gap between
  sessions are kept). The dates in the messages therefore no longer match LoCoMo's temporal answers: the corpus
  is for evidence recall (`python -m tmem recall`), not for judged answers.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from tmem.corpora.common import Imported, confined, in_range
from tmem.corpora.locomo import load_locomo
from tmem.types import CorpusData, CorpusError, Gold

SCOPE = "interleaved"
FORMAT = "locomo-interleaved"


def question_group(question_id: str) -> str:
    """The source conversation of an interleaved question ("conv-26_q7" -> "conv-26")."""
    return question_id.rsplit("_q", 1)[0]


def message_id(conversation: str, dia_id: str) -> str:
    return f"{conversation}:{dia_id}"


def day_shifts(starts: dict[str, object]) -> dict[str, timedelta]:
    """{conversation: whole-day shift} that puts every conversation's first day on the first conversation's."""
    first = next(iter(starts.values()))
    return {c: timedelta(days=(first.date() - s.date()).days) for c, s in starts.items()}


def shifted(timestamp, shift: timedelta, at: str):
    """A message time moved by its conversation's shift, still within the years tmem accepts (a conversation of 1900
    whose last session is in 2199, moved to the first conversation's 2199, landed in 2498)."""
    try:
        moved = timestamp + shift
    except OverflowError:
        raise CorpusError(f"{at}: field 'timestamp': shifted by {shift.days:+,} days it leaves the calendar; "
                          "refused") from None
    return in_range(moved, f"{timestamp} {shift.days:+,} days", at, "timestamp")


@confined()
def load_interleaved(path: str | Path) -> Imported:
    base = load_locomo(path)
    data = base.data
    starts: dict[str, object] = {}
    for m in data.messages:
        starts[m.scope] = min(m.timestamp, starts.get(m.scope, m.timestamp))
    if not starts:
        raise CorpusError(f"{path}: no conversation with turns to interleave")
    shift = day_shifts(starts)
    messages = sorted((replace(m, id=message_id(m.scope, m.id), scope=SCOPE, channel=m.scope,
                               timestamp=shifted(m.timestamp, shift[m.scope], f"{path} [{m.scope} / {m.id}]"))
                       for m in data.messages), key=lambda m: (m.timestamp, m.id))
    questions = [replace(q, scope=SCOPE) for q in data.questions]
    golds = [(SCOPE, Gold(g.question_id, g.answer,
                          tuple(tuple(message_id(scope, i) for i in unit) for unit in g.evidence), g.superseded))
             for scope, g in data.golds]
    days = {c: s.days for c, s in shift.items()}
    notes = (*base.notes,
             f"{len(starts)} conversations interleaved in one scope {SCOPE!r}, each a channel; clocks shifted by whole "
             f"days so every conversation starts on {next(iter(starts.values())).date()} "
             f"({', '.join(f'{c} {d:+d} d' for c, d in days.items())})",
             "dates are shifted: use this corpus for evidence recall, not for judged temporal answers")
    return Imported(CorpusData(messages, questions, golds), notes)
