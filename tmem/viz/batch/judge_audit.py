"""Judge audit: two judges side by side on the same answers, disagreements first, gold answers that
look broken flagged, exportable. Pure functions; the page (pages/judge_audit.py) only loads and renders.

Judge A is the judge that ran when the answer was produced (the trace's own verdict: an LLM judge such as the
recorded local model, or the offline judge of that time); judge B is the offline lexical judge of today
(tmem.models.lexical_judge), re-run on the same gold and answer. Where both are offline the column still shows
what today's rules change against the stored verdict.

A gold answer is flagged as possibly broken (LoCoMo is known to carry some wrong gold answers) when:
- "no evidence": the question is answerable (not an abstention question) but its gold lists no evidence message,
  or names a message that is not in the corpus;
- "not in its evidence": none of the gold's content words or numbers appears in its own evidence messages (their
  text, and the day, month and year, ±1, of their timestamps), and no date of the gold lies within RELATIVE_DAYS of
  one of them (relative dates: "yesterday" resolves near the message) — a gold its annotated evidence cannot
  support;
- "abstention mismatch": the gold says there is no answer but the question type expects one, or the reverse.
A flag is a prompt to read the question, not a verdict on it; the reason is shown beside it.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date

import pandas as pd

from tmem.models.lexical_judge import dates, is_abstention, key_tokens, lexical_verdict
from tmem.text import content_units
from tmem.types import Gold, Message, Question, Trace

LEXICAL_BACKEND = "offline:lexical-judge"
LEXICAL = f"{LEXICAL_BACKEND} (today)"
RELATIVE_DAYS = 31  # "last week", "a few days ago", "last month" resolve within a month of the message
ABSTENTION_TYPES = frozenset({"abstention", "adversarial", "unanswerable"})
COLUMNS = ("agree", "gold flag", "scope", "question", "type", "variant", "presentation", "question text", "gold",
           "answer", "judge A", "A verdict", "A reason", "judge B", "B verdict", "B reason")


@dataclass(frozen=True)
class AuditRow:
    scope: str
    question_id: str
    qtype: str
    question: str
    variant: str
    presentation: str
    gold: str
    answer: str
    judge_a: str
    verdict_a: bool | None
    reason_a: str
    judge_b: str
    verdict_b: bool | None
    reason_b: str
    gold_flag: str = ""

    @property
    def agree(self) -> bool | None:
        if self.verdict_a is None or self.verdict_b is None:
            return None
        return self.verdict_a == self.verdict_b


def gold_flag(question: Question, gold: Gold | None, evidence: Sequence[Message]) -> str:
    """Why the gold looks broken, or "" (rules in the module docstring)."""
    if gold is None:
        return "no gold answer"
    abstains = is_abstention(gold.answer)
    expects_none = (question.type or "").lower() in ABSTENTION_TYPES
    if question.type and abstains != expects_none:
        return ("abstention mismatch: the gold says there is no answer" if abstains
                else "abstention mismatch: an abstention question with a gold answer")
    if abstains or expects_none:
        return ""
    if not gold.evidence:
        return "no evidence: an answerable question whose gold lists no evidence message"
    found = {m.id for m in evidence}
    missing = [" / ".join(unit) for unit in gold.evidence if not any(i in found for i in unit)]
    if missing:
        return f"no evidence: evidence message(s) {', '.join(missing[:3])} not in the corpus"
    words = content_units(gold.answer) | key_tokens(gold.answer)
    gold_dates = dates(gold.answer)
    if not words and not gold_dates:
        return ""
    text = " ".join(m.text for m in evidence)
    # A message's time counts as what it says: "yesterday" in a message of 8 May 2023 supports gold "7 May 2023",
    # so gold dates within RELATIVE_DAYS of an evidence message, and its year, month and day, are supported.
    stamps = [m.timestamp.date() for m in evidence]
    said = content_units(text) | key_tokens(text) | {t for d in stamps for t in key_tokens(f"{d.day} "
                                                                                            f"{d:%B} {d.year}")}
    said |= {str(d.year + step) for d in stamps for step in (-1, 1)}  # "last year", "next year"
    near = any(abs((date.fromisoformat(g) - d).days) <= RELATIVE_DAYS for g in gold_dates for d in stamps)
    if not (words & said) and not near and not (gold_dates & dates(text)):
        return "not in its evidence: no word, number or date of the gold appears in its evidence messages"
    return ""


def rows_from_trace(trace: Trace, variant: str, gold: Gold | None, flag: str, min_f1: float = 0.5) -> list[AuditRow]:
    """One row per answer of a stored trace: its own verdict (A) and today's offline lexical judge (B)."""
    q, rows = trace.question, []
    for answer in trace.answers:
        stored = trace.verdict(answer.presentation)
        if gold is not None:
            verdict_b, reason_b = lexical_verdict(gold.answer, answer.text, min_f1)
        else:
            verdict_b, reason_b = None, "no gold answer"
        rows.append(AuditRow(q.scope, q.id, q.type or "", q.text, variant, answer.presentation,
                             gold.answer if gold else "", answer.text,
                             stored.backend if stored else "(not judged)", stored.correct if stored else None,
                             _reason(stored.raw) if stored else "", LEXICAL, verdict_b,
                             reason_b, flag))
    return rows


def rows_from_trace_json(text: str, variant: str, gold: Gold | None, flag: str,
                         min_f1: float = 0.5) -> list[AuditRow]:
    """`rows_from_trace` read from a stored trace's JSON: only its question, answers and verdicts are parsed."""
    data = json.loads(text)
    q = data["question"]
    verdicts = {v["presentation"]: v for v in data.get("verdicts") or ()}
    rows = []
    for answer in data.get("answers") or ():
        stored = verdicts.get(answer["presentation"])
        verdict_b, reason_b = (lexical_verdict(gold.answer, answer["text"], min_f1) if gold is not None
                               else (None, "no gold answer"))
        rows.append(AuditRow(q["scope"], q["id"], q.get("type") or "", q["text"], variant, answer["presentation"],
                             gold.answer if gold else "", answer["text"],
                             stored["backend"] if stored else "(not judged)", stored["correct"] if stored else None,
                             _reason(stored["raw"]) if stored else "", LEXICAL, verdict_b, reason_b, flag))
    return rows


def same_judge(rows: Sequence[AuditRow]) -> bool:
    """Whether judge A is today's lexical judge on every judged row: the audit then compares a judge with itself."""
    judged = [r for r in rows if r.verdict_a is not None]
    return bool(judged) and all(r.judge_a.startswith(LEXICAL_BACKEND) for r in judged)


def rows_from_recording(runs: Iterable[Mapping], model: str, golds: Mapping[str, tuple[Question, Gold | None, str]],
                        min_f1: float = 0.5) -> list[AuditRow]:
    """The recorded local-model demo (data/recorded-local.json): its judge's verdicts (A) against the offline
    lexical judge (B) on the recorded answers. `golds`: question id -> (question, gold, flag)."""
    rows = []
    for run in runs:
        if run["question"] not in golds or stale_run(run, golds[run["question"]][0]):
            continue
        q, gold, flag = golds[run["question"]]
        for presentation, text in run.get("answers", {}).items():
            verdict_b, reason_b = lexical_verdict(gold.answer, text, min_f1) if gold else (None, "no gold answer")
            rows.append(AuditRow(q.scope, q.id, q.type or "", q.text, f"{run.get('variant', '')} "
                                 f"({run.get('preset', '')})", presentation, gold.answer if gold else "", text,
                                 f"recorded:{model}", run.get("verdicts", {}).get(presentation), "recorded verdict",
                                 LEXICAL, verdict_b, reason_b, flag))
    return rows


def stale_run(run: Mapping, question: Question) -> bool:
    """A recorded run whose question text is not the stored question's: the corpus was regenerated since the
    recording, so its answers belong to another question and are left out (the page says how many)."""
    return "text" in run and run["text"] != question.text


def _reason(raw: str) -> str:
    return " ".join(raw.split())[:200]


def _sort_key(row: AuditRow) -> tuple:
    """Disagreements first, then flagged golds, then the rest; stable within each group."""
    return (row.agree is not False, not row.gold_flag)


def audit_frame(rows: Sequence[AuditRow]) -> pd.DataFrame:
    ordered = sorted(rows, key=_sort_key)
    mark = lambda v: "—" if v is None else ("correct" if v else "incorrect")  # noqa: E731
    return pd.DataFrame([{"agree": {None: "—", True: "yes", False: "no"}[r.agree], "gold flag": r.gold_flag,
                          "scope": r.scope, "question": r.question_id, "type": r.qtype, "variant": r.variant,
                          "presentation": r.presentation, "question text": r.question, "gold": r.gold,
                          "answer": r.answer, "judge A": r.judge_a, "A verdict": mark(r.verdict_a),
                          "A reason": r.reason_a, "judge B": r.judge_b, "B verdict": mark(r.verdict_b),
                          "B reason": r.reason_b} for r in ordered], columns=list(COLUMNS))


def summary(rows: Sequence[AuditRow]) -> dict[str, int]:
    judged = [r for r in rows if r.agree is not None]
    return {"answers": len(rows), "both judged": len(judged), "disagree": sum(not r.agree for r in judged),
            "A correct": sum(bool(r.verdict_a) for r in judged), "B correct": sum(bool(r.verdict_b) for r in judged),
            "A only": sum(bool(r.verdict_a) and not r.verdict_b for r in judged),
            "B only": sum(bool(r.verdict_b) and not r.verdict_a for r in judged),
            "gold flagged": len({(r.scope, r.question_id) for r in rows if r.gold_flag})}


def export_json(rows: Sequence[AuditRow]) -> str:
    return json.dumps([asdict(r) | {"agree": r.agree} for r in sorted(rows, key=_sort_key)], ensure_ascii=False,
                      indent=1)
