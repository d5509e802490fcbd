"""The Store's trace tables: one stored trace per (question, variant, configuration, backend), and the result rows
of batch runs (one per run, variant and question; the trace itself is in `traces`).
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pandas as pd

from tmem.limits import check_trace_size
from tmem.store.caches import DROP_RUN_FRAMES
from tmem.types import Trace

TRACE_SCHEMA = """
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
"""


class TraceTables:
    """Store methods for traces and batch-run result rows (`self` is a tmem.store.Store)."""

    def save_trace(self, trace: Trace, backend: str) -> None:
        q = trace.question
        with self._write_lock:
            self.cursor().execute(
                "INSERT OR REPLACE INTO traces VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [trace.corpus, q.scope, q.id, trace.variant, trace.config_hash, backend,
                 datetime.now(), check_trace_size(trace.to_json(), q.id)])  # to the microsecond: trace_version

    def load_trace(self, corpus: str, scope: str, question_id: str, variant: str, config_hash: str,
                   backend: str) -> Trace | None:
        row = self.cursor().execute(
            "SELECT trace_json FROM traces WHERE corpus = ? AND scope = ? AND question_id = ? AND variant = ? "
            "AND config_hash = ? AND backend = ?", [corpus, scope, question_id, variant, config_hash, backend]
        ).fetchone()
        return Trace.from_json(row[0]) if row else None

    def trace_version(self, corpus: str, scope: str, question_id: str, variant: str, config_hash: str,
                      backend: str) -> str | None:
        """When the stored trace was written, to the microsecond, and its JSON's size in bytes, as "time:size" (""
        if the time is unknown; None when there is no such trace): a re-run replaces the row under the same key, so
        a cache of parsed traces is keyed by this too -- a file's st_mtime_ns and st_size, as it were. Times were
        once kept to the second, and a trace written again within its second (by another process) was served
        stale. Not a hash of the JSON: DuckDB reads these in ~1 ms, hashing 75 kB took 70-170 ms."""
        row = self.cursor().execute(
            "SELECT created_at, strlen(trace_json) FROM traces WHERE corpus = ? AND scope = ? AND question_id = ? "
            "AND variant = ? AND config_hash = ? AND backend = ?",
            [corpus, scope, question_id, variant, config_hash, backend]).fetchone()
        return None if row is None else (f"{row[0].isoformat(timespec='microseconds')}:{row[1]}"
                                         if row[0] is not None else "")

    def trace_index(self, corpus: str, with_json: bool = False) -> pd.DataFrame:
        """Stored traces' keys (`with_json`: and the JSON unparsed, for readers of a few fields of many traces)."""
        cols = "scope, question_id, variant, config_hash, backend, created_at" + (", trace_json" if with_json else "")
        return self.cursor().execute(f"SELECT {cols} FROM traces WHERE corpus = ? ORDER BY created_at", [corpus]).df()

    def search_traces(self, corpus: str, text: str) -> pd.DataFrame:
        """Keys of the stored traces whose JSON holds `text`, case-insensitively (question, messages in their
        context, answers, reasons, verdicts: everything a trace records)."""
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        return self.cursor().execute(
            "SELECT DISTINCT scope, question_id, variant, config_hash, backend FROM traces WHERE corpus = ? AND "
            "trace_json ILIKE ? ESCAPE '\\'", [corpus, pattern]).df()

    # --- batch run results
    RUN_RESULT_COLUMNS = ("run_id", "corpus", "variant", "config_hash", "backend", "scope", "question_id", "qtype",
                          "status", "correct", "correct_flat", "failure", "failure_detail", "units",
                          "units_recovered", "evidence_messages", "prompt_tokens", "completion_tokens", "seconds",
                          "error", "created_at")

    def save_run_results(self, rows: Sequence[dict]) -> None:
        """Insert or replace result rows (dicts keyed by RUN_RESULT_COLUMNS) in one transaction, dropping the frames
        derived from those runs' earlier rows."""
        if not rows:
            return
        frame = pd.DataFrame([[r.get(c) for c in self.RUN_RESULT_COLUMNS] for r in rows],
                             columns=self.RUN_RESULT_COLUMNS)
        with self._transaction() as cur:
            cur.execute(DROP_RUN_FRAMES, [sorted(set(frame["run_id"]))])  # computed from the runs' old rows
            cur.register("results_", frame)
            cur.execute(f"INSERT OR REPLACE INTO run_results SELECT {', '.join(self.RUN_RESULT_COLUMNS)} "
                        "FROM results_")
            cur.unregister("results_")

    def replace_run_results(self, run_id: str, variants: Sequence[str], rows: Sequence[dict]) -> int:
        """Replace the result rows of one run's `variants` with `rows` (none: remove them) in one transaction,
        dropping the frames derived from the run's earlier rows; -> the number of rows removed."""
        frame = pd.DataFrame([[r.get(c) for c in self.RUN_RESULT_COLUMNS] for r in rows],
                             columns=self.RUN_RESULT_COLUMNS)
        where, params = "run_id = ? AND list_contains(?, variant)", [run_id, list(variants)]
        with self._transaction() as cur:
            removed = cur.execute(f"SELECT count(*) FROM run_results WHERE {where}", params).fetchone()[0]
            cur.execute(f"DELETE FROM run_results WHERE {where}", params)
            cur.execute(DROP_RUN_FRAMES, [[run_id]])  # computed from rows no longer stored
            if len(frame):
                cur.register("results_", frame)
                cur.execute(f"INSERT INTO run_results SELECT {', '.join(self.RUN_RESULT_COLUMNS)} FROM results_")
                cur.unregister("results_")
        return removed

    def run_results(self, corpus: str, run_id: str | None = None) -> pd.DataFrame:
        sql = f"SELECT {', '.join(self.RUN_RESULT_COLUMNS)} FROM run_results WHERE corpus = ?"
        params: list = [corpus]
        if run_id is not None:
            sql += " AND run_id = ?"
            params.append(run_id)
        return self.cursor().execute(sql + " ORDER BY run_id, variant, scope, question_id", params).df()

    def run_variants(self, corpus: str, run_id: str) -> list[str]:
        """The variants a stored run has rows of."""
        return [r[0] for r in self.cursor().execute(
            "SELECT DISTINCT variant FROM run_results WHERE corpus = ? AND run_id = ? ORDER BY variant",
            [corpus, run_id]).fetchall()]

    def run_ids(self, corpus: str) -> list[str]:
        return [r[0] for r in self.cursor().execute(
            "SELECT run_id FROM run_results WHERE corpus = ? GROUP BY run_id ORDER BY max(created_at) DESC, run_id",
            [corpus]).fetchall()]
