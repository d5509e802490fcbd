"""The app and `python -m tmem run` share one DuckDB file (tmem.store.lease): a Store holds the file
only while queries run, releases it when idle, and a tmem process that finds it held by another tmem process waits for
it (the holder lets go between queries) instead of failing; a file held by anything else still fails at once."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from tmem.store import Store, StoreInUse, lease
from tmem.types import CorpusData, Message, Question

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _corpus() -> CorpusData:
    from datetime import datetime, timedelta

    t0 = datetime(2024, 1, 1)
    return CorpusData([Message(f"m{i}", "s", f"text {i}", t0 + timedelta(minutes=i)) for i in range(5)],
                      [Question("q1", "s", "what?", None, None)])


def _busy_holder(db, seconds: float) -> subprocess.Popen:
    """Another tmem process that queries the database without pause for `seconds` (a batch run's pattern)."""
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from tmem.store import Store
        store = Store({str(db)!r})
        store.corpora()
        print("holding", flush=True)
        end = time.time() + {seconds}
        n = 0
        while time.time() < end:
            store.counts("c"); n += 1
        print(n, store._lease.opened, flush=True)
    """)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


@pytest.mark.integration
def test_an_idle_store_releases_the_file(tmp_path):
    db = tmp_path / "idle.duckdb"
    store = Store(db)
    store.replace_corpus("c", _corpus(), format="test")
    assert store._lease.held
    deadline = time.time() + 5
    while store._lease.held and time.time() < deadline:
        time.sleep(0.05)
    assert not store._lease.held, "the connection is closed after idle_s without a query"
    # a plain DuckDB client in another process (not tmem: it never waits) can now open it
    out = subprocess.run([sys.executable, "-c", f"import duckdb; c = duckdb.connect({str(db)!r}); "
                          "print(c.execute('select count(*) from messages').fetchone()[0])"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "5", out.stderr
    assert store.counts("c")["messages"] == 5  # and this store opens it again on its next query
    store.close()


@pytest.mark.integration
def test_a_second_process_gets_in_while_another_queries_without_pause(tmp_path):
    db = tmp_path / "busy.duckdb"
    Store(db).close()
    holder = _busy_holder(db, 6)
    try:
        assert holder.stdout.readline().strip() == "holding"
        started = time.time()
        store = Store(db)  # would raise StoreInUse at once without the lease
        store.replace_corpus("c", _corpus(), format="test")  # a write, while the other process keeps querying
        waited = time.time() - started
        assert store.counts("c")["messages"] == 5
        store.close()
        queries, opened = map(int, holder.stdout.readline().split())
    finally:
        holder.kill()
        holder.wait()
    assert waited < 5, f"waited {waited:.1f} s for the other process to let go"
    assert queries > 10 and opened >= 2, "the busy process let go (reopened the file) and went on querying"


@pytest.mark.integration
def test_a_file_held_by_something_else_fails_at_once(tmp_path):
    db = tmp_path / "foreign.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(db)!r}); "
                               "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        started = time.time()
        with pytest.raises(StoreInUse, match="in use by another process"):
            Store(db)
        # a non-tmem holder never lets go: refused after the grace a tmem holder gets to name itself, not after
        # the whole wait for a tmem holder (TMEM_DB_WAIT, 60 s and more)
        assert time.time() - started < lease.GRACE_S + 10 < float(os.environ.get("TMEM_DB_WAIT", 60))
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.integration
def test_a_tmem_holder_that_never_lets_go_times_out(tmp_path, monkeypatch):
    db = tmp_path / "stuck.duckdb"
    Store(db).close()
    # a tmem process in the middle of one long transaction: it cannot let go; the waiter gives up after TMEM_DB_WAIT
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from tmem.store import Store
        store = Store({str(db)!r})
        cur = store.cursor()
        cur.execute("BEGIN TRANSACTION")
        print("holding", flush=True)
        time.sleep(60)
    """)
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    monkeypatch.setenv("TMEM_DB_WAIT", "1.5")
    try:
        assert holder.stdout.readline().strip() == "holding"
        started = time.time()
        with pytest.raises(StoreInUse):
            Store(db)
        assert 1.4 < time.time() - started < 6
    finally:
        holder.kill()
        holder.wait()


def test_an_in_memory_store_keeps_its_data_when_idle():
    store = Store(":memory:")
    store.replace_corpus("c", _corpus(), format="test")
    time.sleep(1.3)
    assert store.counts("c")["messages"] == 5


def test_a_chained_fetch_keeps_its_query_in_flight_until_it_has_run(tmp_path):
    """`store._lease.cursor().execute(sql).fetchone()`: the proxy cursor is a temporary, so looking up `.fetchone`
    must not end the query before the fetch ran (else the idle watcher may close the connection in between: "No open
    result set", seen under load while a batch wrote the same file)."""
    store = Store(tmp_path / "chain.duckdb")
    lease = store._lease
    fetch = lease.cursor().execute("select 42").fetchone
    assert lease._users == 1, "the looked-up fetch still counts as a query in flight: the watcher leaves it open"
    assert fetch() == (42,)
    del fetch
    assert lease._users == 0
    rows = lease.cursor().execute("select 7").fetchall()
    assert rows == [(7,)]
    assert lease._users == 0, "and a fetch that has run ends the query"
    store.close()
