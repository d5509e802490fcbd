"""The lease under contention: the app's Store querying as the shell does (store.corpora() and friends), two batch
runs and an import loop on one database end with 0 errors and 0 uncaught exceptions; each CLI command waits for the
file (bounded, with a message on stderr) instead of failing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tmem.store import Store

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parent.parent


def tmem(*argv: str) -> subprocess.Popen:
    env = os.environ | {"PYTHONPATH": str(ROOT), "TMEM_DB_WAIT": "50"}
    return subprocess.Popen([sys.executable, "-m", "tmem", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_app_two_runs_and_an_import_loop_share_the_database(tmp_path):
    db = tmp_path / "shared.duckdb"
    store = Store(db)  # the app's Store
    from tmem.corpora.imports import import_corpus

    import_corpus(store, "locomo", FIXTURES / "locomo" / "mini.json", "mini")
    small = tmp_path / "loop.jsonl"
    small.write_text("".join(json.dumps({"id": f"m{i}", "text": f"message {i}", "timestamp": f"2025-01-01T10:{i:02d}"})
                             + "\n" for i in range(20)))
    errors: list[str] = []
    stop = threading.Event()

    def app() -> None:  # the shell's queries, as fast as a busy app makes them
        while not stop.is_set():
            try:
                assert "mini" in store.corpora()
                store.counts("mini")
            except Exception as exc:  # noqa: BLE001 - counted: the test fails on any
                errors.append(f"app: {type(exc).__name__}: {exc}")
            time.sleep(0.05)

    reader = threading.Thread(target=app, daemon=True)
    reader.start()
    started = time.monotonic()
    runs = [tmem("run", "--db", str(db), "--corpus", "mini", "--variants", "flat", "--limit", "2", "--quiet",
                 "--out", str(tmp_path / f"run{i}")) for i in range(2)]
    imports = 0
    while any(r.poll() is None for r in runs) or imports < 3:
        importer = tmem("import", "jsonl", str(small), "--db", str(db), "--corpus", f"loop{imports % 2}")
        out, err = importer.communicate(timeout=120)
        if importer.returncode != 0:
            errors.append(f"import {imports}: exit {importer.returncode}: {err.strip()[-300:]}")
        imports += 1
        if time.monotonic() - started > 100:
            break
    for i, run in enumerate(runs):
        out, err = run.communicate(timeout=120)
        if run.returncode != 0 or "Traceback" in err:
            errors.append(f"run {i}: exit {run.returncode}: {err.strip()[-300:]}")
    stop.set()
    reader.join(timeout=30)
    store.close()
    assert errors == [], "\n".join(errors)
    assert imports >= 3


@pytest.mark.app
def test_the_app_shows_a_busy_database_as_a_callout(app, monkeypatch):
    """A query that still finds the file held after the lease's wait (pages/_shell.py shell -> store.corpora())
    ends in a callout saying what to do, never an uncaught StoreInUse."""
    from tmem.store import StoreInUse

    def held(self):
        raise StoreInUse(f"database {self.path} is in use by another process (python (PID 4242))")

    monkeypatch.setattr(Store, "corpora", held)
    at = app()
    assert not at.exception, [e.value for e in at.exception]
    assert any("The database is busy" in e.value and "PID 4242" in e.value for e in at.error)


@pytest.mark.integration
def test_a_waiting_command_says_so_once(tmp_path, capfd):
    """The lease announces a wait longer than WAIT_NOTICE_S on stderr, then gets the file when it is let go."""
    from tmem.store import lease

    db = tmp_path / "w.duckdb"
    script = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); from tmem.store import Store; "
              f"s = Store({str(db)!r}); c = s.cursor().execute('SELECT 1'); print('held', flush=True); "
              "time.sleep(2.5); del c; s.close()")  # a query in flight for 2.5 s: the holder cannot let go sooner
    other = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert other.stdout.readline().strip() == "held"
    started = time.monotonic()
    store = Store(db)  # waits for the other process, which holds the file ~2.5 s
    waited = time.monotonic() - started
    store.close()
    other.wait(timeout=30)
    err = capfd.readouterr().err
    assert waited > lease.WAIT_NOTICE_S
    assert err.count("waiting for the database (held by another tmem process") == 1
