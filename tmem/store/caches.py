"""The Store's caches: model responses (tmem.models.llm.cache; never an API key), message and query vectors
(tmem.models.embedders), BM25 indexes (tmem.pipeline.retrieval) and derived frames (a page's figures computed
once per run and change of the run, e.g. Compare's budget-matched rows, tmem.evaluation.matched). All can be
recomputed; a re-import of the corpus drops its BM25 indexes.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pandas as pd

CACHE_SCHEMA = """
-- model response cache and message vectors (tmem.models.llm.cache / tmem.models.embedders); never holds an API key
CREATE TABLE IF NOT EXISTS model_responses (
    key VARCHAR PRIMARY KEY, role VARCHAR NOT NULL, model VARCHAR NOT NULL, prompt_hash VARCHAR NOT NULL,
    params VARCHAR NOT NULL, response VARCHAR NOT NULL, prompt_tokens INTEGER, completion_tokens INTEGER,
    usage_source VARCHAR, created_at TIMESTAMP);
CREATE TABLE IF NOT EXISTS message_vectors (
    corpus VARCHAR NOT NULL, scope VARCHAR NOT NULL, embedder VARCHAR NOT NULL, message_id VARCHAR NOT NULL,
    text_hash VARCHAR NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (corpus, scope, embedder, message_id));
CREATE TABLE IF NOT EXISTS query_vectors (
    embedder VARCHAR NOT NULL, text_hash VARCHAR NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (embedder, text_hash));
CREATE TABLE IF NOT EXISTS bm25_indexes (  -- tmem.pipeline.retrieval.BM25Index.to_bytes; dropped by a re-import
    corpus VARCHAR NOT NULL, scope VARCHAR NOT NULL, key VARCHAR NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (corpus, scope, key));
CREATE TABLE IF NOT EXISTS derived_frames (  -- Parquet bytes under a key naming what they were computed from
    key VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, data BLOB NOT NULL, created_at TIMESTAMP);
-- derived_frames.corpus / run_id / run_version: the run (and its stored version) a frame was computed from, so a
-- frame is dropped with the version it belongs to (the key is a hash). Added to older files in place:
ALTER TABLE derived_frames ADD COLUMN IF NOT EXISTS corpus VARCHAR;
ALTER TABLE derived_frames ADD COLUMN IF NOT EXISTS run_id VARCHAR;
ALTER TABLE derived_frames ADD COLUMN IF NOT EXISTS run_version VARCHAR;
"""
# A frame's key is a hash of what it was computed from, so a changed run left its old frames unreachable, kept
# forever (issue 42). They go when their run version does (tmem.store.traces, tmem.store.corpus):
DROP_RUN_FRAMES = "DELETE FROM derived_frames WHERE list_contains(?, run_id)"  # a run replaced or removed
DROP_CORPUS_FRAMES = "DELETE FROM derived_frames WHERE corpus = ? OR corpus IS NULL"  # re-import; frames of
# older files name no corpus: dropped at the next import of any corpus (recomputed when asked for)


class CacheTables:
    """Store methods for the response cache, vectors and BM25 indexes (`self` is a tmem.store.Store)."""

    def cached_response(self, key: str) -> tuple[str, int, int] | None:
        """(response text, prompt tokens, completion tokens) stored under a response-cache key, or None."""
        return self.cursor().execute("SELECT response, prompt_tokens, completion_tokens FROM model_responses "
                                     "WHERE key = ?", [key]).fetchone()

    def save_response(self, key: str, role: str, model: str, prompt_hash: str, params: str, response: str,
                      prompt_tokens: int, completion_tokens: int, usage_source: str) -> None:
        with self._write_lock:
            self.cursor().execute(
                "INSERT OR REPLACE INTO model_responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [key, role, model, prompt_hash, params, response, prompt_tokens, completion_tokens, usage_source,
                 datetime.now().replace(microsecond=0)])

    def response_count(self) -> int:
        return self.cursor().execute("SELECT count(*) FROM model_responses").fetchone()[0]

    def derived_frame(self, key: str) -> bytes | None:
        """The Parquet bytes stored under `key` (its inputs and their stored version), or None."""
        return next(iter(self.cursor().execute("SELECT data FROM derived_frames WHERE key = ?", [key]).fetchone()
                         or ()), None)

    def save_derived_frame(self, key: str, kind: str, data: bytes, corpus: str | None = None,
                           run_id: str | None = None, run_version: str | None = None) -> None:
        """Store a frame under `key`; one of run `run_id` at its stored version `run_version` replaces the run's
        frames of every other version (computed from rows no longer stored), in one transaction."""
        with self._transaction() as cur:
            if run_id is not None:
                cur.execute("DELETE FROM derived_frames WHERE corpus IS NOT DISTINCT FROM ? AND run_id = ? AND "
                            "run_version IS DISTINCT FROM ?", [corpus, run_id, run_version])
            cur.execute("INSERT OR REPLACE INTO derived_frames (key, kind, data, created_at, corpus, run_id, "
                        "run_version) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [key, kind, data, datetime.now().replace(microsecond=0), corpus, run_id, run_version])

    def derived_frame_count(self) -> int:
        return self.cursor().execute("SELECT count(*) FROM derived_frames").fetchone()[0]

    def message_vectors(self, corpus: str, scope: str, embedder: str,
                        ids: Sequence[str] | None = None) -> dict[str, tuple[str, bytes]]:
        """{message_id: (text_hash, float32 bytes)} stored for one scope and embedder (only `ids` when given)."""
        only, params = ("", []) if ids is None else (" AND message_id IN (SELECT unnest(?::VARCHAR[]))", [list(ids)])
        rows = self.cursor().execute("SELECT message_id, text_hash, vector FROM message_vectors WHERE corpus = ? "
                                     "AND scope = ? AND embedder = ?" + only, [corpus, scope, embedder, *params])
        return {r[0]: (r[1], r[2]) for r in rows.fetchall()}

    def bm25_index(self, corpus: str, scope: str, key: str) -> bytes | None:
        return next(iter(self.cursor().execute("SELECT data FROM bm25_indexes WHERE corpus = ? AND scope = ? AND "
                                               "key = ?", [corpus, scope, key]).fetchone() or ()), None)

    def save_bm25_index(self, corpus: str, scope: str, key: str, data: bytes) -> None:
        self._upsert_frame("bm25_indexes", pd.DataFrame([(corpus, scope, key, data)]))

    def save_message_vectors(self, corpus: str, scope: str, embedder: str,
                             rows: Sequence[tuple[str, str, bytes]]) -> None:
        """Upsert (message_id, text_hash, float32 bytes) rows in one transaction."""
        frame = pd.DataFrame([(corpus, scope, embedder, *r) for r in rows],
                             columns=("corpus", "scope", "embedder", "message_id", "text_hash", "vector"))
        self._upsert_frame("message_vectors", frame)

    def query_vectors(self, embedder: str, text_hashes: Sequence[str]) -> dict[str, bytes]:
        rows = self.cursor().execute("SELECT text_hash, vector FROM query_vectors WHERE embedder = ? AND "
                                     "list_contains(?, text_hash)", [embedder, list(text_hashes)]).fetchall()
        return {r[0]: r[1] for r in rows}

    def save_query_vectors(self, embedder: str, rows: Sequence[tuple[str, bytes]]) -> None:
        frame = pd.DataFrame([(embedder, *r) for r in rows], columns=("embedder", "text_hash", "vector"))
        self._upsert_frame("query_vectors", frame)
