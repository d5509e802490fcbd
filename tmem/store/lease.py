"""Hold a database file only while it is used, so that the app and `python -m tmem run` share one DuckDB file.

DuckDB lets one process at a time open a file for writing (docs: "Concurrency"). A `Lease` opens the connection on
the first query, keeps it while queries follow each other, and closes it after `idle_s` without one; another tmem
process that finds the file locked waits for it instead of failing. Two marker files beside the database make the
waiting cooperative and bounded:

- `<db>.holder` names the PID of the last tmem process that opened the file. A process that finds the file locked
  by that PID waits (up to `wait_s`, $TMEM_DB_WAIT, default 60 s); a file locked by anything else (a DuckDB shell,
  an old app) fails after GRACE_S with the caller's `in_use` error, as before.
- `<db>.waiting` is touched by a waiting process on every poll. The holder sees it (at its next query, or from its
  watcher thread when idle) and closes its connection as soon as no query is in flight (after at least
  `min_hold_s`), then lets `yield_s` pass before it opens the file again, so the waiter gets in even when the
  holder queries without pause (a batch run).

A query is "in flight" while its cursor object lives: `cursor()` returns a thin proxy whose `execute` returns
itself, so `lease.cursor().execute(sql).fetchall()` holds the connection until the rows are fetched, and a
transaction holds it until its cursor is dropped. The lease never imports DuckDB: `connect` is store.py's.
"""
from __future__ import annotations

import atexit
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

POLL_S = 0.03  # how often a waiter retries and the holder's watcher looks for waiters
FRESH_S = 0.5  # a `.waiting` marker older than this is a waiter that gave up (or finished)
GRACE_S = 5.0  # how long a lock whose holder is not (yet) named in `.holder` is waited for: a tmem process names
# itself just after it got the lock, but on a loaded machine (load 15 on 2 cores) that took over 1 s, and the app then
# reported "in use" while its own batch child wrote (tests/test_app_batch.py); a foreign lock is reported after 5 s
WAIT_NOTICE_S = 1.0  # a wait longer than this is announced once (`notice`: the CLI prints it on stderr)


def _pid(error: Exception) -> int | None:
    found = re.search(r"PID (\d+)", str(error))
    return int(found.group(1)) if found else None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError:  # a read-only folder: sharing degrades to "fail at once", nothing else breaks
        pass


_LEASES: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Close every open connection from the main thread before the interpreter stops its threads: a watcher thread
    frozen inside DuckDB's close() during finalization aborts the process ("exception not rethrown")."""
    for lease in list(_LEASES):
        lease.close()


class _Cursor:
    """A cursor that counts as a query in flight until it is dropped; everything else is the DuckDB cursor's."""

    __slots__ = ("_cur", "_done")

    def __init__(self, cur, done: Callable[[], None]):
        self._cur, self._done = cur, done

    def execute(self, *args, **kwargs) -> _Cursor:
        self._cur.execute(*args, **kwargs)
        return self

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._cur, name)
        if not callable(attr):
            return attr

        # In `lease.cursor().execute(sql).fetchone()` the proxy is a temporary: once `.fetchone` is looked up, only
        # the bound method would be left, the proxy dropped and the query counted as done BEFORE the fetch runs, so
        # the watcher could close the connection in between ("No open result set"). The method keeps the proxy.
        def call(*args, _in_flight: _Cursor = self, **kwargs):
            return attr(*args, **kwargs)
        return call

    def __del__(self) -> None:
        self._done()


class Lease:
    """A connection opened on demand and closed when idle or when another tmem process waits for the file."""

    def __init__(self, connect: Callable[[], Any], path: Path | None, in_use: type[Exception], *,
                 idle_s: float = 1.0, wait_s: float | None = None, min_hold_s: float = 0.2, yield_s: float = 0.15,
                 notice: Callable[[str], None] | None = None):
        self.connect, self.in_use = connect, in_use
        # a long wait is said once, on stderr by default (a CLI command shows it; the app logs it)
        self.notice = notice or (lambda text: print(f"{path}: {text}", file=sys.stderr, flush=True))
        self.idle_s, self.min_hold_s, self.yield_s = idle_s, min_hold_s, yield_s
        self.wait_s = float(os.environ.get("TMEM_DB_WAIT", 60)) if wait_s is None else wait_s
        # an in-memory database lives only in its connection: it is never closed while the Store lives
        self.holder = Path(f"{path}.holder") if path is not None else None
        self.waiter = Path(f"{path}.waiting") if path is not None else None
        self._lock = threading.RLock()  # re-entrant: a cursor may be dropped (and counted) inside a locked call
        self._con = None
        self._users = 0
        self._since = self._last = self._yielded = self._checked = 0.0
        self.opened = 0  # connections opened so far (tests and the docs' figures)
        _LEASES.add(self)

    @property
    def held(self) -> bool:
        return self._con is not None

    def cursor(self) -> _Cursor:
        with self._lock:
            if self._con is not None and not self._users and self._should_yield():
                self._con.close()  # a query boundary of a busy process: let the waiting one in now
                self._con, self._yielded = None, time.monotonic()
            if self._con is None:
                pause = self._yielded + self.yield_s - time.monotonic()
                if pause > 0:  # we just gave the file to a waiter: let it take the lock first
                    time.sleep(pause)
                self._con = self._acquire()
                self._since = time.monotonic()
                self.opened += 1
                if self.holder is not None:
                    threading.Thread(target=self._watch, name="tmem-db-lease", daemon=True).start()
            self._users += 1
            self._last = time.monotonic()
            cur = self._con.cursor()
        return _Cursor(cur, self._done)

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    def _done(self) -> None:
        with self._lock:
            self._users -= 1
            self._last = time.monotonic()

    def _acquire(self):
        start = time.monotonic()
        unnamed: tuple[int | None, float] | None = None  # (PID, since when) of a lock `.holder` does not name
        told = False
        while True:
            try:
                con = self.connect()
            except self.in_use as exc:
                now, pid = time.monotonic(), _pid(exc)
                tmem_holder = self.holder is not None and str(pid) == _read(self.holder)
                # A tmem process writes its PID just after it got the lock: give each new holder GRACE_S to do so.
                # The grace counts from when that holder was first seen, not from the start of the wait: with
                # three processes the lock passes between the others while this one waits (a batch run and an
                # import against the open app), and the wait must not end at the first hand-over it sees.
                if tmem_holder:
                    unnamed = None
                elif unnamed is None or unnamed[0] != pid:
                    unnamed = (pid, now)
                if now - start > self.wait_s or (unnamed is not None and now - unnamed[1] > GRACE_S):
                    raise
                if not told and now - start > WAIT_NOTICE_S:
                    told = True
                    self.notice(f"waiting for the database (held by another tmem process, PID {pid}; up to "
                                f"{self.wait_s:.0f} s, TMEM_DB_WAIT)")
                _write(self.waiter, str(os.getpid()))  # ask the holder to let go
                time.sleep(POLL_S)
                continue
            if self.holder is not None:
                _write(self.holder, str(os.getpid()))
            return con

    def _should_yield(self) -> bool:
        """Held for min_hold_s and another process waits (the marker is looked at once per POLL_S at most)."""
        now = time.monotonic()
        if self.holder is None or now - self._since < self.min_hold_s or now - self._checked < POLL_S:
            return False
        self._checked = now
        return self._someone_waits()

    def _someone_waits(self) -> bool:
        try:
            fresh = time.time() - self.waiter.stat().st_mtime < FRESH_S
        except OSError:
            return False
        return fresh and _read(self.waiter) != str(os.getpid())

    def _watch(self) -> None:
        """While the connection is open: close it after `idle_s` without a query, or as soon as it is free when
        another process waits (after `min_hold_s`, so that two busy processes do not trade it on every query)."""
        while True:
            time.sleep(POLL_S)
            with self._lock:
                if self._con is None:
                    return
                if self._users:
                    continue
                now = time.monotonic()
                waiting = now - self._since >= self.min_hold_s and self._someone_waits()
                if waiting or now - self._last >= self.idle_s:
                    self._con.close()
                    self._con = None
                    self._yielded = now if waiting else 0.0
                    return
