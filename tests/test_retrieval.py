"""Seed retrieval: the metadata-expanded document, exact BM25Okapi scores, top-k agreement with rank_bm25."""
import math
import random

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from tmem.config import RetrievalConfig
from tmem.pipeline.retrieval import BM25Index, best_first, bm25_tokens, message_document, query_tokens, retrieve_anchors
from tmem.types import Question


def test_hand_computed_bm25_score():
    index = BM25Index.build([["a", "b"], ["a", "c"], ["d"]])
    # N = 3, df(b) = 1: idf = ln(2.5) - ln(1.5); avgdl = 5/3; doc 0 has length 2 and tf(b) = 1
    idf = math.log(2.5) - math.log(1.5)
    expected = idf * 1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2 / (5 / 3)))
    assert index.scores(["b"]) == pytest.approx([expected, 0.0, 0.0])


def test_bm25_tokens_drop_function_words_but_keep_polarity_and_time_order():
    assert bm25_tokens("Is the launch NOT moving? We now ship it only after the review, no longer on Friday.") == [
        "launch", "not", "moving", "now", "ship", "only", "after", "review", "no", "longer", "friday"]


def test_repeated_query_tokens_count_twice_like_rank_bm25():
    index = BM25Index.build([["a", "b"], ["a", "c"], ["d"]])
    assert index.scores(["b", "b"])[0] == pytest.approx(2 * index.scores(["b"])[0])


def _zipf_corpus(n_docs: int, seed: int = 3) -> list[list[str]]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    return [rng.choices(vocab, weights, k=rng.randint(3, 40)) for _ in range(n_docs)]


def test_scores_and_top_k_agree_with_rank_bm25():
    docs = _zipf_corpus(3000)
    ours, reference = BM25Index.build(docs), BM25Okapi(docs)
    rng = random.Random(9)
    overlaps = []
    for _ in range(40):
        query = rng.sample(docs[rng.randrange(len(docs))], 3)
        expected = reference.get_scores(query)
        assert np.allclose(ours.scores(query), expected)
        top_ref = set(np.argsort(-expected, kind="stable")[:36])
        overlaps.append(len(top_ref & {i for i, _ in ours.top_k(query, 36)}) / 36)
    assert np.mean(overlaps) >= 0.95


def test_metadata_expansion_and_query(golden_scope):
    m04 = golden_scope.by_id["m04"]
    doc = message_document(m04, RetrievalConfig().metadata_fields)
    assert {"release", "launch", "planning", "user_4", "legal", "counsel"} <= set(doc)
    assert "launch" not in message_document(m04, ())
    q = Question("q", "golden", "Launch date?", "User_6")
    assert query_tokens(q, RetrievalConfig()) == ["user_6", "launch", "date"]
    assert query_tokens(q, RetrievalConfig(query_includes_user=False)) == ["launch", "date"]


def test_anchors_ranked_and_capped(golden_scope):
    from tmem.demo.golden import QUESTION

    config = RetrievalConfig(k=5)
    index = golden_scope.bm25(config.metadata_fields)
    anchors = retrieve_anchors(QUESTION, golden_scope.messages, index, config)
    assert [a.rank for a in anchors] == [1, 2, 3, 4, 5]
    assert all(a.score >= b.score for a, b in zip(anchors, anchors[1:]))
    assert "m04" not in {a.message_id for a in retrieve_anchors(QUESTION, golden_scope.messages, index,
                                                                RetrievalConfig())}


def test_zero_score_messages_are_not_anchors(golden_scope):
    index = golden_scope.bm25(())
    q = Question("q", "golden", "zzzunknownword", None)
    assert retrieve_anchors(q, golden_scope.messages, index, RetrievalConfig(metadata_fields=())) == ()


def test_a_tie_group_across_the_kth_place_keeps_its_earliest_members():
    """By hand: k = 3 over [1, 3, 2, 2, 2, 2, 0] -> 3 (index 1), then the first two 2s (indices 2, 3)."""
    assert best_first(np.array([1.0, 3, 2, 2, 2, 2, 0]), 3).tolist() == [1, 2, 3]
    assert best_first(np.array([1.0, 2]), 5).tolist() == [1, 0] and best_first(np.array([1.0]), 0).tolist() == []


def test_best_first_is_a_stable_sort_prefix_on_heavily_tied_scores():
    """Many equal BM25 scores (repeated template lines) are the normal case; the seeds must not depend on which
    tied members a CPU-dispatched selection picks."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        scores = rng.integers(0, 4, size=int(rng.integers(1, 300))).astype(float)
        k = int(rng.integers(0, len(scores) + 2))
        assert best_first(scores, k).tolist() == np.argsort(-scores, kind="stable")[:k].tolist()
