"""The Store's sweep table (tmem.evaluation.sweep): one row per (corpus, sweep, cell, question) with what the cell
measured for that question. One table family of `tmem.store.Store`; like the rest of the Store it is the only
code that reads or writes its table. A re-import of the corpus deletes its
rows (`Store.replace_corpus`), since they describe messages that are gone.

`params` is the cell's grid values as JSON ({"discovery.eps_hours": 6.0, "retrieval.k": 12}, in the grid's order),
which is all the Sweep view needs to lay cells out; `overrides` is the cell's whole override text (grid values and
the sweep's fixed `--set` values), the `cfg=` of the links that open a cell's questions.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pandas as pd

SWEEP_COLUMNS = ("sweep", "corpus", "cell", "params", "overrides", "variant", "config_hash", "backend", "measure",
                 "scope", "question_id", "qtype", "units", "units_recovered", "seed_units_recovered",
                 "evidence_messages", "correct", "correct_flat", "seconds", "error", "created_at")

SWEEP_SCHEMA = """
CREATE TABLE IF NOT EXISTS sweep_results (
    sweep VARCHAR NOT NULL, corpus VARCHAR NOT NULL, cell VARCHAR NOT NULL, params VARCHAR NOT NULL,
    overrides VARCHAR, variant VARCHAR NOT NULL, config_hash VARCHAR NOT NULL, backend VARCHAR NOT NULL,
    measure VARCHAR NOT NULL, scope VARCHAR NOT NULL, question_id VARCHAR NOT NULL, qtype VARCHAR, units INTEGER,
    units_recovered INTEGER, seed_units_recovered INTEGER, evidence_messages INTEGER, correct BOOLEAN,
    correct_flat BOOLEAN, seconds DOUBLE, error VARCHAR, created_at TIMESTAMP,
    PRIMARY KEY (corpus, sweep, cell, scope, question_id));
CREATE TABLE IF NOT EXISTS sweep_progress (
    corpus VARCHAR NOT NULL, sweep VARCHAR NOT NULL, pid INTEGER, host VARCHAR, measured INTEGER, total INTEGER,
    started_at TIMESTAMP, updated_at TIMESTAMP, finished_at TIMESTAMP, PRIMARY KEY (corpus, sweep));
"""
PROGRESS_COLUMNS = ("corpus", "sweep", "pid", "host", "measured", "total", "started_at", "updated_at", "finished_at")


class SweepTables:
    """Store methods for sweep results (`self` is a tmem.store.Store)."""

    SWEEP_COLUMNS = SWEEP_COLUMNS

    def save_sweep_rows(self, rows: Sequence[dict]) -> None:
        """Upsert rows (dicts with SWEEP_COLUMNS; a missing key is NULL) in one statement: a cell's question
        measured again replaces its earlier row."""
        frame = pd.DataFrame([[r.get(c) for c in SWEEP_COLUMNS] for r in rows], columns=list(SWEEP_COLUMNS))
        for column in ("correct", "correct_flat"):  # None and bools: a nullable boolean, not an object column
            frame[column] = frame[column].astype("boolean")
        self._upsert_frame("sweep_results", frame)

    def sweep_results(self, corpus: str, sweep: str | None = None) -> pd.DataFrame:
        """The rows of one sweep of `corpus` (None: of all its sweeps), in the order they were written."""
        sql, params = f"SELECT {', '.join(SWEEP_COLUMNS)} FROM sweep_results WHERE corpus = ?", [corpus]
        if sweep is not None:
            sql, params = sql + " AND sweep = ?", params + [sweep]
        return self.cursor().execute(sql + " ORDER BY sweep, created_at, cell, scope, question_id", params).df()

    def sweep_names(self, corpus: str) -> list[str]:
        """The corpus's sweeps, the most recently written first."""
        return [r[0] for r in self.cursor().execute(
            "SELECT sweep FROM sweep_results WHERE corpus = ? GROUP BY sweep ORDER BY max(created_at) DESC, sweep",
            [corpus]).fetchall()]

    # --- a sweep in progress (written by the process that runs it, read by the app's Sweep view)
    def save_sweep_progress(self, corpus: str, sweep: str, pid: int, host: str, measured: int, total: int,
                            started_at: datetime, finished: bool = False) -> None:
        now = datetime.now().replace(microsecond=0)
        with self._write_lock:
            self.cursor().execute("INSERT OR REPLACE INTO sweep_progress VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                  [corpus, sweep, pid, host, measured, total, started_at, now,
                                   now if finished else None])

    def sweep_progress(self, corpus: str) -> list[dict]:
        """The corpus's sweeps that were started and have not finished (a killed run stays here: the caller checks
        that its process is alive), the most recently updated first."""
        rows = self.cursor().execute(f"SELECT {', '.join(PROGRESS_COLUMNS)} FROM sweep_progress WHERE corpus = ? AND "
                                     "finished_at IS NULL ORDER BY updated_at DESC", [corpus]).fetchall()
        return [dict(zip(PROGRESS_COLUMNS, r)) for r in rows]
