"""A memory scope in memory: its messages and the per-scope structures every question reuses.

Retrieval for a question only ever sees its own scope (a GroupMemBench domain, a LoCoMo conversation). Built once
per scope (`tmem.api.open_scope` caches a stored scope and installs its persisted vectors): the metadata-expanded
BM25 index (per metadata-field set), document frequencies of lexical units for the smoothed IDF of Eq. 6,
timestamps as seconds for clustering, and message vectors per embedder.
"""
from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import cached_property
from itertools import islice
from typing import TypeVar

import numpy as np

from tmem.pipeline.retrieval import BM25Index, index_key, message_document
from tmem.text import content_units
from tmem.types import Message, to_seconds

T = TypeVar("T")

VectorLoader = Callable[[object, "Scope"], np.ndarray]


class Scope:
    row_cache = 50_000  # message vectors kept in memory per embedder when a loader stores them (~75-100 MB)

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
        self._rows: dict[str, dict[int, np.ndarray]] = {}  # per embedder: position -> vector, on demand
        self._lock = threading.Lock()
        self.vector_loader: VectorLoader | None = None  # set by a backend that persists vectors
        self.index_store = None  # a Store that keeps BM25 indexes (tmem.api.open_scope sets it)
        self.index_source: dict[tuple, str] = {}  # per index key: "loaded", "built", "built and saved"
        self._units: dict[int, set[str]] = {}
        self._kept: dict[tuple, dict[int, object]] = {}  # per reading (`kept`): position -> its value
        self._derived: dict[tuple, object] = {}  # per reading (`derived`): its value for the whole scope
        self._idf: dict[str, float] = {}  # per unit of the scope's vocabulary: at most as many as df holds

    def __len__(self) -> int:
        return len(self.messages)

    # -------------------------------------------------------------------------------------------- BM25
    def bm25(self, metadata_fields: Sequence[str], k1: float = 1.5, b: float = 0.75,
             epsilon: float = 0.25) -> BM25Index:
        """The scope's index for these parameters: built once, or loaded from `index_store` (the database the
        scope came from), where a build is saved for the next process."""
        key = (tuple(metadata_fields), str(k1), str(b), str(epsilon))
        with self._lock:
            if key not in self._indexes:
                self._indexes[key] = self._stored_index(key) or self._build_index(key, metadata_fields, k1, b,
                                                                                  epsilon)
            return self._indexes[key]

    def _stored_index(self, key: tuple) -> BM25Index | None:
        data = self.index_store.bm25_index(self.corpus, self.name, index_key(key)) if self.index_store else None
        index = BM25Index.from_bytes(data) if data else None
        if index is not None and index.n_documents == len(self.messages):
            self.index_source[key] = "loaded"
            return index
        return None

    def _build_index(self, key: tuple, metadata_fields, k1: float, b: float, epsilon: float) -> BM25Index:
        # a generator: the token lists of a million messages are never all in memory at once
        index = BM25Index.build((message_document(m, metadata_fields) for m in self.messages), k1, b, epsilon)
        self.index_source[key] = "built"
        if self.index_store is not None:
            try:
                self.index_store.save_bm25_index(self.corpus, self.name, index_key(key), index.to_bytes())
                self.index_source[key] = "built and saved"
            except Exception as exc:  # noqa: BLE001 - a read-only database: the index serves this process only
                self.index_source[key] = f"built (not saved: {type(exc).__name__})"
        return index

    # ------------------------------------------------------------------------------------ smoothed IDF
    @property
    def units(self) -> list[set[str]]:
        return [self.units_at(p) for p in range(len(self.messages))]

    @cached_property
    def document_frequency(self) -> Counter:
        # streamed: keeping U(m) of every message would cost ~0.7 KB each (0.7 GB per million messages)
        df: Counter = Counter()
        for m in self.messages:
            df.update(content_units(m.text))
        return df

    def units_at(self, position: int) -> set[str]:
        units = self._units.get(position)
        if units is None:
            units = self._units[position] = content_units(self.messages[position].text)
        return units

    def units_of(self, message: Message) -> set[str]:
        """U(m) of a scope message (cached once a question needed it); computed afresh for one from elsewhere."""
        position = self.position.get(message.id)
        if position is not None and self.messages[position] is message:
            return self.units_at(position)
        return content_units(message.text)

    def kept(self, reading: tuple, message: Message, compute: Callable[[Message], T]) -> T:
        """compute(message), kept per scope message under `reading` (what a role derives from a message and asks
        for again for every question); computed afresh for a message from elsewhere, as `units_of`."""
        position = self.position.get(message.id)
        if position is None or self.messages[position] is not message:
            return compute(message)
        values = self._kept.setdefault(reading, {})
        if position not in values:
            values[position] = compute(message)
        return values[position]

    def derived(self, reading: tuple, compute: Callable[[Scope], T]) -> T:
        """compute(self), kept under `reading`: what a stage derives from the whole scope once and every question
        reads again (topic positions, expanded-text vectors). Two threads may both compute a missing reading; the
        first kept wins, so the value is the same for every reader."""
        if reading not in self._derived:
            self._derived.setdefault(reading, compute(self))
        return self._derived[reading]

    def idf(self, unit: str) -> float:
        """log((N + 1) / (df(u) + 1)) + 1: smoothed self-information with a unit floor (Eq. 6, Lemma 1)."""
        value = self._idf.get(unit)
        if value is None:  # evidence utility asks ~10^7 times per LoCoMo run, mostly for the same few units
            df = self.document_frequency.get(unit, 0)
            value = math.log((len(self.messages) + 1) / (df + 1)) + 1
            if df:  # a unit the scope never uses (a question's) is not kept: the cache stays within the vocabulary
                self._idf[unit] = value
        return value

    # ----------------------------------------------------------------------------------------- vectors
    def vectors(self, embedder) -> np.ndarray:
        """One L2-normalised vector per message (in `self.messages` order), computed once per embedder: the whole
        scope, which only the dense baselines need (T-Mem ranks window messages: `vectors_at`)."""
        with self._lock:
            if embedder.name not in self._vectors:
                if self.vector_loader is not None:
                    self._vectors[embedder.name] = self.vector_loader(embedder, self)
                else:
                    self._vectors[embedder.name] = embedder.embed([m.text for m in self.messages])
                self._rows.pop(embedder.name, None)  # the full matrix serves every row now
            return self._vectors[embedder.name]

    def vectors_at(self, embedder, positions: Sequence[int]) -> np.ndarray:
        """The vectors of the messages at `positions` (rows in that order), embedded on demand: a row is computed
        (or read from the loader's store) the first time a question needs it and kept for the next one."""
        positions = [int(p) for p in positions]
        with self._lock:
            full = self._vectors.get(embedder.name)
            if full is not None:
                return full[positions] if positions else full[:0]
            rows = self._rows.setdefault(embedder.name, {})
            found = {p: rows[p] for p in positions if p in rows}
        missing = sorted(set(positions) - found.keys())
        if missing:  # outside the lock: concurrent questions of the scope do not wait for each other's rows
            loader = getattr(self.vector_loader, "rows", None)
            fresh = loader(embedder, self, missing) if loader is not None else \
                embedder.embed([self.messages[p].text for p in missing])
            found.update(zip(missing, np.asarray(fresh, dtype=np.float32)))
            with self._lock:
                rows.update((p, found[p]) for p in missing)
                # bounded, oldest first: a loader keeps every row in its store, so an evicted one is read back
                # (at 4 x 250,000 messages the windows of 40 questions needed 214,000 rows: 438 MB unbounded)
                if self.vector_loader is not None and len(rows) > self.row_cache:
                    for p in list(islice(rows, len(rows) - self.row_cache)):
                        del rows[p]
        if not positions:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([found[p] for p in positions])

    def rows_held(self, embedder_name: str) -> int:
        """How many on-demand rows of that embedder this scope holds in memory."""
        return len(self._rows.get(embedder_name, {}))

    def vector_rows(self, embedder) -> VectorRows:
        """`vectors_at` with the indexing of the full matrix: `scope.vector_rows(e)[positions]`."""
        return VectorRows(self, embedder)

    # -------------------------------------------------------------------------------------- windows
    def in_window(self, start: float, end: float, topic: str | None, use_topic: bool) -> list[int]:
        """Positions of messages with start <= t <= end, of the same topic when use_topic (None = no topic)."""
        lo = int(np.searchsorted(self.seconds, start, side="left"))
        hi = int(np.searchsorted(self.seconds, end, side="right"))
        if not use_topic:
            return list(range(lo, hi))
        return [i for i in range(lo, hi) if self.messages[i].topic == topic]


class VectorRows:
    """Rows of a scope's message vectors by position, embedded on demand (`Scope.vector_rows`)."""

    def __init__(self, scope: Scope, embedder):
        self.scope, self.embedder = scope, embedder

    def __getitem__(self, index) -> np.ndarray:
        if isinstance(index, (int, np.integer)):
            return self.scope.vectors_at(self.embedder, [int(index)])[0]
        return self.scope.vectors_at(self.embedder, np.asarray(index, dtype=np.int64).ravel().tolist())

    def __len__(self) -> int:
        return len(self.scope)


def _checked(messages: Sequence[Message], where: str) -> list[Message]:
    """Messages for the Python API as the importers guarantee them: unique ids, and datetimes without a time zone
    (UTC); an aware datetime is converted to UTC, anything else is refused naming the message."""
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
