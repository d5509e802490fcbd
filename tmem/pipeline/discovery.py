"""Temporal Evidence Discovery (paper Sec. 4.2, Eq. 2-3, App. C).

Anchors are grouped by topic (messages without a topic form one group); DBSCAN over each group's timestamps
(eps = 12 h, MinPts = 2) yields clusters C_j; a cluster's seed density rho(C_j) = |C_j| / max(dt_j, delta)
(delta = 2 h) must exceed mu = 0.25 anchors/hour for it to become a candidate evidence interval, padded by 12 h on
both sides. The topic's messages inside each window are ranked by embedding similarity to the query (top 100),
and the evidence-utility role keeps KEY / SUPPORT messages: R'(q) = R_k(q) U (union_j K_j).

Those are the paper's fixed parameters (variant `paper-discovery`). Options that adapt them to the scope, each a
DiscoveryConfig field (docs/evaluation.md argues and measures them): `locality` 'channel' keeps a window inside its
anchor's channel when the scope has no topics; `clock` 'messages' measures radius, span floor, padding and density
in messages of the anchor's topic or channel instead of hours; `density_test` 'background' accepts a cluster by the
likelihood-ratio rule of App. F.1 against the background anchor rate of its topic or channel instead of a fixed mu;
`prior_boost` > 0 makes locality a prior: each topic's window messages and its global embedding top-n are ranked
together, the window messages raised by the boost.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from tmem.config import DiscoveryConfig
from tmem.models.base import Embedder, EvidenceUtilityRole
from tmem.models.embedders import LexicalEmbedder
from tmem.models.llm.cache import ReplayMissError
from tmem.models.llm.concurrency import fan_out, role_workers
from tmem.pipeline.dbscan import dbscan_1d
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


def seed_density(size: int, span_hours: float, delta_hours: float) -> float:
    """rho(C) = |C| / max(dt, delta) (Eq. 2)."""
    return size / max(span_hours, delta_hours)


def locality_key(m: Message, config: DiscoveryConfig) -> tuple[str, str | None]:
    """The part of the scope a window of anchor `m` stays inside: its topic, the whole scope (use_topic off), or,
    with locality 'channel', its channel when it has no topic."""
    if not config.use_topic:
        return ("all", None)
    if m.topic is None and config.locality == "channel" and m.channel is not None:
        return ("channel", m.channel)
    return ("topic", m.topic)


def group_positions(scope, key: tuple[str, str | None]) -> np.ndarray:
    """Positions (in time order) of the scope's messages in locality group `key`; one pass per scope."""
    return scope.derived(("locality groups",), _locality_groups).get(key, np.zeros(0, dtype=np.int64))


def _locality_groups(scope) -> dict[tuple[str, str | None], np.ndarray]:
    index: dict[tuple[str, str | None], list[int]] = {("all", None): list(range(len(scope.messages)))}
    for p, m in enumerate(scope.messages):
        index.setdefault(("topic", m.topic), []).append(p)
        if m.topic is None:
            index.setdefault(("channel", m.channel), []).append(p)
    return {k: np.asarray(v, dtype=np.int64) for k, v in index.items()}


def background_threshold(background: float, rate_ratio: float) -> float:
    """mu* = (l1 - l0) / ln(l1 / l0) with l1 = rate_ratio * l0 (App. F.1, Eq. 11): the density at which the
    likelihood ratio of 'episode' (rate l1) against 'background' (rate l0) is 1; l0 < mu* < l1."""
    if background <= 0 or rate_ratio <= 1:
        return background
    return background * (rate_ratio - 1) / math.log(rate_ratio)


def _clock(scope, key, members: Sequence[Message], config: DiscoveryConfig):
    """(coordinates of `members`, eps, delta, extent of the group) on the configured clock: seconds and hours, or
    the message's rank among its group's messages."""
    if config.clock == "messages":
        positions = group_positions(scope, key)
        rank = {scope.messages[p].id: i for i, p in enumerate(positions)} if scope is not None else {}
        coords = [float(rank.get(m.id, 0)) for m in members]
        return coords, float(config.eps_messages), float(config.delta_messages), float(max(len(positions), 1))
    coords = [to_seconds(m.timestamp) for m in members]  # seconds, eps in seconds: the paper's exact rule
    extent = 0.0
    if scope is not None and config.density_test == "background":
        positions = group_positions(scope, key)
        if len(positions):
            extent = float(scope.seconds[positions[-1]] - scope.seconds[positions[0]]) / HOUR
    return coords, config.eps_hours * HOUR, config.delta_hours, max(extent, config.delta_hours)


def cluster_anchors(anchors: Sequence[Message], config: DiscoveryConfig, scope=None) -> tuple[Cluster, ...]:
    """DBSCAN over each locality group's anchor coordinates; noise points (single anchors) form no cluster.
    `scope` is needed by the message clock and the background test (without it: the paper's rule in hours)."""
    if scope is None:
        config = _paper_clock(config)
    groups: dict[tuple[str, str | None], list[Message]] = {}
    for m in anchors:
        groups.setdefault(locality_key(m, config), []).append(m)
    found = []
    for key, members in groups.items():
        coords, eps, delta, extent = _clock(scope, key, members, config)
        # scikit-learn's DBSCAN labels with exact distances, without its ~1 s import (tmem/pipeline/dbscan.py)
        labels = dbscan_1d(coords, eps, config.min_samples)
        background = len(members) / extent if config.density_test == "background" else None
        threshold = background_threshold(background, config.rate_ratio) if background is not None else config.mu
        for label in sorted(set(labels) - {-1}):
            picked = sorted(((c, m) for c, m, lab in zip(coords, members, labels) if lab == label),
                            key=lambda cm: (cm[1].timestamp, cm[1].id))
            if config.clock == "messages":
                span = max(c for c, _ in picked) - min(c for c, _ in picked)
            else:
                span = (picked[-1][1].timestamp - picked[0][1].timestamp).total_seconds() / HOUR
            found.append((picked[0][1].timestamp, key, tuple(m for _, m in picked), span, delta, threshold,
                          background))
    clusters = []
    unit = "message" if config.clock == "messages" else "hour"
    for cluster_id, (_, key, members, span, delta, threshold, background) in enumerate(
            sorted(found, key=lambda f: (f[0], str(f[1][1])))):
        density = seed_density(len(members), span, delta)
        topic = key[1] if key[0] == "topic" else None
        channel = key[1] if key[0] == "channel" else None
        clusters.append(Cluster(cluster_id, topic, tuple(m.id for m in members), members[0].timestamp,
                                members[-1].timestamp, span, density, density > threshold,
                                None if background is None else threshold, background, channel, unit))
    return tuple(clusters)


def _paper_clock(config: DiscoveryConfig) -> DiscoveryConfig:
    return replace(config, clock="hours", density_test="absolute")


def cluster_key(cluster: Cluster, config: DiscoveryConfig) -> tuple[str, str | None]:
    if not config.use_topic:
        return ("all", None)
    return ("channel", cluster.channel) if cluster.channel is not None else ("topic", cluster.topic)


def window_positions(scope, cluster: Cluster, config: DiscoveryConfig) -> tuple[float, float, list[int]]:
    """(start, end in seconds, positions) of an accepted cluster's padded window, inside its locality group."""
    group = group_positions(scope, cluster_key(cluster, config))
    if config.clock == "messages":
        ids = set(cluster.member_ids)
        ranks = [i for i, p in enumerate(group) if scope.messages[p].id in ids]
        lo, hi = max(0, ranks[0] - config.pad_messages), min(len(group), ranks[-1] + config.pad_messages + 1)
        chosen = group[lo:hi].tolist()
        return float(scope.seconds[chosen[0]]), float(scope.seconds[chosen[-1]]), chosen
    start = to_seconds(cluster.start) - config.pad_hours * HOUR
    end = to_seconds(cluster.end) + config.pad_hours * HOUR
    lo = int(np.searchsorted(scope.seconds[group], start, side="left")) if len(group) else 0
    hi = int(np.searchsorted(scope.seconds[group], end, side="right")) if len(group) else 0
    return start, end, group[lo:hi].tolist()


def _rows_of(spans) -> list[int]:
    """The positions of the windows' messages, each once, in position order (rows in that order: same ties)."""
    return sorted({p for *_, positions in spans for p in positions})


def window_rows(anchors: Sequence[Anchor], scope, config: DiscoveryConfig) -> list[int]:
    """The positions whose vectors `discover_evidence` ranks for these anchors (its accepted clusters' windows),
    known before any embedding: an evaluation of many questions embeds them together (tmem.evaluation.recall)."""
    clusters = cluster_anchors([scope.by_id[a.message_id] for a in anchors], config, scope)
    return _rows_of([(c, *window_positions(scope, c, config)) for c in clusters if c.accepted])


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


def locality_prior(scope, spans, ranked_windows, query_vector, embedder, config: DiscoveryConfig):
    """Locality as a prior: per locality group with n windows, the windows' candidates (similarity + prior_boost)
    and the group's global embedding top-(top_n * n) outside them (similarity) are ranked together and the best
    top_n * n kept; -> (the windows' kept candidates, [(topic, channel, outside candidates)] in groups of at most
    top_n, chronological like the global control's). The candidate budget stays the paper's top_n per window."""
    by_group: dict[tuple, list[int]] = {}
    for j, (cluster, *_rest) in enumerate(spans):
        by_group.setdefault(cluster_key(cluster, config), []).append(j)
    kept = [list(r) for r in ranked_windows]
    extra = []
    for key, members in by_group.items():
        group = group_positions(scope, key)
        taken = np.fromiter((p for j in members for p in spans[j][3]), dtype=np.int64)
        outside = group[~np.isin(group, taken)]
        budget = config.top_n * len(members)
        if not len(outside):
            continue
        sims = scope.vectors_at(embedder, outside) @ query_vector
        top = np.lexsort((outside, -sims))[:budget]  # most similar first; ties by position
        pool = [(sim + config.prior_boost, p, j) for j in members for p, sim in ranked_windows[j]]
        pool += [(float(sims[i]), int(outside[i]), None) for i in top]
        pool.sort(key=lambda t: (-t[0], t[1]))
        chosen = pool[:budget]
        keep = {(p, j) for _, p, j in chosen if j is not None}
        for j in members:
            kept[j] = [(p, sim) for p, sim in ranked_windows[j] if (p, j) in keep]
        found = sorted((p, score) for score, p, j in chosen if j is None)  # chronological (positions)
        topic = key[1] if key[0] == "topic" else None
        channel = key[1] if key[0] == "channel" else None
        for g in range(0, len(found), config.top_n):
            part = sorted(found[g:g + config.top_n], key=lambda ps: (-ps[1], ps[0]))
            extra.append((topic, channel, part))
    return kept, extra


def discover_evidence(question: Question, anchors: Sequence[Anchor], scope, config: DiscoveryConfig,
                      utility: EvidenceUtilityRole, embedder: Embedder, progress=None) -> DiscoveryResult:
    """`progress(done, total)` hears of each evidence-utility call as it ends; the calls of the windows go out
    together (up to the endpoint's bound) and their results are taken in window order."""
    anchor_messages = [scope.by_id[a.message_id] for a in anchors]
    clusters = cluster_anchors(anchor_messages, config, scope)
    accepted = [c for c in clusters if c.accepted]
    windows: list[Window] = []
    selections: list[Selection] = []
    errors: list[StageError] = []
    usage = Usage(source="offline" if utility.offline else "none")
    if accepted:
        spans = [(cluster, *window_positions(scope, cluster, config)) for cluster in accepted]
        needed = _rows_of(spans)
        vectors, query_vector, embedder_error = _window_ranking_vectors(question, scope, embedder, needed)
        if embedder_error:
            errors.append(embedder_error)
        row = {p: i for i, p in enumerate(needed)}
        anchor_ids = frozenset(a.message_id for a in anchors)
        seen: set[str] = set()  # a message is a candidate of the first window that holds it
        ranked_windows = []
        for *_, positions in spans:
            fresh = [row[p] for p in positions if scope.messages[p].id not in seen]
            ranked = [(needed[i], sim) for i, sim in rank_window(query_vector, vectors, fresh, config.top_n)]
            seen.update(scope.messages[p].id for p, _ in ranked)
            ranked_windows.append(ranked)
        extra = []
        if config.prior_boost > 0:
            ranked_windows, extra = locality_prior(scope, spans, ranked_windows, query_vector, embedder, config)
        calls = []
        for window_id, ((cluster, start, end, positions), ranked) in enumerate(zip(spans, ranked_windows)):
            candidates = tuple(Candidate(scope.messages[p].id, sim, r) for r, (p, sim) in enumerate(ranked, 1))
            windows.append(Window(window_id, cluster.cluster_id, cluster.topic, from_seconds(start),
                                  from_seconds(end), len(positions), candidates, cluster.channel))
            if candidates:
                calls.append((window_id, ranked, candidates))
        for topic, channel, ranked in extra:  # the global candidates that outranked window messages
            window_id = len(windows)
            candidates = tuple(Candidate(scope.messages[p].id, sim, r) for r, (p, sim) in enumerate(ranked, 1))
            times = [scope.messages[p].timestamp for p, _ in ranked]
            windows.append(Window(window_id, -1, topic, min(times), max(times), len(ranked), candidates, channel))
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
