"""Derived frames (a page's figures computed once per run version, e.g. Compare's budget-matched rows) are dropped
with the run version they were computed from: a frame of a newer version replaces the run's older ones, a replaced
or removed run and a re-imported corpus take theirs along, and an older database file gains the owner columns."""
from datetime import datetime

import duckdb

from tmem.store import CorpusData, Store
from tmem.types import Message


def _row(run_id: str, variant: str = "full") -> dict:
    return {"run_id": run_id, "corpus": "c", "variant": variant, "config_hash": "h", "backend": "b", "scope": "s",
            "question_id": "q1", "status": "ok", "created_at": datetime(2026, 1, 1)}


def _keys(store: Store) -> set[str]:
    return {r[0] for r in store.cursor().execute("SELECT key FROM derived_frames").fetchall()}


def test_a_newer_run_version_replaces_the_runs_older_frames(fresh_store):
    s = fresh_store
    s.save_derived_frame("r1-v1-flat", "matched", b"1", "c", "r1", "2:2026-01-01")
    s.save_derived_frame("r1-v1-bm25", "matched", b"2", "c", "r1", "2:2026-01-01")  # another pair, same version
    s.save_derived_frame("r2-v1", "matched", b"3", "c", "r2", "1:2026-01-01")
    s.save_derived_frame("d-r1-v0", "matched", b"4", "d", "r1", "9:2025-01-01")  # a run of that id in another corpus
    assert _keys(s) == {"r1-v1-flat", "r1-v1-bm25", "r2-v1", "d-r1-v0"}
    s.save_derived_frame("r1-v2-flat", "matched", b"5", "c", "r1", "3:2026-01-02")
    assert _keys(s) == {"r1-v2-flat", "r2-v1", "d-r1-v0"}
    assert s.derived_frame("r1-v2-flat") == b"5" and s.derived_frame("r1-v1-flat") is None
    s.save_derived_frame("r1-v2-flat", "matched", b"6", "c", "r1", "3:2026-01-02")  # the same key, rewritten
    assert s.derived_frame_count() == 3 and s.derived_frame("r1-v2-flat") == b"6"


def test_a_replaced_or_removed_run_and_a_reimport_drop_their_frames(fresh_store):
    s = fresh_store
    for key, run in (("a", "r1"), ("b", "r2"), ("c", "r3")):
        s.save_derived_frame(key, "matched", b"x", "c", run, "v")
    s.save_derived_frame("other-corpus", "matched", b"x", "d", "r9", "v")
    s.cursor().execute("INSERT INTO derived_frames (key, kind, data) VALUES ('legacy', 'matched', 'x')")  # no owner
    assert s.replace_run_results("r1", ["full"], [_row("r1")]) == 0  # a run stored again: its frames are stale
    assert _keys(s) == {"b", "c", "other-corpus", "legacy"}
    s.replace_run_results("r2", ["full"], [])  # a run removed (failed validation)
    assert _keys(s) == {"c", "other-corpus", "legacy"}
    s.save_run_results([_row("r3", "flat")])  # a row added to run r3: a new version of it
    assert _keys(s) == {"other-corpus", "legacy"}
    s.save_derived_frame("d-again", "matched", b"x", "d", "r9", "v")
    message = Message("m1", "s", "hello", datetime(2026, 1, 1))
    s.replace_corpus("d", CorpusData([message], [], [], []), format="test")  # re-import: its frames and the unowned
    assert _keys(s) == set()


def test_an_older_file_gains_the_owner_columns_and_keeps_its_frames(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE derived_frames (key VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, data BLOB NOT NULL, "
                "created_at TIMESTAMP)")
    con.execute("INSERT INTO derived_frames VALUES ('old', 'matched', 'x', NULL)")
    con.close()
    store = Store(path)
    try:
        assert store.derived_frame("old") == b"x"
        store.save_derived_frame("new", "matched", b"y", "c", "r1", "v1")
        assert _keys(store) == {"old", "new"}
    finally:
        store.close()
