"""What-if on k (tmem.analysis.whatif_k): BM25 ranks of gold units recomputed from a stored trace, checked
against rank_bm25 itself, and the corpus curve computed by hand."""
from dataclasses import replace

import pytest
from rank_bm25 import BM25Okapi

from tmem.analysis import whatif_k as w
from tmem.demo.golden import MESSAGES, QUESTION
from tmem.pipeline.retrieval import message_document, query_tokens
from tmem.pipeline.scope import Scope
from tmem.types import Gold

SCOPE = Scope("golden", "golden", MESSAGES)


def test_the_decisive_update_ranks_below_the_seeds_and_discovery_finds_it(golden_trace):
    trace, gold, _ = golden_trace
    rc = w.retrieval_config(trace)
    assert rc.k == 36 and rc.metadata_fields == ("channel", "phase", "topic", "author", "role")
    ranks = w.bm25_ranks(trace, SCOPE)
    assert w.anchors_match(trace, SCOPE)
    # rank_bm25 on the same documents: m04's rank = 1 + the messages scoring strictly higher (no tie at m04)
    reference = BM25Okapi([message_document(m, rc.metadata_fields) for m in SCOPE.messages])
    scores = reference.get_scores(query_tokens(QUESTION, rc))
    m04 = scores[SCOPE.position["m04"]]
    assert sum(s == m04 for s in scores) == 1
    expected = 1 + sum(s > m04 for s in scores)
    (unit,) = w.unit_ranks(trace, gold, SCOPE, ranks)
    assert unit.rank == unit.k_needed == ranks["m04"] == expected > 36
    assert not unit.in_seeds and unit.found and unit.found_beyond_seeds and unit.discovery


def test_seeds_keep_their_recorded_ranks_and_the_rest_follow_by_score(golden_trace):
    trace, _, _ = golden_trace
    ranks = w.bm25_ranks(trace, SCOPE)
    assert {a.message_id: a.rank for a in trace.anchors}.items() <= ranks.items()
    assert sorted(ranks.values()) == list(range(1, len(ranks) + 1))
    scores = w.bm25_scores(trace, SCOPE)
    rest = sorted((r, m) for m, r in ranks.items() if r > len(trace.anchors))
    assert all(scores[SCOPE.position[a]] >= scores[SCOPE.position[b]] for (_, a), (_, b) in zip(rest, rest[1:]))


def test_a_unit_without_a_query_word_is_never_reached(golden_trace):
    trace, _, _ = golden_trace
    lunch = Gold("q1", "noon", (("m06",), ("m04", "m01")))  # m06: "Lunch order is in, pizza arrives at noon."
    ranks = w.bm25_ranks(trace, SCOPE)
    units = w.unit_ranks(trace, lunch, SCOPE, ranks)
    assert "m06" not in ranks  # no query token in its text or its metadata (#random, office, Designer)
    assert units[0].rank is None and units[0].k_needed is None and not units[0].in_seeds
    assert units[1].best_id == min(("m04", "m01"), key=lambda m: ranks.get(m, 10**9))


def test_drifted_seeds_are_detected(golden_trace):
    trace, _, _ = golden_trace
    swapped = replace(trace, anchors=trace.anchors[:-1] + (replace(trace.anchors[-1], message_id="m04"),))
    assert not w.anchors_match(swapped, SCOPE)


def _unit(rank, found, k=36):
    return w.UnitRank("q", "s", "t", 0, ("m",), "m", rank, k, rank is not None and rank <= k, found, True)


def test_k_curve_by_hand():
    units = [_unit(1, True), _unit(5, True), _unit(40, True), _unit(None, False)]
    curve = w.k_curve(units, ks=(12, 36, 48))
    assert curve.bm25_share == (0.5, 0.5, 0.75)
    assert curve.found_share == 0.75 and curve.units == 4 and curve.unreachable == 1
    assert curve.k_to_match == 40  # BM25 alone must reach 3 units: the third-best rank
    more = w.k_curve([_unit(1, True), _unit(None, True)], ks=(36,))
    assert more.k_to_match is None  # discovery found a unit no k reaches
    assert w.k_curve([], ks=(36,)).units == 0


@pytest.mark.parametrize("rank, seeds", [(36, True), (37, False)])
def test_in_seeds_is_rank_within_k(rank, seeds):
    assert _unit(rank, True).in_seeds is seeds
