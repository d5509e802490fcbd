"""A small generated corpus in a fresh DuckDB file (the demo generator, seed 7: 600 messages, 22 questions), for the
batch-run tests."""
from pathlib import Path


def mini_db(folder: Path) -> Path:
    from tmem.demo import generate
    from tmem.store import Store

    db = folder / "mini.duckdb"
    store = Store(db)
    store.replace_corpus("mini", generate(7, 600, 1), format="demo")
    store.close()
    return db
