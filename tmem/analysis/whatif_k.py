"""What-if on k (the paper's Exp-2 argument, Sec. 5.3): would raising the number of BM25 seeds alone have found
the gold evidence that Temporal Evidence Discovery found? Computed without model calls: the trace records its
retrieval parameters and seeds, and tmem.pipeline.retrieval recomputes the scope's whole BM25 ranking for its query.

Per gold unit: its BM25 rank in the scope (the best rank of its acceptable messages; None when no message of the
unit shares a query token, so no k reaches it), the k at which raising k alone would have found it (= that rank),
whether it was among the trace's own k seeds, and whether the trace's evidence R'(q) holds it (for a variant with
discovery: whether discovery found it at the trace's k, 36 by default). Corpus level: the share of units BM25
alone reaches at each k against the variant's own recall, and the smallest k at which BM25 alone matches it.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from tmem.config import RetrievalConfig
from tmem.pipeline.retrieval import query_tokens
from tmem.types import Gold, Trace

KS = (12, 24, 36, 48, 72, 96, 144, 200, 300, 500, 1000)  # the curve's grid (the paper's Fig. 2 goes to 72)


@dataclass(frozen=True)
class UnitRank:
    question_id: str
    scope: str
    qtype: str | None
    unit: int  # 0-based index of the gold unit
    message_ids: tuple[str, ...]
    best_id: str | None  # the unit's best-ranked message
    rank: int | None  # its BM25 rank in the scope (1-based); None: no query token in common, no k finds it
    k: int  # the trace's k
    in_seeds: bool  # rank <= k
    found: bool  # in the trace's evidence R'(q)
    discovery: bool  # the trace ran Temporal Evidence Discovery

    @property
    def k_needed(self) -> int | None:
        """The k at which raising k alone would have found the unit."""
        return self.rank

    @property
    def found_beyond_seeds(self) -> bool:
        """Found by discovery although raising k to the trace's k did not reach it."""
        return self.found and not self.in_seeds

    def as_dict(self) -> dict:
        return {**asdict(self), "k_needed": self.k_needed, "found_beyond_seeds": self.found_beyond_seeds}


def retrieval_config(trace: Trace) -> RetrievalConfig:
    values = dict(trace.config.get("retrieval") or {})
    if "metadata_fields" in values:
        values["metadata_fields"] = tuple(values["metadata_fields"])
    known = RetrievalConfig.__dataclass_fields__
    return RetrievalConfig(**{k: v for k, v in values.items() if k in known})


def bm25_scores(trace: Trace, scope) -> np.ndarray:
    """The BM25 score of every scope message (scope order) for the trace's query and retrieval parameters."""
    rc = retrieval_config(trace)
    return scope.bm25(rc.metadata_fields, rc.k1, rc.b, rc.epsilon).scores(query_tokens(trace.question, rc))


def bm25_seeded(trace: Trace) -> bool:
    seeds = trace.stage("seed_retrieval")
    return seeds is not None and seeds.backend.startswith("bm25")


def bm25_ranks(trace: Trace, scope, scores: np.ndarray | None = None) -> dict[str, int]:
    """{message id: 1-based BM25 rank} for every scope message with a positive score for the trace's query. The
    trace's own BM25 seeds keep their recorded ranks (BM25Index.top_k picks among tied scores at the k-th place);
    the other messages follow by score, ties in scope order."""
    scores = bm25_scores(trace, scope) if scores is None else scores
    ranks = {a.message_id: a.rank for a in trace.anchors} if bm25_seeded(trace) else {}
    order = np.lexsort((np.arange(len(scores)), -scores))
    rest = [scope.messages[i].id for i in order[scores[order] > 0].tolist()]
    rest = [m for m in rest if m not in ranks]
    return ranks | {m: len(ranks) + j for j, m in enumerate(rest, start=1)}


def unit_ranks(trace: Trace, gold: Gold | None, scope, ranks: dict[str, int] | None = None) -> list[UnitRank]:
    """One UnitRank per gold unit of the trace's question (none without gold evidence)."""
    if gold is None or not gold.evidence:
        return []
    ranks = bm25_ranks(trace, scope) if ranks is None else ranks
    k = retrieval_config(trace).k
    found = set(trace.evidence_ids)
    discovery = trace.stage("discovery") is not None
    q = trace.question
    out = []
    for i, unit in enumerate(gold.evidence):
        ranked = sorted((ranks[m], m) for m in unit if m in ranks)
        rank, best = ranked[0] if ranked else (None, None)
        out.append(UnitRank(q.id, q.scope, q.type, i, tuple(unit), best, rank, k, rank is not None and rank <= k,
                            bool(found & set(unit)), discovery))
    return out


def anchors_match(trace: Trace, scope, scores: np.ndarray | None = None) -> bool:
    """The trace's BM25 seeds are a top-k of today's scores for its query (False: the corpus or the code changed
    since the run, so the ranks are today's, not the run's)."""
    if not bm25_seeded(trace):
        return True
    scores = bm25_scores(trace, scope) if scores is None else scores
    seeded = {scope.position[a.message_id] for a in trace.anchors if a.message_id in scope.position}
    if len(seeded) != len(trace.anchors) or len(seeded) != min(retrieval_config(trace).k, int((scores > 0).sum())):
        return False
    others = np.delete(scores, sorted(seeded))
    return not len(others) or min(scores[sorted(seeded)], default=0) >= others.max() - 1e-9


def units_for_traces(traces: Iterable[tuple], scope_of) -> tuple[list[UnitRank], int]:
    """UnitRanks of (trace, gold) pairs, `scope_of(name)` giving a tmem.pipeline.scope.Scope; -> (units, traces whose
    stored seeds no longer match today's ranking, i.e. the corpus or the code changed since the run)."""
    units, drifted = [], 0
    for trace, gold in traces:
        if gold is None or not gold.evidence:
            continue
        scope = scope_of(trace.question.scope)
        scores = bm25_scores(trace, scope)
        drifted += not anchors_match(trace, scope, scores)
        units += unit_ranks(trace, gold, scope, bm25_ranks(trace, scope, scores))
    return units, drifted


@dataclass(frozen=True)
class KCurve:
    ks: tuple[int, ...]
    bm25_share: tuple[float, ...]  # share of units BM25 alone reaches at each k
    found_share: float  # the variant's recall at its own k (units in R'(q))
    k: int  # that k
    units: int
    k_to_match: int | None  # smallest k at which BM25 alone reaches found_share; None: never in these scopes
    unreachable: int  # units no k reaches (no query token in common)


def k_curve(units: Sequence[UnitRank], ks: Iterable[int] = KS) -> KCurve:
    ks = tuple(sorted(set(ks)))
    n = len(units)
    ranks = sorted(u.rank for u in units if u.rank is not None)
    share = tuple(sum(r <= k for r in ranks) / n if n else float("nan") for k in ks)
    need = sum(u.found for u in units)  # units BM25 alone must reach to match the variant's recall
    k_to_match = (ranks[need - 1] if need <= len(ranks) else None) if need else 0
    return KCurve(ks, share, need / n if n else float("nan"), units[0].k if units else 0, n, k_to_match,
                  n - len(ranks))
