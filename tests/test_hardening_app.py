"""AppTest: known failures become callouts that say what to do, never a traceback — a database held by
another process (StoreInUse), a replay-only cache miss (ReplayMissError), a file that is not a DuckDB database."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tmem.models.llm.cache import ReplayMissError

QUESTION = "pages/question.py"


def _errors(at) -> str:
    return "\n".join(e.value for e in at.error)


@pytest.fixture
def locked_db(tmp_path):
    """A DuckDB file held open for writing by another process (DuckDB allows one writer process per file)."""
    path = tmp_path / "held.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import duckdb, sys, time
        con = duckdb.connect({str(path)!r})
        print("holding", flush=True)
        time.sleep(120)
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "holding"
    yield path
    holder.kill()
    holder.wait()


@pytest.mark.app
def test_database_in_use_is_a_callout(app, locked_db, monkeypatch):
    from tmem.store import lease

    # a lock no tmem process names is refused after the grace a tmem holder gets to name itself (5 s; its length
    # is tests/test_store_sharing.py's concern): the callout is this test's, after a grace of 0.5 s
    monkeypatch.setattr(lease, "GRACE_S", 0.5)
    monkeypatch.setenv("TMEM_DB", str(locked_db))
    at = app()
    assert not at.exception, "a traceback reached the page"
    errors = _errors(at)
    assert "The database cannot be opened" in errors and "in use by another process" in errors
    assert "TMEM_DB=other.duckdb" in errors  # what to do


@pytest.mark.app
def test_a_file_that_is_not_duckdb_is_a_callout(app, tmp_path, monkeypatch):
    bad = tmp_path / "notes.duckdb"
    bad.write_text("these are my notes, not a database")
    monkeypatch.setenv("TMEM_DB", str(bad))
    at = app()
    assert not at.exception
    errors = _errors(at)
    assert "cannot be opened" in errors and "not a valid DuckDB database file" in errors and "TMEM_DB" in errors


@pytest.mark.app
def test_replay_miss_is_a_callout(app, monkeypatch):
    from tmem import api

    def replay_only(*args, **kwargs):
        raise ReplayMissError("replay-only mode: no cached reply for answer (model x); nothing was sent. Run once "
                              "with --cache on (TMEM_CACHE=on) to record it.")

    monkeypatch.setattr(api.explorer, "run_and_store", replay_only)  # the Question page runs through it
    at = app(QUESTION, corpus="golden", scope="golden", q="q1")
    next(b for b in at.button if b.key == "run_button").click().run()
    assert not at.exception, "a traceback reached the page"
    errors = _errors(at)
    assert "The pipeline could not run" in errors and "replay-only mode" in errors
    assert "TMEM_CACHE=on" in errors and "offline backend" in errors  # what to do


@pytest.mark.app
def test_server_path_import_off_is_a_callout(app, tmp_path, monkeypatch):
    monkeypatch.delenv("TMEM_IMPORT_DIRS", raising=False)
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": "m1", "text": "hi", "timestamp": "2025-01-01T10:00"}\n')
    at = app("pages/corpus.py", corpus="golden")
    at.text_input[0].set_value("x")
    next(t for t in at.text_input if t.label.startswith("…or a file")).set_value(str(path))
    next(b for b in at.button if b.label == "Import").click().run()
    assert not at.exception
    errors = _errors(at)
    assert "Import failed" in errors and "importing a path on the server is off" in errors
    assert "x" not in at.selectbox(key="corpus").options


def test_advice_covers_every_known_failure():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from pages._callouts import FAILURE_ADVICE
    from tmem.models.llm.concurrency import CircuitOpen
    from tmem.models.llm.openai_backend import CallFailed
    from tmem.store import StoreInUse
    from tmem.types import CorpusError

    kinds = [k for entry, _ in FAILURE_ADVICE for k in (entry if isinstance(entry, tuple) else (entry,))]
    for known in (StoreInUse, ReplayMissError, CallFailed, CircuitOpen, CorpusError):
        assert known in kinds
