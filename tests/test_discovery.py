"""Temporal Evidence Discovery: DBSCAN clusters, density (Eq. 2), padded windows, in-window ranking, selection."""
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from tmem.config import DiscoveryConfig
from tmem.models.base import SelectionResult
from tmem.pipeline.discovery import cluster_anchors, discover_evidence, rank_window, seed_density
from tmem.types import Anchor, Message, Selection

T0 = datetime(2025, 1, 1)


def msg(mid, hours, topic="A"):
    return Message(mid, "s", f"text {mid}", T0 + timedelta(hours=hours), topic=topic)


def test_seed_density_uses_the_span_floor():
    assert seed_density(3, 1.0, 2.0) == 1.5  # span below delta: 3 / 2 h
    assert seed_density(2, 11.0, 2.0) == pytest.approx(2 / 11)
    assert seed_density(4, 8.0, 2.0) == 0.5


def test_clusters_per_topic_with_density_threshold():
    anchors = [msg("a1", 0), msg("a2", 1), msg("a3", 2), msg("a4", 30), msg("b1", 0, "B"), msg("b2", 11, "B")]
    clusters = cluster_anchors(anchors, DiscoveryConfig())
    by_topic = {c.topic: c for c in clusters}
    assert set(by_topic) == {"A", "B"}  # a4 is DBSCAN noise: no cluster of its own
    a, b = by_topic["A"], by_topic["B"]
    assert a.member_ids == ("a1", "a2", "a3") and a.span_hours == 2.0 and a.density == 1.5 and a.accepted
    assert b.span_hours == 11.0 and b.density == pytest.approx(0.1818, abs=1e-4) and not b.accepted


def test_eps_is_twelve_hours_inclusive():
    assert len(cluster_anchors([msg("x", 0), msg("y", 12)], DiscoveryConfig())) == 1
    assert cluster_anchors([msg("x", 0), msg("y", 12.5)], DiscoveryConfig()) == ()


def test_missing_topic_is_its_own_group_and_topic_can_be_ignored():
    anchors = [msg("a", 0, None), msg("b", 1, None), msg("c", 0.5, "A")]
    with_topic = cluster_anchors(anchors, DiscoveryConfig())
    assert [(c.topic, c.member_ids) for c in with_topic] == [(None, ("a", "b"))]
    without = cluster_anchors(anchors, DiscoveryConfig(use_topic=False))
    assert [c.member_ids for c in without] == [("a", "c", "b")] and without[0].topic is None


def test_rank_window_orders_by_cosine():
    import numpy as np

    vectors = np.array([[1, 0], [0.6, 0.8], [0, 1]], dtype=float)
    assert rank_window(np.array([0, 1.0]), vectors, [0, 1, 2], 2) == [(2, 1.0), (1, 0.8)]


def test_golden_window_is_padded_and_recovers_the_update(golden_scope, offline):
    from tmem.demo.golden import QUESTION

    index = golden_scope.bm25(("channel", "phase", "topic", "author", "role"))
    from tmem.config import RetrievalConfig
    from tmem.pipeline.retrieval import retrieve_anchors

    anchors = retrieve_anchors(QUESTION, golden_scope.messages, index, RetrievalConfig())
    found = discover_evidence(QUESTION, anchors, golden_scope, DiscoveryConfig(), offline.evidence_utility,
                              offline.embedder)
    accepted = [c for c in found.clusters if c.accepted]
    assert len(accepted) == 1 and accepted[0].topic == "launch"
    window = found.windows[0]
    assert window.start == accepted[0].start - timedelta(hours=12)
    assert window.end == accepted[0].end + timedelta(hours=12)
    assert "m04" in {c.message_id for c in window.candidates}
    assert "m04" in found.evidence_ids and "m04" not in {a.message_id for a in anchors}
    assert found.evidence_ids[:len(anchors)] == tuple(a.message_id for a in anchors)


def test_top_n_caps_candidates(golden_scope, offline):
    from tmem.demo.golden import QUESTION

    anchors = [Anchor("m01", 3.0, 1), Anchor("m02", 2.0, 2)]
    found = discover_evidence(QUESTION, anchors, golden_scope, DiscoveryConfig(top_n=2), offline.evidence_utility,
                              offline.embedder)
    assert all(len(w.candidates) <= 2 for w in found.windows) and found.windows


@dataclass(frozen=True)
class _BadUtility:
    backend: str = "test:bad"
    offline: bool = False

    def select(self, question, window_id, candidates, similarities, scope, anchor_ids=frozenset()):
        return SelectionResult(selections=(Selection("nope", window_id, "KEY", "unknown id"),
                                           Selection(candidates[0].id, window_id, "MAYBE", "bad label"),
                                           Selection(candidates[0].id, window_id, "SUPPORT", "fine")))


def test_invalid_selections_are_dropped_and_recorded(golden_scope, offline):
    from tmem.demo.golden import QUESTION

    anchors = [Anchor("m01", 3.0, 1), Anchor("m02", 2.0, 2)]
    found = discover_evidence(QUESTION, anchors, golden_scope, DiscoveryConfig(), _BadUtility(), offline.embedder)
    assert [s.label for s in found.selections] == ["SUPPORT"]
    assert len(found.errors) == 2 and "nope" in found.errors[0].message


class _DownEmbedder:
    """An embedding service whose retries are spent: every call fails."""

    name, offline = "openai:down-embedder", False

    def embed(self, texts, kind="passage"):
        raise RuntimeError("openai:down-embedder: embeddings failed after 4 attempts: APIConnectionError")


def test_a_failing_embedder_becomes_an_error_record_and_windows_are_ranked_lexically(golden_scope, offline):
    from tmem.demo.golden import QUESTION
    from tmem.pipeline.scope import Scope

    scope = Scope(golden_scope.corpus, golden_scope.name, golden_scope.messages)  # no vectors cached for it
    anchors = [Anchor("m01", 3.0, 1), Anchor("m02", 2.0, 2)]
    found = discover_evidence(QUESTION, anchors, scope, DiscoveryConfig(), offline.evidence_utility,
                              _DownEmbedder())
    [error] = [e for e in found.errors if "down-embedder" in e.message]
    assert error.message == "embedder openai:down-embedder failed (RuntimeError)"
    assert "lexical fallback" in error.fallback
    assert found.windows and found.windows[0].candidates  # the question went on, ranked by the fallback


def test_replay_misses_of_the_embedder_are_not_swallowed(golden_scope, offline):
    from tmem.demo.golden import QUESTION
    from tmem.models.llm.cache import ReplayMissError
    from tmem.pipeline.scope import Scope

    class ReplayOnly(_DownEmbedder):
        def embed(self, texts, kind="passage"):
            raise ReplayMissError("replay-only mode: no cached vector")

    scope = Scope(golden_scope.corpus, golden_scope.name, golden_scope.messages)
    with pytest.raises(ReplayMissError):
        discover_evidence(QUESTION, [Anchor("m01", 3.0, 1), Anchor("m02", 2.0, 2)], scope, DiscoveryConfig(),
                          offline.evidence_utility, ReplayOnly())


# ------------------------------------------------------------------ options that adapt discovery to the scope
def _scope(messages):
    from tmem.pipeline.scope import Scope

    return Scope("c", "s", sorted(messages, key=lambda m: (m.timestamp, m.id)))


def chat(mid, hours, channel):
    return Message(mid, "s", f"text {mid}", T0 + timedelta(hours=hours), channel=channel)


def test_background_threshold_is_the_likelihood_ratio_rule():
    from tmem.pipeline.discovery import background_threshold

    # l0 = 0.1, l1 = 1.0: mu* = 0.9 / ln 10 = 0.39087 (App. F.1, Eq. 11), strictly between the two rates
    assert background_threshold(0.1, 10.0) == pytest.approx(0.9 / 2.302585, rel=1e-5)
    assert 0.1 < background_threshold(0.1, 10.0) < 1.0


def test_channel_locality_keeps_windows_inside_the_anchors_channel():
    from tmem.pipeline.discovery import window_positions

    messages = [chat(f"x{i}", i, "X") for i in range(6)] + [chat(f"y{i}", i + 0.5, "Y") for i in range(6)]
    scope = _scope(messages)
    anchors = [scope.by_id[i] for i in ("x1", "x2", "y3", "y4")]
    paper = cluster_anchors(anchors, DiscoveryConfig(), scope)
    assert [c.member_ids for c in paper] == [("x1", "x2", "y3", "y4")]  # no topic: one group, both channels
    by_channel = cluster_anchors(anchors, DiscoveryConfig(locality="channel"), scope)
    assert [(c.channel, c.member_ids) for c in by_channel] == [("X", ("x1", "x2")), ("Y", ("y3", "y4"))]
    config = DiscoveryConfig(locality="channel", pad_hours=1.0)
    _, _, positions = window_positions(scope, by_channel[0], config)
    assert [scope.messages[p].id for p in positions] == ["x0", "x1", "x2", "x3"]  # 1 h either side, X only


def test_message_clock_and_background_test():
    from tmem.pipeline.discovery import window_positions

    # channel X: 20 messages one minute apart; anchors at ranks 2, 4 (close) and 15 (alone)
    messages = [chat(f"x{i:02d}", i / 60, "X") for i in range(20)]
    scope = _scope(messages)
    anchors = [scope.by_id[i] for i in ("x02", "x04", "x15")]
    config = DiscoveryConfig(locality="channel", clock="messages", eps_messages=3, delta_messages=4,
                             pad_messages=1, density_test="background", rate_ratio=4.0)
    [cluster] = cluster_anchors(anchors, config, scope)
    # span 2 messages, floor 4: rho = 2 / 4 = 0.5; background 3 anchors / 20 messages = 0.15, mu* = 0.15 * 3 / ln 4
    assert cluster.unit == "message" and cluster.member_ids == ("x02", "x04") and cluster.density == 0.5
    assert cluster.background == pytest.approx(0.15) and cluster.threshold == pytest.approx(0.3246, abs=1e-4)
    assert cluster.accepted
    _, _, positions = window_positions(scope, cluster, config)
    assert [scope.messages[p].id for p in positions] == ["x01", "x02", "x03", "x04", "x05"]
    stricter = cluster_anchors(anchors, DiscoveryConfig(**{**config.__dict__, "rate_ratio": 10.0}), scope)
    assert not stricter[0].accepted  # mu* = 0.15 * 9 / ln 10 = 0.586 > 0.5


def test_paper_defaults_are_unchanged_by_the_scope_argument():
    anchors = [msg("a1", 0), msg("a2", 1), msg("a3", 2), msg("b1", 0, "B"), msg("b2", 11, "B")]
    scope = _scope(anchors)
    assert cluster_anchors(anchors, DiscoveryConfig(), scope) == cluster_anchors(anchors, DiscoveryConfig())


def test_locality_prior_ranks_window_and_global_candidates_together(offline):
    """Channel X: a window around the anchors at 0-1 h holds unrelated chatter; at 80 h, far outside it, a message
    says what the question asks. As a filter the windows never see it; as a prior it outranks the weakest window
    message (similarity + 0.05 boost) and takes its place, the candidate budget staying top_n per window."""
    from tmem.types import Question

    texts = ["the parking garage opens at eight", "lunch was pasta again today", "who left the lights on",
             "printer on floor two is jammed"]
    messages = [Message(f"x{i}", "s", t, T0 + timedelta(hours=i * 0.5), channel="X") for i, t in enumerate(texts)]
    messages.append(Message("far", "s", "the quarterly budget review moved to friday", T0 + timedelta(hours=80),
                            channel="X"))
    messages.append(Message("other", "s", "the quarterly budget review moved to friday", T0 + timedelta(hours=81),
                            channel="Y"))
    scope = _scope(messages)
    question = Question("q", "s", "When is the quarterly budget review?")
    anchors = [Anchor("x0", 2.0, 1), Anchor("x1", 1.0, 2)]
    config = DiscoveryConfig(locality="channel", top_n=3)
    plain = discover_evidence(question, anchors, scope, config, offline.evidence_utility, offline.embedder)
    prior = discover_evidence(question, anchors, scope, DiscoveryConfig(**{**config.__dict__, "prior_boost": 0.05}),
                              offline.evidence_utility, offline.embedder)
    [window] = plain.windows
    assert window.n_messages == 4 and "far" not in {c.message_id for c in window.candidates}
    inside, outside = prior.windows
    assert [c.message_id for c in outside.candidates] == ["far"] and outside.cluster_id == -1
    assert outside.channel == "X"  # channel Y's identical message stays out: the prior ranks within the channel
    assert len(inside.candidates) + len(outside.candidates) == 3  # top_n per window, shared
    assert {c.message_id for c in inside.candidates} < {c.message_id for c in window.candidates}
