"""The Store's review tables: reviewers' annotations on traces and named gold versions (corrections of the gold).
One table family of `tmem.store.Store`, like tmem.store.sweeps; like the rest of the Store it is the only code that
reads or writes its tables.

- `annotations`: one row per (corpus, run, scope, question, variant, author): a reviewer's failure label and note
  on one trace, with the trace's configuration hash and backend (so a later run of the same question under the
  same configuration shows it too: tmem.analysis.annotations). A re-run or a re-import of the corpus never
  deletes them: they are a person's work, and a note on a question that is gone is still shown as such.
- `failure_labels`: labels reviewers created (the built-in ones are tmem.analysis.annotations.BUILTIN_LABELS).
- `gold_corrections`: the corrections of each named gold version of a corpus (tmem.evaluation.gold_versions), one
  row per corrected question: the corrected answer and/or evidence (JSON list of units) and the reason.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

import pandas as pd

ANNOTATION_COLUMNS = ("corpus", "run_id", "scope", "question_id", "variant", "author", "label", "note",
                      "config_hash", "backend", "created_at")
CORRECTION_COLUMNS = ("corpus", "version", "scope", "question_id", "answer", "evidence", "reason", "source",
                      "created_at")

REVIEW_SCHEMA = """
CREATE TABLE IF NOT EXISTS annotations (
    corpus VARCHAR NOT NULL, run_id VARCHAR NOT NULL, scope VARCHAR NOT NULL, question_id VARCHAR NOT NULL,
    variant VARCHAR NOT NULL, author VARCHAR NOT NULL, label VARCHAR NOT NULL, note VARCHAR, config_hash VARCHAR,
    backend VARCHAR, created_at TIMESTAMP, PRIMARY KEY (corpus, run_id, scope, question_id, variant, author));
CREATE TABLE IF NOT EXISTS failure_labels (
    name VARCHAR PRIMARY KEY, description VARCHAR, created_by VARCHAR, created_at TIMESTAMP);
CREATE TABLE IF NOT EXISTS gold_corrections (
    corpus VARCHAR NOT NULL, version VARCHAR NOT NULL, scope VARCHAR NOT NULL, question_id VARCHAR NOT NULL,
    answer VARCHAR, evidence VARCHAR, reason VARCHAR NOT NULL, source VARCHAR, created_at TIMESTAMP,
    PRIMARY KEY (corpus, version, scope, question_id));
"""


class ReviewTables:
    """Store methods for annotations, failure labels and gold versions (`self` is a tmem.store.Store)."""

    # --- annotations
    def save_annotation(self, row: dict) -> None:
        """Insert or replace one annotation (a dict with ANNOTATION_COLUMNS; created_at defaults to now)."""
        values = [row.get(c) for c in ANNOTATION_COLUMNS]
        values[-1] = values[-1] or datetime.now().replace(microsecond=0)
        with self._write_lock:
            self.cursor().execute(f"INSERT OR REPLACE INTO annotations ({', '.join(ANNOTATION_COLUMNS)}) VALUES "
                                  f"({', '.join('?' * len(ANNOTATION_COLUMNS))})", values)

    def delete_annotation(self, corpus: str, run_id: str, scope: str, question_id: str, variant: str,
                          author: str) -> int:
        where = "corpus = ? AND run_id = ? AND scope = ? AND question_id = ? AND variant = ? AND author = ?"
        params = [corpus, run_id, scope, question_id, variant, author]
        with self._write_lock:
            cur = self.cursor()
            found = cur.execute(f"SELECT count(*) FROM annotations WHERE {where}", params).fetchone()[0]
            cur.execute(f"DELETE FROM annotations WHERE {where}", params)
        return found

    def annotations(self, corpus: str, run_id: str | None = None) -> pd.DataFrame:
        """A corpus's annotations (of one run when given), the newest first."""
        sql, params = f"SELECT {', '.join(ANNOTATION_COLUMNS)} FROM annotations WHERE corpus = ?", [corpus]
        if run_id is not None:
            sql, params = sql + " AND run_id = ?", params + [run_id]
        return self.cursor().execute(sql + " ORDER BY created_at DESC, author", params).df()

    def save_failure_label(self, name: str, description: str = "", created_by: str = "") -> None:
        with self._write_lock:
            self.cursor().execute("INSERT OR IGNORE INTO failure_labels VALUES (?, ?, ?, ?)",
                                  [name, description, created_by, datetime.now().replace(microsecond=0)])

    def failure_labels(self) -> list[tuple[str, str]]:
        """(name, description) of the labels reviewers created, by name."""
        return self.cursor().execute("SELECT name, coalesce(description, '') FROM failure_labels "
                                     "ORDER BY name").fetchall()

    def run_corpus(self, run_id: str) -> str | None:
        """The corpus a stored batch run belongs to (None: no such run)."""
        row = self.cursor().execute("SELECT min(corpus) FROM run_results WHERE run_id = ?", [run_id]).fetchone()
        return row[0] if row else None

    # --- bulk reads for reviewing a stored run (one query per scope instead of one per row)
    def run_trace_json(self, corpus: str, run_id: str, scope: str) -> dict[tuple[str, str, str, str], str]:
        """{(question id, variant, config hash, backend): trace JSON} of one run's rows in one scope."""
        rows = self.cursor().execute(
            "SELECT t.question_id, t.variant, t.config_hash, t.backend, t.trace_json FROM run_results r JOIN traces t "
            "ON t.corpus = r.corpus AND t.scope = r.scope AND t.question_id = r.question_id AND t.variant = r.variant "
            "AND t.config_hash = r.config_hash AND t.backend = r.backend WHERE r.corpus = ? AND r.run_id = ? AND "
            "r.scope = ?", [corpus, run_id, scope]).fetchall()
        return {tuple(r[:4]): r[4] for r in rows}

    # --- gold versions
    def replace_gold_version(self, corpus: str, version: str, rows: Sequence[dict], source: str = "") -> None:
        """Store a gold version's corrections (dicts with scope, question_id, answer, evidence as a list of units
        or None, reason), replacing an earlier version of that name, in one transaction."""
        now = datetime.now().replace(microsecond=0)
        frame = pd.DataFrame([(corpus, version, r["scope"], r["question_id"], r.get("answer"),
                               None if r.get("evidence") is None else json.dumps(r["evidence"]), r["reason"],
                               source, now) for r in rows], columns=list(CORRECTION_COLUMNS))
        with self._transaction() as cur:
            cur.execute("DELETE FROM gold_corrections WHERE corpus = ? AND version = ?", [corpus, version])
            if len(frame):
                cur.register("corrections_", frame)
                cur.execute(f"INSERT INTO gold_corrections SELECT {', '.join(CORRECTION_COLUMNS)} "
                            "FROM corrections_")
                cur.unregister("corrections_")

    def gold_versions(self, corpus: str) -> list[tuple[str, int, str]]:
        """(version, corrected questions, source file) of a corpus's stored gold versions, by name."""
        return self.cursor().execute("SELECT version, count(*), min(source) FROM gold_corrections WHERE corpus = ? "
                                     "GROUP BY version ORDER BY version", [corpus]).fetchall()

    def gold_corrections(self, corpus: str, version: str) -> list[dict]:
        rows = self.cursor().execute(
            "SELECT scope, question_id, answer, evidence, reason FROM gold_corrections WHERE corpus = ? AND "
            "version = ? ORDER BY scope, question_id", [corpus, version]).fetchall()
        return [{"scope": s, "question_id": q, "answer": a, "evidence": None if e is None else json.loads(e),
                 "reason": r} for s, q, a, e, r in rows]
