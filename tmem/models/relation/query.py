"""The question settles near ties of the fitted relation role (Sec. 4.3, Eq. 5: the relation of a pair is judged
given the query q).

Why: the fitted role (tmem/models/relation/fitted.py) reads only the conversation. When its two most probable
parent candidates are within a small probability margin, the conversation does not decide between them; the
question then may: the candidate that speaks to what the question asks about (its slot's words, the values it
names) is the state the answer hangs on. Only a clear lead in question relevance overturns the model's order, and
ROOT is never part of a tie (whether the child has a parent at all is the conversation's to say).

Question relevance of a candidate, over the same scope statistics the relation rules use:
- the share of the question's IDF mass the candidate's units cover (one denominator for both candidates, unlike
  signals.weighted_overlap, whose smaller side would let a two-word candidate win on one shared word);
- plus VALUES_WEIGHT x the share of the question's values (numbers, dates, names: values.values) it states;
- plus COSINE_WEIGHT x cosine(question, candidate) when the embedder and the scope's vectors are available.

A question that is empty or is the child's own text (`python -m tmem links` per corpus, `--query child|empty`)
settles nothing, so that per-corpus figures measure the structuring alone.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from tmem.models.relation.signals import scope_idf
from tmem.models.relation.values import values
from tmem.text import content_units
from tmem.types import Message, Question

# Chosen on cases dev (`links --questions`, margins 0.05-0.3 x leads 0.05-0.3): edge accuracy rose up to margin 0.15
# and stayed flat after, while more decisions changed; a lead of 0.15 broke fewer right edges than 0.05 and fixed
# more than 0.3
QUERY_MARGIN = 0.15  # P(best) - P(runner-up) at most this is a near tie
MIN_LEAD = 0.15  # the runner-up's question relevance must exceed the best's by this much to overturn it
VALUES_WEIGHT = 0.5
COSINE_WEIGHT = 0.5


class Tie(NamedTuple):
    """A near tie the question settled: candidate indices, the probability margin, the question relevances."""
    winner: int
    loser: int
    margin: float
    relevance_winner: float
    relevance_loser: float


def _normalised(text: str) -> str:
    return " ".join(text.split()).casefold()


def conditions_on(question: Question | None, child: Message) -> bool:
    """The question can settle a tie: it says something, and something other than the child itself."""
    return question is not None and bool(question.text.strip()) and \
        _normalised(question.text) != _normalised(child.text)


def coverage(question_units: set[str], candidate_units: set[str], idf) -> float:
    """Share of the question's IDF mass that the candidate's units cover (0..1)."""
    mass = sum(idf(u) for u in question_units)
    return sum(idf(u) for u in question_units & candidate_units) / mass if mass else 0.0


def question_cosines(question: Question, candidates: Sequence[Message], scope, embedder) -> np.ndarray | None:
    """cosine(question, candidate) from the scope's message vectors and one embedding of the question; None
    without an embedder, outside a scope with vectors, or when the embedder fails (lexical relevance only)."""
    if embedder is None or not hasattr(scope, "vectors_at"):
        return None
    rows = [scope.position.get(p.id) for p in candidates]
    if any(r is None for r in rows):
        return None
    try:
        q = _query_vector(embedder, question.text)
        return np.asarray(scope.vectors_at(embedder, rows), dtype=float) @ q
    except Exception:  # noqa: BLE001 - an unavailable embedder: the lexical part decides
        return None


# (embedder, question text) -> vector, one per question. Lower case: state filled at run time, not a constant, so
# not in the relation hash (tmem/evaluation/tuning.py hashes the upper-case names)
_query_vectors: dict[tuple[str, str], np.ndarray] = {}


def _query_vector(embedder, text: str) -> np.ndarray:
    key = (getattr(embedder, "name", repr(embedder)), text)
    vector = _query_vectors.get(key)
    if vector is None:
        if len(_query_vectors) > 4096:  # bounded: a long batch asks many questions
            _query_vectors.clear()
        vector = _query_vectors[key] = np.asarray(embedder.embed([text], kind="query"), dtype=float)[0]
    return vector


def question_relevance(question: Question, candidates: Sequence[Message], scope,
                       cosines: np.ndarray | None = None) -> np.ndarray:
    """Per candidate: coverage + VALUES_WEIGHT x share of the question's values + COSINE_WEIGHT x cosine."""
    idf, units = scope_idf(scope), content_units(question.text)
    asked = values(question.text)
    out = np.array([coverage(units, scope.units_of(p), idf) for p in candidates])
    if asked:
        out += VALUES_WEIGHT * np.array([len(asked & values(p.text)) / len(asked) for p in candidates])
    if cosines is not None:
        out += COSINE_WEIGHT * np.asarray(cosines, dtype=float)
    return out


def near_tie(probs: np.ndarray, n_candidates: int, margin: float) -> tuple[int, int] | None:
    """(best, runner-up) candidate indices when the best option is a candidate (not ROOT, the last option) and
    the best other candidate is within `margin` of it."""
    if n_candidates < 2 or int(np.argmax(probs)) == n_candidates:
        return None
    order = np.argsort(-probs[:n_candidates], kind="stable")
    best, second = int(order[0]), int(order[1])
    return (best, second) if probs[best] - probs[second] <= margin else None


def settle_tie(question: Question | None, child: Message, candidates: Sequence[Message], probs: np.ndarray,
               scope, embedder=None, margin: float = QUERY_MARGIN, lead: float = MIN_LEAD) -> Tie | None:
    """The runner-up wins a near tie when it is clearly (by `lead`) more relevant to the question; None when
    there is no near tie, the question cannot condition (`conditions_on`), or it does not decide."""
    pair = near_tie(probs, len(candidates), margin) if conditions_on(question, child) else None
    if pair is None:
        return None
    best, second = pair
    shown = [candidates[best], candidates[second]]
    a, b = question_relevance(question, shown, scope, question_cosines(question, shown, scope, embedder))
    if b - a < lead:
        return None
    return Tie(second, best, round(float(probs[best] - probs[second]), 4), float(b), float(a))


def tie_reason(tie: Tie, candidates: Sequence[Message]) -> str:
    return (f"question settled a tie: {candidates[tie.winner].id} over {candidates[tie.loser].id} (margin "
            f"{tie.margin:.2f}, question relevance {tie.relevance_winner:.2f} vs {tie.relevance_loser:.2f})")
