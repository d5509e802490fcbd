"""Evaluation metrics: key-evidence recall (paper App. A.4, Eq. 9-10), answer accuracy per question type, and the
token / time / cost totals of a run (App. E.1). Pure functions over plain values; gold is read by the callers.

Recall is counted in evidence units: a unit is recovered when the retrieved set holds any of its acceptable
messages (Eq. 9), and recall is micro-averaged over all units of all questions (Eq. 10). Abstention questions
are excluded because the absence of answer-bearing evidence is their defining property (Sec. 5.3), and so are
questions without gold evidence (they have no unit to recover).
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tmem.models.llm.budget_cap import Prices  # noqa: F401 - the run's prices, also the budget cap's
from tmem.types import Gold, Question

ABSTENTION_TYPES = frozenset({"abstention", "adversarial", "unanswerable"})
_ABSTENTION_ANSWER = re.compile(r"no information (is )?available|not mentioned|cannot be answered|unanswerable",
                                re.IGNORECASE)


def is_abstention(question: Question, gold: Gold | None) -> bool:
    """An abstention / unanswerable question: by its type, or by a gold answer that says there is no answer."""
    if (question.type or "").lower() in ABSTENTION_TYPES:
        return True
    return bool(gold and gold.answer and _ABSTENTION_ANSWER.search(gold.answer))


def recall_eligible(question: Question, gold: Gold | None) -> bool:
    """Counted in key-evidence recall: not an abstention question, and at least one gold evidence unit."""
    return gold is not None and bool(gold.evidence) and not is_abstention(question, gold)


def units_recovered(gold: Gold, retrieved: Iterable[str]) -> int:
    """sum_u r_q(u; R) with r_q(u; R) = 1[R(q) & A(u) != {}] (Eq. 9)."""
    found = set(retrieved)
    return sum(bool(found.intersection(unit)) for unit in gold.evidence)


@dataclass(frozen=True)
class Recall:
    """Micro-averaged key-evidence recall (Eq. 10) with what it was computed over."""

    recovered: int
    units: int
    questions: int
    messages: int  # retrieved messages, summed over questions
    chains: int = 0  # questions with a gold UPDATE chain (tmem.analysis.chains)
    chains_complete: int = 0  # of them, those whose whole chain was retrieved (Complete Chain Recall, Exp-5)

    @property
    def chain_recall(self) -> float:
        return self.chains_complete / self.chains if self.chains else float("nan")

    @property
    def recall(self) -> float:
        return self.recovered / self.units if self.units else float("nan")

    @property
    def mean_messages(self) -> float:
        return self.messages / self.questions if self.questions else float("nan")

    def __add__(self, other: Recall) -> Recall:
        return Recall(self.recovered + other.recovered, self.units + other.units, self.questions + other.questions,
                      self.messages + other.messages, self.chains + other.chains,
                      self.chains_complete + other.chains_complete)

    def as_dict(self) -> dict:
        return {"recall": _round(self.recall), "questions": self.questions, "units": self.units,
                "mean_messages": _round(self.mean_messages, 2),
                "chain_recall": _round(self.chain_recall), "chains": self.chains}


def question_recall(gold: Gold, retrieved: Sequence[str], chain: Sequence[Sequence[str]] | None = None) -> Recall:
    """`chain`: the question's gold UPDATE chain (tmem.analysis.chains.gold_chain), None when it has none."""
    ids = list(dict.fromkeys(retrieved))
    complete = chain is not None and all(set(unit) & set(ids) for unit in chain)
    return Recall(units_recovered(gold, ids), len(gold.evidence), 1, len(ids), int(chain is not None),
                  int(complete))


def micro_recall(items: Iterable[tuple[Gold, Sequence[str]]]) -> Recall:
    """Eq. 10 over (gold, retrieved ids) pairs of eligible questions."""
    total = Recall(0, 0, 0, 0)
    for gold, retrieved in items:
        total = total + question_recall(gold, retrieved)
    return total


# ------------------------------------------------------------------------------------------------- accuracy
@dataclass(frozen=True)
class Accuracy:
    correct: int
    judged: int

    @property
    def value(self) -> float:
        return self.correct / self.judged if self.judged else float("nan")


def accuracy_by_type(rows: Iterable[Mapping]) -> dict[str, Accuracy]:
    """{question type: Accuracy} plus "overall", over rows with a `qtype` and a boolean `correct` (None = not
    judged, left out)."""
    tally: dict[str, list[int]] = {}
    for row in rows:
        correct = row.get("correct")
        if correct is None or (isinstance(correct, float) and math.isnan(correct)):
            continue
        for name in (row.get("qtype") or "untyped", "overall"):
            t = tally.setdefault(name, [0, 0])
            t[0] += bool(correct)
            t[1] += 1
    ordered = sorted(k for k in tally if k != "overall") + (["overall"] if "overall" in tally else [])
    return {k: Accuracy(*tally[k]) for k in ordered}


# ------------------------------------------------------------------------------------------- cost and time
def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty sequence; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _round(value: float, digits: int = 4) -> float | None:
    return None if math.isnan(value) else round(value, digits)
