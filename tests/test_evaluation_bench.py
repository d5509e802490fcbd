"""`python -m tmem bench` prints its figures (a tiny corpus here: the real 120,000-message run is a benchmark,
not a test), and the BM25 index persisted in DuckDB loads back identical."""
import json

import numpy as np
import pytest

from tmem.cli import main as cli


@pytest.mark.integration  # the bench writes its corpus with `tmem demo` in a child process
def test_bench_prints_every_figure(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    assert cli(["bench", "--messages", "1200", "--domains", "2", "--questions", "8", "--dir", str(tmp_path),
                "--offline", "--json"]) == 0
    text, blob = capsys.readouterr().out.strip().rsplit("\n", 1)
    report = json.loads(blob)
    for label in ("import (JSONL -> new DuckDB)", "re-import", "BM25 index build", "BM25 index load", "seed_retrieval",
                  "whole question (all stages)", "first question of a scope", "seed_retrieval with plain rank_bm25",
                  "peak RSS"):
        assert label in text
    assert report["corpus"]["messages"] == 1200 and report["corpus"]["scopes"] == 2
    assert report["questions_timed"] == 8 and report["stages"]["discovery"]["n"] == 8
    assert report["peak_rss_mb"] > 0 and report["rank_bm25"]["seed_retrieval"]["n"] == 8
    assert report["stages"]["first question of a scope"]["n"] == 2
    assert 0 < report["vectors_embedded_on_demand"] < 1200  # window messages only, not the whole corpus
    from tmem.store import Store

    store = Store(tmp_path / "bench.duckdb", read_only=True)
    rows = store.cursor().execute("SELECT count(*) FROM bm25_indexes WHERE corpus = 'bench-1k'").fetchone()[0]
    store.close()
    assert rows == 2  # one persisted index per scope


def test_index_save_and_load_round_trip(fresh_store, golden_scope):
    from tmem.config import RetrievalConfig
    from tmem.demo.golden import MESSAGES, QUESTION
    from tmem.pipeline.retrieval import query_tokens
    from tmem.pipeline.scope import Scope

    rc = RetrievalConfig()
    golden_scope.index_store = fresh_store
    index = golden_scope.bm25(rc.metadata_fields)
    again = Scope(golden_scope.corpus, golden_scope.name, MESSAGES)
    again.index_store = fresh_store
    loaded = again.bm25(rc.metadata_fields)
    assert list(again.index_source.values()) == ["loaded"]
    assert loaded.vocabulary == index.vocabulary and loaded.n_documents == index.n_documents
    q = query_tokens(QUESTION, rc)
    assert np.array_equal(loaded.scores(q), index.scores(q)) and loaded.top_k(q, 5) == index.top_k(q, 5)
