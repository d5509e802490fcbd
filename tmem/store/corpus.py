"""The Store's corpus tables: corpora, messages and questions (what retrieval and answering read), and the gold
tables (`gold_*`: answers, evidence, reply links), which only evaluation reads (see `tests/test_leakage.py`).
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import duckdb
import pandas as pd

from tmem.limits import safe_name
from tmem.store.caches import DROP_CORPUS_FRAMES
from tmem.store.message_columns import arrow_messages, messages_from_rows
from tmem.types import CorpusData, CorpusError, Gold, Message, Question

MESSAGE_COLUMNS = ("id", "text", "timestamp", "author", "role", "channel", "topic", "phase", "stage",
                   "phase_order", "phase_progress", "reply_to")

CORPUS_SCHEMA = """
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
-- corpora.split / sealed / split_of: the dataset split its data declares (tmem/corpora/splits.py); '' = no marker,
-- NULL = imported before these columns (corpus_split then reads the marker from the source). Added in place:
ALTER TABLE corpora ADD COLUMN IF NOT EXISTS split VARCHAR;
ALTER TABLE corpora ADD COLUMN IF NOT EXISTS sealed BOOLEAN;
ALTER TABLE corpora ADD COLUMN IF NOT EXISTS split_of VARCHAR;
"""
SPLIT_COLUMNS = ("split", "sealed", "split_of")


class CorpusTables:
    """Store methods for a corpus and its gold (`self` is a tmem.store.Store). A re-import replaces the corpus and
    drops what was computed from it (traces, results, indexes, sweeps, derived frames)."""

    def replace_corpus(self, name: str, data: CorpusData, *, format: str, source: str = "", notes: str = "",
                       split=None) -> None:
        """Load a whole corpus in one transaction; an existing corpus of that name is replaced (idempotent).
        `split`: the tmem.corpora.splits.Split its data declares, if any."""
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
                              "run_results", "bm25_indexes", "sweep_results", "sweep_progress", "system_memories"):
                    cur.execute(f"DELETE FROM {table} WHERE corpus = ?", [name])
                cur.execute("DELETE FROM corpora WHERE name = ?", [name])
                cur.execute(DROP_CORPUS_FRAMES, [name])
                for table, frame in (("messages", messages), ("questions", questions), ("gold_answers", golds),
                                     ("gold_evidence", evidence), ("gold_links", links)):
                    if len(frame):
                        columns = ", ".join(getattr(frame, "column_names", frame.columns))  # Arrow or pandas
                        cur.register("frame_", frame)
                        cur.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM frame_")
                        cur.unregister("frame_")
                cur.execute("INSERT INTO corpora (name, format, source, imported_at, notes, split, sealed, split_of) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            [name, format, source, datetime.now().replace(microsecond=0), notes,
                             *((split.split, split.sealed, split.split_of) if split else ("", False, ""))])
                cur.execute("COMMIT")
            except duckdb.ConstraintException as exc:
                cur.execute("ROLLBACK")
                raise CorpusError(f"{source or name}: duplicate id ({exc})") from exc
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    # -------------------------------------------------------------------------------------------- reads
    def corpora(self) -> list[str]:
        return [r[0] for r in self.cursor().execute("SELECT name FROM corpora ORDER BY name").fetchall()]

    def has_corpus(self, name: str) -> bool:
        return bool(self.cursor().execute("SELECT 1 FROM corpora WHERE name = ?", [name]).fetchone())

    def corpus_info(self, name: str) -> dict:
        """format, source, imported_at, notes, and the split columns where the file has them (a read-only file
        from before them has not)."""
        if getattr(self, "_split_columns", None) is None:  # read once per Store: open_scope asks per question
            self._split_columns = tuple(c for c in SPLIT_COLUMNS if c in {r[0] for r in self.cursor().execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'corpora'").fetchall()})
        names = ("format", "source", "imported_at", "notes", *self._split_columns)
        row = self.cursor().execute(f"SELECT {', '.join(names)} FROM corpora WHERE name = ?", [name]).fetchone()
        if row is None:
            raise KeyError(f"unknown corpus {name!r}; known: {', '.join(self.corpora()) or 'none'}")
        return dict(zip(names, row))

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

    def golds(self, corpus: str, scope: str | None = None) -> dict[tuple[str, str], Gold]:
        """{(scope, question id): gold} of every question with gold in the corpus (or one `scope`), as `gold` gives
        each: two queries, where a loop over `gold` makes two per question (LoCoMo's 1,986: 4.4 s of CPU a pass)."""
        where, args = ("corpus = ? AND scope = ?", [corpus, scope]) if scope is not None else ("corpus = ?", [corpus])
        cur = self.cursor()
        answers = {(s, q): (a, sup) for s, q, a, sup in cur.execute(
            f"SELECT scope, question_id, answer, superseded FROM gold_answers WHERE {where}", args).fetchall()}
        units: dict[tuple[str, str], list[tuple[str, ...]]] = {}
        for s, q, ids in cur.execute("SELECT scope, question_id, list(message_id ORDER BY message_id) FROM "
                                     f"gold_evidence WHERE {where} GROUP BY scope, question_id, unit "
                                     "ORDER BY scope, question_id, unit", args).fetchall():
            units.setdefault((s, q), []).append(tuple(ids))
        out = {}
        for key in answers.keys() | units.keys():
            answer, superseded = answers.get(key, (None, None))
            out[key] = Gold(key[1], answer, tuple(units.get(key, ())), superseded)
        return out

    def scope_golds(self, corpus: str, scope: str) -> dict[str, Gold]:
        """{question id: Gold} of one scope (`gold` for every question of it at once)."""
        return {q: gold for (_, q), gold in self.golds(corpus, scope).items()}

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
