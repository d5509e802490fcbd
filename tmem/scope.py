"""A memory scope in memory: its messages and the per-scope structures every question reuses.

Retrieval for a question only ever sees its own scope (a GroupMemBench domain, a LoCoMo conversation). Built once
per scope and cached: the metadata-expanded BM25 index (per metadata-field set), document frequencies of lexical
units for the smoothed IDF of Eq. 6, timestamps as seconds for clustering, and message vectors per embedder.
"""
from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from functools import cached_property

import numpy as np

from tmem.retrieval import BM25Index, message_document
from tmem.text import content_units
from tmem.types import Message, to_seconds

VectorLoader = Callable[[object, "Scope"], np.ndarray]


class Scope:
    def __init__(self, corpus: str, name: str, messages: Sequence[Message]):
        if not messages:
            raise ValueError(f"scope {name!r} of corpus {corpus!r} has no messages")
        self.corpus = corpus
        self.name = name
        self.messages: list[Message] = sorted(_checked(messages, f"scope {name!r}"),
                                              key=lambda m: (m.timestamp, m.id))
        self.by_id: dict[str, Message] = {m.id: m for m in self.messages}
        self.position: dict[str, int] = {m.id: i for i, m in enumerate(self.messages)}
        self.seconds = np.array([to_seconds(m.timestamp) for m in self.messages], dtype=np.float64)
        self._indexes: dict[tuple[str, ...], BM25Index] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.vector_loader: VectorLoader | None = None  # set by a backend that persists vectors

    def __len__(self) -> int:
        return len(self.messages)

    # -------------------------------------------------------------------------------------------- BM25
    def bm25(self, metadata_fields: Sequence[str], k1: float = 1.5, b: float = 0.75,
             epsilon: float = 0.25) -> BM25Index:
        key = (tuple(metadata_fields), str(k1), str(b), str(epsilon))
        with self._lock:
            if key not in self._indexes:
                docs = [message_document(m, metadata_fields) for m in self.messages]
                self._indexes[key] = BM25Index.build(docs, k1, b, epsilon)
            return self._indexes[key]

    # ------------------------------------------------------------------------------------ smoothed IDF
    @cached_property
    def units(self) -> list[set[str]]:
        return [content_units(m.text) for m in self.messages]

    @cached_property
    def document_frequency(self) -> Counter:
        df: Counter = Counter()
        for units in self.units:
            df.update(units)
        return df

    def units_of(self, message: Message) -> set[str]:
        """U(m) of a scope message (cached); computed afresh for a message from elsewhere."""
        position = self.position.get(message.id)
        if position is not None and self.messages[position] is message:
            return self.units[position]
        return content_units(message.text)

    def idf(self, unit: str) -> float:
        """log((N + 1) / (df(u) + 1)) + 1: smoothed self-information with a unit floor (Eq. 6, Lemma 1)."""
        return math.log((len(self.messages) + 1) / (self.document_frequency.get(unit, 0) + 1)) + 1

    # ----------------------------------------------------------------------------------------- vectors
    def vectors(self, embedder) -> np.ndarray:
        """One L2-normalised vector per message (in `self.messages` order), computed once per embedder."""
        with self._lock:
            if embedder.name not in self._vectors:
                if self.vector_loader is not None:
                    self._vectors[embedder.name] = self.vector_loader(embedder, self)
                else:
                    self._vectors[embedder.name] = embedder.embed([m.text for m in self.messages])
            return self._vectors[embedder.name]

    # -------------------------------------------------------------------------------------- windows
    def in_window(self, start: float, end: float, topic: str | None, use_topic: bool) -> list[int]:
        """Positions of messages with start <= t <= end, of the same topic when use_topic (None = no topic)."""
        lo = int(np.searchsorted(self.seconds, start, side="left"))
        hi = int(np.searchsorted(self.seconds, end, side="right"))
        if not use_topic:
            return list(range(lo, hi))
        return [i for i in range(lo, hi) if self.messages[i].topic == topic]


def _checked(messages: Sequence[Message], where: str) -> list[Message]:
    """Messages for the Python API as the importers guarantee them: unique ids, and datetimes without a time zone
    (UTC); an aware datetime is converted to UTC, anything else is refused naming the message."""
    from dataclasses import replace
    from datetime import UTC, datetime

    seen: set[str] = set()
    out = []
    for m in messages:
        if m.id in seen:
            raise ValueError(f"{where}: duplicate message id {m.id!r}")
        seen.add(m.id)
        if not isinstance(m.timestamp, datetime):
            raise ValueError(f"{where}: message {m.id!r} has timestamp {m.timestamp!r}, expected a datetime")
        if m.timestamp.tzinfo is not None:
            m = replace(m, timestamp=m.timestamp.astimezone(UTC).replace(tzinfo=None))
        out.append(m)
    return out


_CACHE: dict[tuple, Scope] = {}
_CACHE_LOCK = threading.Lock()


def load_scope(store, corpus: str, name: str, embedding_progress=None) -> Scope:
    """The scope's messages from the store, cached per (database, corpus, scope, import time); its message
    vectors are persisted in that store (tmem.models.embedders.VectorStore). `embedding_progress(done, total)`
    hears of a first embedding of the scope's messages (it replaces the previous caller's)."""
    info = store.corpus_info(corpus)
    key = (str(store.path), corpus, name, str(info["imported_at"]))
    with _CACHE_LOCK:
        if key not in _CACHE:
            messages = store.messages(corpus, name)
            if not messages:
                known = ", ".join(store.scopes(corpus)[:10])
                raise KeyError(f"corpus {corpus!r} has no scope {name!r} (scopes: {known})")
            for stale in [k for k in _CACHE if k[:3] == key[:3]]:
                del _CACHE[stale]
            _CACHE[key] = Scope(corpus, name, messages)
        scope = _CACHE[key]
        # message vectors of a stored scope are kept in the same database: computed once, then reused
        from tmem.models.embedders import VectorStore

        VectorStore(store, embedding_progress).install(scope)
        return scope
