"""Which verdict leads: the evidence when an offline stand-in answered, the answer's accuracy when a real model did.

An offline stand-in (the extractive answerer and the lexical judge, tmem.models.offline) tells us whether the
pipeline wired its parts together, not whether T-Mem helps an answer model: its accuracy is a plumbing figure. What
the pipeline decides is the answer context, so offline the primary verdict of a trace is its *evidence*: did the
answer context (after compression and the cut at B: tmem.analysis.funnel, "after_compression") hold every gold
evidence unit?

- complete: every unit; partial: some; none: no unit. The missing units are named (their acceptable messages).
- When a real model answered (an endpoint, the local model, a recorded run) accuracy is primary again and the
  evidence stands beside it, so "answer wrong despite complete evidence" is a countable category (tmem.analysis.funnel).
- Abstention questions, and questions without gold evidence, have no unit to hold: they get no evidence verdict
  (NOT_SCORED) and count in neither the evidence share nor its deltas; their answer is still judged, and that
  verdict (secondary offline) is shown beside them. Under accuracy they count as any other question.
- Every accuracy figure names its source: OFFLINE_SOURCE, or the answer model(s) that answered.
- One verdict model: the app's Failures and Compare, the static report and `run`'s summary all read a row's primary
  verdict (`row_verdict`), its attributed stage (`failure`: the evidence's first loss under EVIDENCE, the wrong
  answer's under ACCURACY) and the one category it counts under (`category`) from `with_primary` here.
Pure functions over result rows (Store.RUN_RESULT_COLUMNS plus tmem.evaluation.review's columns) and answers.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from tmem.analysis.annotations import UNATTRIBUTED
from tmem.types import Answer

OFFLINE_SOURCE = "offline-stand-in"
EVIDENCE, ACCURACY = "evidence", "accuracy"
COMPLETE, PARTIAL, NONE = "complete", "partial", "none"
EVIDENCE_VERDICTS = (COMPLETE, PARTIAL, NONE)
NOT_SCORED = "abstention / no gold evidence"
ERROR, NO_VERDICT, CORRECT, WRONG = "error", "no verdict", "correct", "wrong"
ANSWER_ROLE = 2  # the answer role's place in a stored backend label (tmem.viz.batch.results.ROLE_ORDER)
EXPLAIN = {
    EVIDENCE: "Offline stand-ins answered, so the primary verdict is the evidence: did the context the answer model "
              "saw (after compression and the cut at B) hold every gold evidence unit whole (complete), some "
              "(partial) or none? The stand-in's "
              "answer and its lexical verdict are shown beside it, as secondary: its accuracy is a plumbing "
              "figure, not a T-Mem result. Abstention questions have no evidence to hold and are not scored on it.",
    ACCURACY: "A real model answered, so the primary verdict is the judged answer; the evidence verdict stands "
              "beside it, and a wrong answer with complete evidence is its own category.",
}


def evidence_verdict(units: object, in_context: object) -> str | None:
    """complete / partial / none from a question's gold units and those in the answer context; None: not scored."""
    if _missing(units) or _missing(in_context) or int(units) <= 0:
        return None
    held = int(in_context)
    return COMPLETE if held >= int(units) else (NONE if held == 0 else PARTIAL)


def answer_backend(label: object) -> str:
    """The answer role's backend from a stored backend label (the roles joined by "|"), else the label itself."""
    text = "" if _missing(label) else str(label)
    parts = text.split("|")
    return (parts[ANSWER_ROLE] if len(parts) > ANSWER_ROLE else text).split(" [", 1)[0]


def source_of(backends: Iterable[str]) -> str:
    """OFFLINE_SOURCE when every answer came from an offline stand-in, else the real answer model(s), joined."""
    real = sorted({b for b in backends if b and not b.startswith("offline:")})
    return ", ".join(real) if real else OFFLINE_SOURCE


def answers_source(answers: Iterable[Answer]) -> str:
    """The accuracy source of primary answers (their `offline` flag decides, not the name)."""
    return source_of(a.backend.split(" [", 1)[0] for a in answers if not a.offline)


def rows_source(rows: pd.DataFrame) -> str:
    """The accuracy source of result rows: `answer_offline` where the rows carry it, else their backend labels."""
    if not len(rows):
        return OFFLINE_SOURCE
    if "answer_offline" in rows and rows["answer_offline"].notna().any():
        real = rows[rows["answer_offline"].map(lambda v: not _missing(v) and not bool(v))]
        return source_of(answer_backend(b) or "an answer model" for b in real["backend"]) if len(real) \
            else OFFLINE_SOURCE
    return source_of(answer_backend(b) for b in rows["backend"])


def primary(source: str) -> str:
    return EVIDENCE if source == OFFLINE_SOURCE else ACCURACY


def accuracy_label(source: str) -> str:
    """How an accuracy figure says where it came from."""
    if source == OFFLINE_SOURCE:
        return "stand-in accuracy (offline extractive answerer + lexical judge: a plumbing figure)"
    return f"accuracy (answers by {source})"


def answer_verdict(status: object, correct: object) -> str:
    if not _missing(status) and status != "ok":
        return ERROR
    return NO_VERDICT if _missing(correct) else (CORRECT if bool(correct) else WRONG)


def row_verdict(row, measure: str) -> str:
    """The primary verdict of one result row under `measure` (EVIDENCE or ACCURACY)."""
    answered = answer_verdict(row.get("status"), row.get("correct"))
    if measure == ACCURACY or answered == ERROR:
        return answered
    return evidence_verdict(row.get("units"), row.get("units_in_context")) or NOT_SCORED


def with_primary(rows: pd.DataFrame, measure: str) -> pd.DataFrame:
    """Rows with `verdict` (primary), `evidence` (complete / partial / none / "—") and `answer verdict` columns,
    under EVIDENCE the evidence attribution as `failure` / `failure_detail` (the stage that lost a unit; the wrong
    answer's attribution stays as `answer_failure`), and the `category` each row counts under."""
    out = rows.copy()
    records = out.to_dict("records")
    out["verdict"] = [row_verdict(r, measure) for r in records]
    out["evidence"] = [evidence_verdict(r.get("units"), r.get("units_in_context")) or "—" for r in records]
    out["answer verdict"] = [answer_verdict(r.get("status"), r.get("correct")) for r in records]
    if measure == EVIDENCE and "evidence_failure" in out:
        if "failure" in out:
            out["answer_failure"] = out["failure"]
        out["failure"] = out["evidence_failure"]
        out["failure_detail"] = out["evidence_failure_detail"]
    out["category"] = [category(v, f) for v, f in zip(out["verdict"], out["failure"] if "failure" in out
                                                        else [None] * len(out))]
    return out


def category(verdict: str, failure: object) -> str:
    """The one category a row counts under: its verdict when it is not a failure (complete, correct, not scored,
    no verdict, error), else the stage its failure is attributed to (UNATTRIBUTED when none is)."""
    if verdict not in (PARTIAL, NONE, WRONG):
        return verdict
    return failure if isinstance(failure, str) and failure else UNATTRIBUTED


def missing_units(gold_units: Sequence[Sequence[str]], held: set[str]) -> str:
    """The gold units not in the answer context, readable: "Msg_1 or Msg_2; Msg_7" ("" when none is missing)."""
    return "; ".join(" or ".join(unit) for unit in gold_units if not set(unit) & held)


def order_key(verdict: str) -> int:
    """Failures first: none, partial, wrong, error; then complete / correct; not-scored rows last."""
    order = (NONE, WRONG, PARTIAL, ERROR, NO_VERDICT, COMPLETE, CORRECT, NOT_SCORED)
    return order.index(verdict) if verdict in order else len(order)


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)
