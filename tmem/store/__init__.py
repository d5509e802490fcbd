"""The only module talking to DuckDB (with its mixins store_sweeps.py, store_annotations.py): schema, loads, traces.

Gold answers, evidence and reply links live in their own evaluation tables (`gold_*`): the retrieval and answer code
paths read `messages` and `questions` only (see `tests/test_leakage.py`).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

import duckdb
import pandas as pd

from tmem.limits import check_trace_size, safe_name
from tmem.store.annotations import REVIEW_SCHEMA, ReviewTables
from tmem.store.lease import Lease
from tmem.store.message_columns import arrow_messages, messages_from_rows
from tmem.store.sweeps import SWEEP_SCHEMA, SweepTables
from tmem.types import CorpusData, CorpusError, Gold, Message, Question, Trace

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DB = PROJECT_ROOT / "data" / "tmem.duckdb"

MESSAGE_COLUMNS = ("id", "text", "timestamp", "author", "role", "channel", "topic", "phase", "stage",
                   "phase_order", "phase_progress", "reply_to")

SCHEMA = """
CREATE TABLE IF NOT EXISTS corpora (
    name VARCHAR PRIMARY KEY, format VARCHAR, source VARCHAR, imported_at TIMESTAMP, notes VARCHAR);
CREATE TABLE IF NOT EXISTS messages (
    corpus VARCHAR NOT NULL, scope VARCHAR NOT NULL, seq INTEGER NOT NULL, id VARCHAR NOT NULL,
    text VARCHAR NOT NULL, timestamp TIMESTAMP NOT NULL, author VARCHAR, role VARCHAR, channel VARCHAR,
    topic VARCHAR, phase VARCHAR, stage INTEGER, phase_order INTEGER, phase_progress DOUBLE, reply_to VARCHAR,
    PRIMARY KEY (corpus, scope, id));
CREATE TABLE IF NOT EXISTS questions (
    corpus VARCHAR NOT NULL, scope VARCHAR NOT NULL, seq INTEGER NOT NULL, id VARCHAR NOT NULL,
    text VARCHAR NOT NULL, asking_user VARCHAR, qtype VARCHAR, PRIMARY KEY (corpus, scope, id));
CREATE TABLE IF NOT EXISTS gold_answers (
    corpus VARCHAR NOT NULL, scope VARCHAR NOT NULL, question_id VARCHAR NOT NULL, answer VARCHAR,
    superseded VARCHAR, PRIMARY KEY (corpus, scope, question_id));
CREATE TABLE IF NOT EXISTS gold_evidence (
    corpus VARCHAR NOT NULL, scope VARCHAR NOT NULL, question_id VARCHAR NOT NULL, unit INTEGER NOT NULL,
    message_id VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS gold_links (
    corpus VARCHAR NOT NULL, scope VARCHAR NOT NULL, child_id VARCHAR NOT NULL, parent_id VARCHAR NOT NULL,
    relation VARCHAR);
-- gold_links: a self-link (parent_id = child_id) marks a gold root (IRC's own convention); relation is UPDATE /
-- EXPAND / ROOT where the source types the edge, NULL for untyped reply links. Added to older files in place:
ALTER TABLE gold_links ADD COLUMN IF NOT EXISTS relation VARCHAR;
CREATE TABLE IF NOT EXISTS traces (
    corpus VARCHAR NOT NULL, scope VARCHAR NOT NULL, question_id VARCHAR NOT NULL, variant VARCHAR NOT NULL,
    config_hash VARCHAR NOT NULL, backend VARCHAR NOT NULL, created_at TIMESTAMP, trace_json VARCHAR NOT NULL,
    PRIMARY KEY (corpus, scope, question_id, variant, config_hash, backend));
-- batch runs (tmem.evaluation.batch.run): one row per (run, variant, question); the trace itself is in `traces`
CREATE TABLE IF NOT EXISTS run_results (
    run_id VARCHAR NOT NULL, corpus VARCHAR NOT NULL, variant VARCHAR NOT NULL, config_hash VARCHAR NOT NULL,
    backend VARCHAR NOT NULL, scope VARCHAR NOT NULL, question_id VARCHAR NOT NULL, qtype VARCHAR,
    status VARCHAR NOT NULL, correct BOOLEAN, correct_flat BOOLEAN, failure VARCHAR, failure_detail VARCHAR,
    units INTEGER, units_recovered INTEGER, evidence_messages INTEGER, prompt_tokens INTEGER,
    completion_tokens INTEGER, seconds DOUBLE, error VARCHAR, created_at TIMESTAMP,
    PRIMARY KEY (run_id, variant, scope, question_id));
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
""" + SWEEP_SCHEMA + REVIEW_SCHEMA


def default_db_path() -> Path:
    return Path(os.environ.get("TMEM_DB", DEFAULT_DB))


class StoreInUse(ValueError):
    """The database file is locked by another process (DuckDB allows one writer process per file)."""


class Store(SweepTables, ReviewTables):
    """A DuckDB file held only while queries run (store.lease); a cursor per query (one per thread); writes locked."""

    def __init__(self, path: str | Path | None = None, read_only: bool = False):
        self.path = Path(path) if path is not None else default_db_path()
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._read_only = read_only
        self._lease = Lease(self._connect, None if str(self.path) == ":memory:" else self.path, StoreInUse)
        self._write_lock = threading.Lock()
        self.cursor().execute("SELECT 1" if read_only else SCHEMA)  # a bad or held file fails here, at once

    def _connect(self) -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(str(self.path), read_only=self._read_only)
        except duckdb.Error as exc:
            if not isinstance(exc, duckdb.IOException) or "lock" not in str(exc).lower():
                detail = str(exc).split("Error: ", 1)[-1].split("\n")[0]  # not DuckDB, a folder: one line
                raise ValueError(f"database {self.path} cannot be opened ({detail}); give a DuckDB file with --db "
                                 "or TMEM_DB (a new name creates one)") from None
            holder = str(exc).split("Conflicting lock is held in", 1)[-1].split(". See")[0].strip()
            raise StoreInUse(f"database {self.path} is in use by another process ({holder}), e.g. the app or "
                             "another tmem command: close it, or give this command another database with --db "
                             "or TMEM_DB") from None

    def cursor(self):
        return self._lease.cursor()

    def close(self) -> None:
        self._lease.close()

    # ------------------------------------------------------------------------------------------- writes
    def replace_corpus(self, name: str, data: CorpusData, *, format: str, source: str = "", notes: str = "") -> None:
        """Load a whole corpus in one transaction; an existing corpus of that name is replaced (idempotent)."""
        safe_name(name, "corpus name")
        if not data.messages:
            raise CorpusError(f"{source or name}: the corpus has no messages")
        messages = arrow_messages(name, data.messages)  # typed columns: one bulk load, no per-row Python work
        questions = pd.DataFrame(
            [(name, q.scope, i, q.id, q.text, q.asking_user, q.type) for i, q in enumerate(data.questions)],
            columns=("corpus", "scope", "seq", "id", "text", "asking_user", "qtype"))
        golds = pd.DataFrame([(name, s, g.question_id, g.answer, g.superseded) for s, g in data.golds],
                             columns=("corpus", "scope", "question_id", "answer", "superseded"))
        evidence = pd.DataFrame(
            [(name, s, g.question_id, u, mid) for s, g in data.golds for u, unit in enumerate(g.evidence)
             for mid in unit], columns=("corpus", "scope", "question_id", "unit", "message_id"))
        links = pd.DataFrame([(name, *link, *(None,) * (4 - len(link))) for link in data.links],
                             columns=("corpus", "scope", "child_id", "parent_id", "relation"))
        with self._write_lock:
            cur = self.cursor()
            cur.execute("BEGIN TRANSACTION")
            try:
                for table in ("messages", "questions", "gold_answers", "gold_evidence", "gold_links", "traces",
                              "run_results", "bm25_indexes", "sweep_results"):
                    cur.execute(f"DELETE FROM {table} WHERE corpus = ?", [name])
                cur.execute("DELETE FROM corpora WHERE name = ?", [name])
                for table, frame in (("messages", messages), ("questions", questions), ("gold_answers", golds),
                                     ("gold_evidence", evidence), ("gold_links", links)):
                    if len(frame):
                        columns = ", ".join(getattr(frame, "column_names", frame.columns))  # Arrow or pandas
                        cur.register("frame_", frame)
                        cur.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM frame_")
                        cur.unregister("frame_")
                cur.execute("INSERT INTO corpora VALUES (?, ?, ?, ?, ?)",
                            [name, format, source, datetime.now().replace(microsecond=0), notes])
                cur.execute("COMMIT")
            except duckdb.ConstraintException as exc:
                cur.execute("ROLLBACK")
                raise CorpusError(f"{source or name}: duplicate id ({exc})") from exc
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    def save_trace(self, trace: Trace, backend: str) -> None:
        q = trace.question
        with self._write_lock:
            self.cursor().execute(
                "INSERT OR REPLACE INTO traces VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [trace.corpus, q.scope, q.id, trace.variant, trace.config_hash, backend,
                 datetime.now().replace(microsecond=0), check_trace_size(trace.to_json(), q.id)])

    # -------------------------------------------------------------------------------------------- reads
    def corpora(self) -> list[str]:
        return [r[0] for r in self.cursor().execute("SELECT name FROM corpora ORDER BY name").fetchall()]

    def has_corpus(self, name: str) -> bool:
        return bool(self.cursor().execute("SELECT 1 FROM corpora WHERE name = ?", [name]).fetchone())

    def corpus_info(self, name: str) -> dict:
        row = self.cursor().execute("SELECT format, source, imported_at, notes FROM corpora WHERE name = ?",
                                    [name]).fetchone()
        if row is None:
            raise KeyError(f"unknown corpus {name!r}; known: {', '.join(self.corpora()) or 'none'}")
        return dict(zip(("format", "source", "imported_at", "notes"), row))

    def counts(self, corpus: str) -> dict[str, int]:
        cur = self.cursor()
        one = lambda sql: cur.execute(sql, [corpus]).fetchone()[0]  # noqa: E731
        return {
            "scopes": one("SELECT count(DISTINCT scope) FROM messages WHERE corpus = ?"),
            "messages": one("SELECT count(*) FROM messages WHERE corpus = ?"),
            "questions": one("SELECT count(*) FROM questions WHERE corpus = ?"),
            "evidence_units": one("SELECT count(*) FROM (SELECT DISTINCT scope, question_id, unit "
                                  "FROM gold_evidence WHERE corpus = ?)"),
            "gold_links": one("SELECT count(*) FROM gold_links WHERE corpus = ? AND child_id <> parent_id"),
        }

    def scopes(self, corpus: str) -> list[str]:
        rows = self.cursor().execute(
            "SELECT scope FROM messages WHERE corpus = ? GROUP BY scope ORDER BY min(seq)", [corpus]).fetchall()
        return [r[0] for r in rows]

    def messages(self, corpus: str, scope: str) -> list[Message]:
        return self._messages("corpus = ? AND scope = ?", [corpus, scope])

    def messages_by_ids(self, corpus: str, scope: str, ids: Iterable[str]) -> list[Message]:
        return self._messages("corpus = ? AND scope = ? AND list_contains(?, id)", [corpus, scope, list(ids)])

    def window(self, corpus: str, scope: str, topic: str | None, start: datetime, end: datetime) -> list[Message]:
        """Messages of one topic (None: messages without a topic) inside [start, end]."""
        topic_sql = "topic IS NULL" if topic is None else "topic = ?"
        params = [corpus, scope] + ([] if topic is None else [topic]) + [start, end]
        return self._messages(f"corpus = ? AND scope = ? AND {topic_sql} AND timestamp BETWEEN ? AND ?", params)

    def _messages(self, where: str, params: list) -> list[Message]:
        result = self.cursor().execute(
            f"SELECT scope, {', '.join(MESSAGE_COLUMNS)} FROM messages WHERE {where} ORDER BY seq", params)
        return messages_from_rows(result)  # fetched in batches; repeated scope and metadata strings shared

    def messages_frame(self, corpus: str, scope: str | None = None) -> pd.DataFrame:
        sql = f"SELECT scope, {', '.join(MESSAGE_COLUMNS)} FROM messages WHERE corpus = ?"
        params: list = [corpus]
        if scope is not None:
            sql += " AND scope = ?"
            params.append(scope)
        return self.cursor().execute(sql + " ORDER BY seq", params).df()

    def questions(self, corpus: str, scope: str | None = None) -> list[Question]:
        sql = "SELECT id, scope, text, asking_user, qtype FROM questions WHERE corpus = ?"
        params: list = [corpus]
        if scope is not None:
            sql += " AND scope = ?"
            params.append(scope)
        rows = self.cursor().execute(sql + " ORDER BY seq", params).fetchall()
        return [Question(*r) for r in rows]

    def question(self, corpus: str, question_id: str, scope: str | None = None) -> Question:
        found = [q for q in self.questions(corpus, scope) if q.id == question_id]
        if not found:
            raise KeyError(f"no question {question_id!r} in corpus {corpus!r}" + (f" scope {scope!r}" if scope else ""))
        if len(found) > 1:
            raise KeyError(f"question id {question_id!r} exists in several scopes "
                           f"({', '.join(q.scope for q in found)}); pass a scope")
        return found[0]

    # -------------------------------------------------------------------------- evaluation-only reads
    def gold(self, corpus: str, scope: str, question_id: str) -> Gold | None:
        cur = self.cursor()
        row = cur.execute("SELECT answer, superseded FROM gold_answers WHERE corpus = ? AND scope = ? "
                          "AND question_id = ?", [corpus, scope, question_id]).fetchone()
        units = cur.execute("SELECT unit, list(message_id ORDER BY message_id) FROM gold_evidence WHERE corpus = ? "
                            "AND scope = ? AND question_id = ? GROUP BY unit ORDER BY unit",
                            [corpus, scope, question_id]).fetchall()
        if row is None and not units:
            return None
        answer, superseded = row if row else (None, None)
        return Gold(question_id, answer, tuple(tuple(u[1]) for u in units), superseded)

    def gold_links(self, corpus: str, scope: str) -> list[tuple[str, str]]:
        return self.cursor().execute("SELECT child_id, parent_id FROM gold_links WHERE corpus = ? AND scope = ? "
                                     "AND child_id <> parent_id", [corpus, scope]).fetchall()

    def gold_edges(self, corpus: str, scope: str) -> list[tuple[str, str | None, str | None]]:
        """(child_id, parent_id or None for a gold root, relation or None when untyped), in load order."""
        columns = {r[0] for r in self.cursor().execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'gold_links'").fetchall()}
        relation = "relation" if "relation" in columns else "NULL"  # a read-only file from before the column
        rows = self.cursor().execute(f"SELECT child_id, parent_id, {relation} FROM gold_links WHERE corpus = ? AND "
                                     "scope = ? ORDER BY rowid", [corpus, scope]).fetchall()
        return [(c, None if p == c else p, "ROOT" if p == c and r is None else r) for c, p, r in rows]

    # ------------------------------------------------------------------------------------------ traces
    def load_trace(self, corpus: str, scope: str, question_id: str, variant: str, config_hash: str,
                   backend: str) -> Trace | None:
        row = self.cursor().execute(
            "SELECT trace_json FROM traces WHERE corpus = ? AND scope = ? AND question_id = ? AND variant = ? "
            "AND config_hash = ? AND backend = ?", [corpus, scope, question_id, variant, config_hash, backend]
        ).fetchone()
        return Trace.from_json(row[0]) if row else None

    def trace_index(self, corpus: str, with_json: bool = False) -> pd.DataFrame:
        """Stored traces' keys (`with_json`: and the JSON unparsed, for readers of a few fields of many traces)."""
        cols = "scope, question_id, variant, config_hash, backend, created_at" + (", trace_json" if with_json else "")
        return self.cursor().execute(f"SELECT {cols} FROM traces WHERE corpus = ? ORDER BY created_at", [corpus]).df()

    # --- batch run results
    RUN_RESULT_COLUMNS = ("run_id", "corpus", "variant", "config_hash", "backend", "scope", "question_id", "qtype",
                          "status", "correct", "correct_flat", "failure", "failure_detail", "units",
                          "units_recovered", "evidence_messages", "prompt_tokens", "completion_tokens", "seconds",
                          "error", "created_at")

    def save_run_results(self, rows: Sequence[dict]) -> None:
        """Insert or replace result rows (dicts keyed by RUN_RESULT_COLUMNS) in one transaction."""
        if not rows:
            return
        frame = pd.DataFrame([[r.get(c) for c in self.RUN_RESULT_COLUMNS] for r in rows],
                             columns=self.RUN_RESULT_COLUMNS)
        with self._write_lock:
            cur = self.cursor()
            cur.register("results_", frame)
            cur.execute(f"INSERT OR REPLACE INTO run_results SELECT {', '.join(self.RUN_RESULT_COLUMNS)} "
                        "FROM results_")
            cur.unregister("results_")

    def replace_run_results(self, run_id: str, variants: Sequence[str], rows: Sequence[dict]) -> int:
        """Replace the result rows of one run's `variants` with `rows` (none: remove them) in one transaction;
        -> the number of rows removed."""
        frame = pd.DataFrame([[r.get(c) for c in self.RUN_RESULT_COLUMNS] for r in rows],
                             columns=self.RUN_RESULT_COLUMNS)
        where, params = "run_id = ? AND list_contains(?, variant)", [run_id, list(variants)]
        with self._write_lock:
            cur = self.cursor()
            cur.execute("BEGIN TRANSACTION")
            try:
                removed = cur.execute(f"SELECT count(*) FROM run_results WHERE {where}", params).fetchone()[0]
                cur.execute(f"DELETE FROM run_results WHERE {where}", params)
                if len(frame):
                    cur.register("results_", frame)
                    cur.execute(f"INSERT INTO run_results SELECT {', '.join(self.RUN_RESULT_COLUMNS)} FROM results_")
                    cur.unregister("results_")
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        return removed

    def run_results(self, corpus: str, run_id: str | None = None) -> pd.DataFrame:
        sql = f"SELECT {', '.join(self.RUN_RESULT_COLUMNS)} FROM run_results WHERE corpus = ?"
        params: list = [corpus]
        if run_id is not None:
            sql += " AND run_id = ?"
            params.append(run_id)
        return self.cursor().execute(sql + " ORDER BY run_id, variant, scope, question_id", params).df()

    def run_ids(self, corpus: str) -> list[str]:
        return [r[0] for r in self.cursor().execute(
            "SELECT run_id FROM run_results WHERE corpus = ? GROUP BY run_id ORDER BY max(created_at) DESC, run_id",
            [corpus]).fetchall()]

    # --- model response cache and message vectors
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

    def _upsert_frame(self, table: str, frame: pd.DataFrame) -> None:
        if not len(frame):
            return
        with self._write_lock:
            cur = self.cursor()
            cur.register("vectors_", frame)
            try:
                cur.execute(f"INSERT OR REPLACE INTO {table} SELECT * FROM vectors_")
            finally:
                cur.unregister("vectors_")


def open_store(path: str | Path | None = None) -> Store:
    """Open (and create) the database. `tmem.api.open_store` also loads the shipped demo corpus on first use."""
    return Store(path)
