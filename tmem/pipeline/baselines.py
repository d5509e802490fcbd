"""The baselines' own steps, branches of the same stages (tmem.pipeline.stages; paper App. B, E.2): embedding seeds,
reranking to k, and the global-evidence control. The methods that use them are tmem.pipeline.methods.

The paper's reranker (Qwen3-Reranker-8B) is not available offline: `rerank` orders messages by the offline
evidence-utility score of each message in its conversational context (MiniLM cosine + IDF-weighted coverage of the
question by author and text, plus the same for its nearest same-topic neighbours), the same scores for every
method that reranks, so the comparison stays controlled.

The embedding baseline embeds each message's metadata-expanded text ("topic / channel - author (role): text"), the
same fields BM25 indexes, unless `embedding_text="plain"`; expanded vectors are cached in DuckDB under the
embedder's name plus "+metadata".
"""
from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np

from tmem.models.embedders import VectorStore
from tmem.models.offline import OfflineEvidenceUtility
from tmem.pipeline.discovery import DiscoveryResult, cluster_anchors
from tmem.pipeline.retrieval import best_first
from tmem.types import IRRELEVANT, KEY, SUPPORT, Anchor, Candidate, Question, Selection, StageError, Usage, Window


# ---------------------------------------------------------------------------------------- embedding seeds
def expanded_text(message) -> str:
    """The message as the embedding baseline sees it: its metadata (like the BM25 document) before the text."""
    place = " / ".join(str(v) for v in (message.topic, message.channel, message.phase) if v)
    who = message.author or ""
    if message.role:
        who = f"{who} ({message.role})" if who else message.role
    head = " - ".join(p for p in (place, who) if p)
    return f"{head}: {message.text}" if head else message.text


class _Renamed:
    """An embedder under another cache name (expanded-text vectors must not overwrite plain ones)."""

    def __init__(self, inner, suffix: str):
        self.inner, self.name, self.offline = inner, f"{inner.name}+{suffix}", inner.offline

    def embed(self, texts, kind="passage", progress=None):
        try:
            return self.inner.embed(texts, kind, progress=progress)
        except TypeError:
            return self.inner.embed(texts, kind)


def message_vectors(scope, embedder, text: str = "metadata", store=None) -> np.ndarray:
    """Vectors of the scope's messages for the embedding baseline (cached per scope; persisted when `store`)."""
    if text == "plain":
        return scope.vectors(embedder)
    return scope.derived(("expanded vectors", embedder.name), lambda s: _expanded_vectors(s, embedder, store))


def _expanded_vectors(scope, embedder, store) -> np.ndarray:
    renamed = _Renamed(getattr(embedder, "inner", embedder), "metadata")
    proxy = SimpleNamespace(corpus=scope.corpus, name=scope.name,
                            messages=[SimpleNamespace(id=m.id, text=expanded_text(m)) for m in scope.messages])
    if store is not None:
        return VectorStore(store)(renamed, proxy)
    return renamed.embed([m.text for m in proxy.messages])


def embedding_anchors(question: Question, scope, vectors: np.ndarray, query_vector: np.ndarray,
                      k: int) -> tuple[Anchor, ...]:
    """The k messages most similar to the question (ties by position), as anchors with cosine scores."""
    sims = vectors @ query_vector
    return tuple(Anchor(scope.messages[i].id, float(sims[i]), r) for r, i in enumerate(best_first(sims, k), start=1))


# ------------------------------------------------------------------------------------------------- rerank
def conversation_neighbours(scope, position: int, depth: int) -> list[tuple[int, int]]:
    """(d, position) of the d-th earlier and later messages of the same topic (d = 1..depth), in scope order, and
    (1, position) of the message it replies to and of the messages that reply to it (App. J: reply support)."""
    by_topic, replies, known = scope.derived(("topic and reply positions",), _topic_and_reply_positions)
    if (position, depth) not in known:  # kept: a full LoCoMo recall run asks ~50 times per message
        known[(position, depth)] = _neighbours(scope, position, depth, by_topic, replies)
    return known[(position, depth)]


def _topic_and_reply_positions(scope) -> tuple[dict, dict, dict]:
    by_topic: dict = {}
    replies: dict = {}
    for i, m in enumerate(scope.messages):
        by_topic.setdefault(m.topic, []).append(i)
        if m.reply_to in scope.position:
            replies.setdefault(m.reply_to, []).append(i)
    return {t: np.asarray(p) for t, p in by_topic.items()}, replies, {}


def _neighbours(scope, position: int, depth: int, by_topic, replies) -> list[tuple[int, int]]:
    m = scope.messages[position]
    line = by_topic[m.topic]
    at = int(np.searchsorted(line, position))
    out = []
    for d in range(1, depth + 1):
        out += [(d, int(line[j])) for j in (at - d, at + d) if 0 <= j < len(line)]
    linked = ([scope.position[m.reply_to]] if m.reply_to in scope.position else []) + replies.get(m.id, [])
    return out + [(1, p) for p in linked]


def rerank_rows(scope, own: Sequence[int], depth: int = len(OfflineEvidenceUtility.context_weights)):
    """({position: its conversation_neighbours}, every position `rerank` reads a vector of, in position order) for
    the messages at `own`."""
    around = {p: conversation_neighbours(scope, p, depth) for p in own}
    return around, sorted(set(own) | {p for ns in around.values() for _, p in ns})


def rerank(question: Question, ids: Sequence[str], scope, vectors: np.ndarray, query_vector: np.ndarray,
           k: int, selections: Sequence[Selection] = ()) -> tuple[str, ...]:
    """The k best of `ids`, best first (ties by input order), by the offline evidence-utility score of each message
    in its conversational context: relevance r(m) (MiniLM cosine + IDF-weighted coverage by author and text) plus
    `context_weights[d-1]` times the largest r of its d-th earlier / later message of the same topic (d = 1 also
    counts the messages it replies to or that reply to it). A message the evidence-utility role accepted keeps at
    least the score that role gave it (`selections`), so a SUPPORT message ranks with the claim it supports."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return ()
    utility = OfflineEvidenceUtility()
    own = [scope.position[i] for i in ids]
    around, needed = rerank_rows(scope, own, len(utility.context_weights))
    sims = vectors[needed] @ query_vector
    r = dict(zip(needed, utility.relevance(question, [scope.messages[p] for p in needed], sims, scope)))
    accepted: dict[str, float] = {}
    for s in selections:
        if s.label in (KEY, SUPPORT):
            accepted[s.message_id] = max(accepted.get(s.message_id, float("-inf")), s.score)
    scores = []
    for i, p in zip(ids, own):
        best: dict[int, float] = {}
        for d, q in around[p]:
            best[d] = max(best.get(d, 0.0), r[q])
        score = r[p] + sum(w * best.get(d, 0.0) for d, w in enumerate(utility.context_weights, start=1))
        scores.append(max(score, accepted.get(i, score)))
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))[:k]
    return tuple(ids[i] for i in order)


# ------------------------------------------------------------------------------------ global-evidence control
def global_evidence(question: Question, anchors: Sequence[Anchor], scope, config, utility, embedder,
                    k: int) -> DiscoveryResult:
    """App. E.2 control: the same seeds and topic partition as T-Mem, but for a topic where T-Mem accepts n
    temporal clusters, the embedding top-100n messages of the *whole topic* are the candidates. They are passed
    to the same evidence-utility role in n chronological groups of at most `top_n` (as T-Mem's n windows are), and
    the seeds and accepted messages are reranked to exactly k."""
    dc = config.discovery
    clusters = cluster_anchors([scope.by_id[a.message_id] for a in anchors], dc)
    per_topic: dict[str | None, int] = {}
    for c in clusters:
        if c.accepted:
            per_topic[c.topic] = per_topic.get(c.topic, 0) + 1
    vectors = scope.vectors(embedder)
    query_vector = embedder.embed([question.text], kind="query")[0]
    anchor_ids = frozenset(a.message_id for a in anchors)
    windows, selections, errors = [], [], []
    usage = Usage(source="offline" if utility.offline else "none")
    for topic, n in per_topic.items():
        positions = scope.in_window(float("-inf"), float("inf"), topic, dc.use_topic)
        if not positions:
            continue
        sims = vectors[np.asarray(positions)] @ query_vector
        # most similar first, ties by position (positions ascend, so by index): the whole topic, for every question
        top = np.lexsort((np.arange(len(positions)), -sims))[:dc.top_n * n].tolist()
        chosen = sorted(top, key=lambda i: positions[i])  # chronological, then cut into n groups
        size = -(-len(chosen) // n)
        for g in range(n):
            group = sorted(chosen[g * size:(g + 1) * size], key=lambda i: (-float(sims[i]), positions[i]))
            if not group:
                continue
            window_id = len(windows)
            members = [scope.messages[positions[i]] for i in group]
            times = [m.timestamp for m in members]
            windows.append(Window(window_id, -1, topic, min(times), max(times), len(positions),
                                  tuple(Candidate(m.id, float(sims[i]), r)
                                        for r, (m, i) in enumerate(zip(members, group), start=1))))
            result = utility.select(question, window_id, members, [float(sims[i]) for i in group], scope,
                                    anchor_ids=anchor_ids)
            usage = usage + result.usage
            errors += result.errors
            valid = {m.id for m in members}
            for s in result.selections:
                if s.message_id in valid and s.label in (KEY, SUPPORT, IRRELEVANT):
                    selections.append(s)
                else:
                    errors.append(StageError("discovery", f"global group {window_id}: dropped invalid selection "
                                             f"{s.message_id!r} / {s.label!r}", "ignored"))
    accepted = [s.message_id for s in selections if s.label in (KEY, SUPPORT)]
    pool = list(dict.fromkeys([a.message_id for a in anchors] + accepted))
    evidence = rerank(question, pool, scope, vectors, query_vector, k, selections)
    return DiscoveryResult(clusters, tuple(windows), tuple(selections), evidence, usage, tuple(errors))
