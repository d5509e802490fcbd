"""Temporal Evidence Discovery (paper Sec. 4.2, Eq. 2-3, App. C).

Anchors are grouped by topic (messages without a topic form one group); DBSCAN over each group's timestamps
(eps = 12 h, MinPts = 2) yields clusters C_j; a cluster's seed density rho(C_j) = |C_j| / max(dt_j, delta)
(delta = 2 h) must exceed mu = 0.25 anchors/hour for it to become a candidate evidence interval, padded by 12 h on
both sides. The topic's messages inside each window are ranked by embedding similarity to the query (top 100),
and the evidence-utility role keeps KEY / SUPPORT messages: R'(q) = R_k(q) U (union_j K_j).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from tmem.config import DiscoveryConfig
from tmem.dbscan import dbscan_1d
from tmem.models.base import Embedder, EvidenceUtilityRole
from tmem.models.cache import ReplayMissError
from tmem.models.concurrency import fan_out, role_workers
from tmem.models.embedders import LexicalEmbedder
from tmem.types import (
    IRRELEVANT,
    KEY,
    SUPPORT,
    Anchor,
    Candidate,
    Cluster,
    Message,
    Question,
    Selection,
    StageError,
    Usage,
    Window,
    from_seconds,
    to_seconds,
)

HOUR = 3600.0
_ALL_TOPICS = "\x00all"  # group key when topic is not used (Exp-6)


def seed_density(size: int, span_hours: float, delta_hours: float) -> float:
    """rho(C) = |C| / max(dt, delta) (Eq. 2)."""
    return size / max(span_hours, delta_hours)


def cluster_anchors(anchors: Sequence[Message], config: DiscoveryConfig) -> tuple[Cluster, ...]:
    """DBSCAN over each topic group's anchor timestamps; noise points (single anchors) form no cluster."""
    groups: dict[str | None, list[Message]] = {}
    for m in anchors:
        groups.setdefault(m.topic if config.use_topic else _ALL_TOPICS, []).append(m)
    found: list[tuple[datetime, str | None, tuple[Message, ...]]] = []
    for topic, members in groups.items():
        # scikit-learn's DBSCAN labels with exact distances, without its ~1 s import (tmem/dbscan.py)
        labels = dbscan_1d([to_seconds(m.timestamp) for m in members], config.eps_hours * HOUR, config.min_samples)
        for label in sorted(set(labels) - {-1}):
            cluster = tuple(sorted((m for m, lab in zip(members, labels) if lab == label),
                                   key=lambda m: (m.timestamp, m.id)))
            found.append((cluster[0].timestamp, None if topic == _ALL_TOPICS else topic, cluster))
    clusters = []
    for cluster_id, (_, topic, members) in enumerate(sorted(found, key=lambda f: (f[0], str(f[1])))):
        start, end = members[0].timestamp, members[-1].timestamp
        span = (end - start).total_seconds() / HOUR
        density = seed_density(len(members), span, config.delta_hours)
        clusters.append(Cluster(cluster_id, topic, tuple(m.id for m in members), start, end, span, density,
                                density > config.mu))
    return tuple(clusters)


@dataclass(frozen=True)
class DiscoveryResult:
    clusters: tuple[Cluster, ...]
    windows: tuple[Window, ...]
    selections: tuple[Selection, ...]
    evidence_ids: tuple[str, ...]
    usage: Usage
    errors: tuple[StageError, ...]


def rank_window(query_vector: np.ndarray, vectors: np.ndarray, positions: Sequence[int],
                top_n: int) -> list[tuple[int, float]]:
    """(position, cosine) of the top_n window messages, most similar first; ties by position."""
    if not positions:
        return []
    sims = vectors[np.asarray(positions)] @ query_vector
    order = sorted(range(len(positions)), key=lambda i: (-float(sims[i]), positions[i]))[:top_n]
    return [(positions[i], float(sims[i])) for i in order]


def _window_ranking_vectors(question: Question, scope, embedder: Embedder, positions: Sequence[int]):
    """Vectors of the window messages at `positions` (embedded on demand, not the whole scope) and of the query.
    A remote embedder that keeps failing (its retries are spent) must not end the question: the windows are ranked
    with the lexical fallback, recorded as an error."""
    try:
        return scope.vectors_at(embedder, positions), embedder.embed([question.text], kind="query")[0], None
    except ReplayMissError:
        raise  # replay-only mode fails loudly on a miss, by design
    except Exception as exc:  # noqa: BLE001 — any failure of the embedding service; only its type is recorded
        fallback = LexicalEmbedder()
        error = StageError("discovery", f"embedder {embedder.name} failed ({type(exc).__name__})",
                           f"windows ranked with {fallback.name}")
        return scope.vectors_at(fallback, positions), fallback.embed([question.text], kind="query")[0], error


def discover_evidence(question: Question, anchors: Sequence[Anchor], scope, config: DiscoveryConfig,
                      utility: EvidenceUtilityRole, embedder: Embedder, progress=None) -> DiscoveryResult:
    """`progress(done, total)` hears of each evidence-utility call as it ends; the calls of the windows go out
    together (up to the endpoint's bound) and their results are taken in window order."""
    anchor_messages = [scope.by_id[a.message_id] for a in anchors]
    clusters = cluster_anchors(anchor_messages, config)
    accepted = [c for c in clusters if c.accepted]
    windows: list[Window] = []
    selections: list[Selection] = []
    errors: list[StageError] = []
    usage = Usage(source="offline" if utility.offline else "none")
    if accepted:
        spans = []
        for cluster in accepted:
            start = to_seconds(cluster.start) - config.pad_hours * HOUR
            end = to_seconds(cluster.end) + config.pad_hours * HOUR
            spans.append((cluster, start, end, scope.in_window(start, end, cluster.topic, config.use_topic)))
        needed = sorted({p for *_, positions in spans for p in positions})  # rows in position order: same ties
        vectors, query_vector, embedder_error = _window_ranking_vectors(question, scope, embedder, needed)
        if embedder_error:
            errors.append(embedder_error)
        row = {p: i for i, p in enumerate(needed)}
        anchor_ids = frozenset(a.message_id for a in anchors)
        seen: set[str] = set()  # a message is a candidate of the first window that holds it
        calls = []
        for window_id, (cluster, start, end, positions) in enumerate(spans):
            fresh = [row[p] for p in positions if scope.messages[p].id not in seen]
            ranked = [(needed[i], sim) for i, sim in rank_window(query_vector, vectors, fresh, config.top_n)]
            seen.update(scope.messages[p].id for p, _ in ranked)
            candidates = tuple(Candidate(scope.messages[p].id, sim, r) for r, (p, sim) in enumerate(ranked, 1))
            windows.append(Window(window_id, cluster.cluster_id, cluster.topic, from_seconds(start),
                                  from_seconds(end), len(positions), candidates))
            if candidates:
                calls.append((window_id, ranked, candidates))
        results = fan_out(lambda c: utility.select(question, c[0], [scope.messages[p] for p, _ in c[1]],
                                                   [s for _, s in c[1]], scope, anchor_ids=anchor_ids),
                          calls, role_workers(utility), progress)
        for (window_id, _, candidates), result in zip(calls, results):
            usage = usage + result.usage
            errors += result.errors
            valid_ids = {c.message_id for c in candidates}
            for s in result.selections:
                if s.message_id not in valid_ids or s.label not in (KEY, SUPPORT, IRRELEVANT):
                    errors.append(StageError("discovery", f"window {window_id}: dropped invalid selection "
                                             f"{s.message_id!r} / {s.label!r}", "ignored"))
                else:
                    selections.append(s)
    accepted_ids = dict.fromkeys(s.message_id for s in selections if s.label in (KEY, SUPPORT))
    evidence = tuple(dict.fromkeys([a.message_id for a in anchors] + list(accepted_ids)))
    return DiscoveryResult(clusters, tuple(windows), tuple(selections), evidence, usage, tuple(errors))
