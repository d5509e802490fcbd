"""All DuckDB access: one `Store` over the table families, the corpus and its gold (tmem.store.corpus), traces and
batch results (tmem.store.traces), caches (tmem.store.caches), sweeps (tmem.store.sweeps) and reviews
(tmem.store.annotations), on one file held only while queries run (tmem.store.database, tmem.store.lease).

Gold answers, evidence and reply links live in their own evaluation tables (`gold_*`): the retrieval and answer code
paths read `messages` and `questions` only (see `tests/test_leakage.py`).
"""
from __future__ import annotations

from pathlib import Path

from tmem.store.annotations import REVIEW_SCHEMA, ReviewTables
from tmem.store.caches import CACHE_SCHEMA, CacheTables
from tmem.store.corpus import CORPUS_SCHEMA, MESSAGE_COLUMNS, CorpusTables
from tmem.store.database import DEFAULT_DB, PROJECT_ROOT, Database, StoreInUse, default_db_path
from tmem.store.memories import MEMORY_SCHEMA, MemoryTables
from tmem.store.sweeps import SWEEP_SCHEMA, SweepTables
from tmem.store.traces import TRACE_SCHEMA, TraceTables
from tmem.types import CorpusData, CorpusError

__all__ = ["DEFAULT_DB", "MESSAGE_COLUMNS", "PROJECT_ROOT", "SCHEMA", "CorpusData", "CorpusError", "Store",
           "StoreInUse", "default_db_path", "open_store"]

SCHEMA = CORPUS_SCHEMA + TRACE_SCHEMA + CACHE_SCHEMA + SWEEP_SCHEMA + REVIEW_SCHEMA + MEMORY_SCHEMA


class Store(CorpusTables, TraceTables, CacheTables, SweepTables, ReviewTables, MemoryTables, Database):
    """The database: every table family's methods on one DuckDB file (tmem.store.database)."""

    SCHEMA = SCHEMA


def open_store(path: str | Path | None = None) -> Store:
    """Open (and create) the database. `tmem.api.open_store` also loads the shipped demo corpus on first use."""
    return Store(path)
