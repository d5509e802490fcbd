"""The golden conversation: a small multi-channel conversation in which the decisive update is ranked low by BM25
(it shares no word with the question) but sits inside a dense anchor window of the same topic, and revises the
earlier state. Written by hand (not by the demo's generator); the tests and scripts/measure_batching.py run on it."""
from __future__ import annotations

import json
from datetime import datetime

from tmem.types import Gold, Message, Question

SCOPE = "golden"


def _m(mid, when, author, role, channel, topic, text, progress=None, reply_to=None, stage=1, order=1):
    return Message(mid, SCOPE, text, datetime.fromisoformat(when), author, role, channel, topic, "Planning",
                   stage, order, progress, reply_to)


MESSAGES = [
    _m("m07", "2025-03-01T08:00", "User_2", "Marketing", "#marketing", "newsletter",
       "The newsletter launch is scheduled for Friday."),
    _m("m01", "2025-03-01T09:00", "User_1", "Product Manager", "#release", "launch",
       "Proposal: the product launch is scheduled for March 3 with a soft launch to beta users first.", 0.1),
    _m("m02", "2025-03-01T09:20", "User_2", "Marketing", "#release", "launch",
       "Product launch on March 3 works for marketing; we scheduled the launch emails.", 0.2),
    _m("m03", "2025-03-01T10:05", "User_3", "Engineer", "#release", "launch",
       "Engineering can hit the March 3 product launch if the scheduled code freeze holds.", 0.3),
    _m("m04", "2025-03-01T11:30", "User_4", "Legal Counsel", "#release", "launch",
       "Heads up: legal review slipped, so we're moving go-live to March 17 instead of March 3.", 0.5),
    _m("m05", "2025-03-01T11:45", "User_2", "Marketing", "#release", "launch",
       "Noted, I will shift the campaign calendar accordingly.", 0.6, reply_to="m04"),
    _m("m06", "2025-03-01T12:10", "User_5", "Designer", "#random", "office",
       "Lunch order is in, pizza arrives at noon."),
    _m("m08", "2025-03-01T19:00", "User_6", "Analyst", "#marketing", "newsletter",
       "Newsletter product launch section is drafted."),
    _m("m09", "2025-03-02T09:00", "User_3", "Engineer", "#release", "launch",
       "Code freeze starts Monday; QA owns the regression pass.", 0.2, stage=1, order=2),
]

QUESTION = Question("q1", SCOPE, "When is the product launch scheduled?", "User_6", "knowledge_update")
GOLD = Gold("q1", "March 17", (("m04",),), superseded="March 3")

# Look-alike chatter from other episodes (other topics, other days) that shares the question's words, so that
# with the paper's k = 36 the decisive update m04 is not among the BM25 anchors.
_FILLER_TEXTS = [
    "The team lunch is scheduled for {day}; the product crew is invited.",
    "Product analytics dashboard is scheduled to refresh on {day}.",
    "The launch party venue for the {day} event is booked.",
    "Is the product roadmap review still scheduled for {day}?",
    "The office launch of the new coffee machine is on {day}, product of the month.",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
_TOPICS = ["social", "analytics", "events", "roadmap", "office"]
for _i in range(50):
    _t = _i % 5
    MESSAGES.append(_m(f"f{_i:02d}", f"2025-03-{5 + _i // 5:02d}T{8 + _t * 2:02d}:{(_i * 7) % 60:02d}",
                       f"User_{7 + _t}", "Staff", "#general", _TOPICS[_t],
                       _FILLER_TEXTS[_t].format(day=_DAYS[(_i // 5) % 5])))


def write_jsonl(path) -> None:
    """The golden conversation and question in the project's JSONL format."""
    fields = ("id", "text", "author", "role", "channel", "topic", "phase", "stage", "phase_order", "phase_progress",
              "reply_to")
    with open(path, "w", encoding="utf-8") as out:
        for m in MESSAGES:
            record = {"kind": "message", "scope": m.scope, "timestamp": m.timestamp.isoformat()}
            record.update({f: getattr(m, f) for f in fields if getattr(m, f) is not None})
            out.write(json.dumps(record) + "\n")
        out.write(json.dumps({"kind": "question", "scope": SCOPE, "id": QUESTION.id, "text": QUESTION.text,
                              "asking_user": QUESTION.asking_user, "type": QUESTION.type,
                              "gold_answer": GOLD.answer, "gold_evidence": [list(u) for u in GOLD.evidence],
                              "superseded": GOLD.superseded}) + "\n")
