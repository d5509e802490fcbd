"""`python -m tmem bench` prints its figures (a tiny corpus here: the real 120,000-message run is a benchmark,
not a test), and the persisted BM25 index loads back identical."""
import json

import numpy as np

from tmem.cli import main as cli


def test_bench_prints_every_figure(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    assert cli(["bench", "--messages", "1200", "--domains", "2", "--questions", "8", "--dir", str(tmp_path),
                "--offline", "--json"]) == 0
    text, blob = capsys.readouterr().out.strip().rsplit("\n", 1)
    report = json.loads(blob)
    for label in ("import (JSONL -> new DuckDB)", "re-import", "BM25 index build", "BM25 index load", "seed_retrieval",
                  "whole question (all stages)", "seed_retrieval with plain rank_bm25", "peak RSS"):
        assert label in text
    assert report["corpus"]["messages"] == 1200 and report["corpus"]["scopes"] == 2
    assert report["questions_timed"] == 8 and report["stages"]["discovery"]["n"] == 8
    assert report["peak_rss_mb"] > 0 and report["rank_bm25"]["seed_retrieval"]["n"] == 8
    assert list((tmp_path / "index").glob("*.npz")) and (tmp_path / "bench.duckdb").exists()


def test_index_save_and_load_round_trip(tmp_path, golden_scope):
    from golden import QUESTION

    from tmem.config import RetrievalConfig
    from tmem.evaluation.bench import index_path, load_index, save_index
    from tmem.retrieval import query_tokens

    rc = RetrievalConfig()
    index = golden_scope.bm25(rc.metadata_fields)
    path = index_path("golden", "golden/scope", rc.metadata_fields, tmp_path)
    save_index(index, path)
    loaded = load_index(path)
    assert loaded.vocabulary == index.vocabulary and loaded.n_documents == index.n_documents
    q = query_tokens(QUESTION, rc)
    assert np.array_equal(loaded.scores(q), index.scores(q)) and loaded.top_k(q, 5) == index.top_k(q, 5)
    assert "/" not in path.name
