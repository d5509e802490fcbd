"""Shared fixtures. Every test runs against temporary databases: TMEM_DB points into a temp folder, so the
project's data/tmem.duckdb is never touched."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/golden.py and other helpers import as plain modules

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
BENCHMARKS = SHARED / "benchmarks"


@pytest.fixture(autouse=True, scope="session")
def _isolated_default_db(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("TMEM_DB", str(tmp_path_factory.mktemp("db") / "session.duckdb"))
    yield
    mp.undo()


@pytest.fixture
def fresh_store(tmp_path):
    from tmem.store import Store

    store = Store(tmp_path / "t.duckdb")
    yield store
    store.close()


@pytest.fixture
def golden_scope():
    from golden import MESSAGES

    from tmem.scope import Scope

    return Scope("golden-corpus", "golden", MESSAGES)


@pytest.fixture(scope="session")
def offline():
    from tmem.models.offline import offline_roles

    return offline_roles()
