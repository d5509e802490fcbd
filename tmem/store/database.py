"""The DuckDB file behind the Store: where it is, opening it (a bad or held file fails at once with one clear
line), a cursor per query through the lease (tmem.store.lease: the file is held only while queries run), and the
write lock. The table families (tmem.store.corpus, traces, caches, sweeps, annotations) build on it.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pandas as pd

from tmem.store.lease import Lease

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DB = PROJECT_ROOT / "data" / "tmem.duckdb"


def default_db_path() -> Path:
    return Path(os.environ.get("TMEM_DB", DEFAULT_DB))


class StoreInUse(ValueError):
    """The database file is locked by another process (DuckDB allows one writer process per file)."""


class Database:
    """A DuckDB file held only while queries run; a cursor per query (one per thread); writes locked. `SCHEMA` is
    created on open unless the file is opened read-only."""

    SCHEMA = ""

    def __init__(self, path: str | Path | None = None, read_only: bool = False):
        self.path = Path(path) if path is not None else default_db_path()
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._read_only = read_only
        self._lease = Lease(self._connect, None if str(self.path) == ":memory:" else self.path, StoreInUse)
        self._write_lock = threading.Lock()
        self.cursor().execute("SELECT 1" if read_only else self.SCHEMA)  # a bad or held file fails here, at once

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

    @contextmanager
    def _transaction(self):
        """A cursor in one write transaction under the write lock: committed when the block ends, rolled back on
        any exception (then re-raised)."""
        with self._write_lock:
            cur = self.cursor()
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    def close(self) -> None:
        self._lease.close()

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
