"""The demo's shipped sweep (tmem.demo.sweep, data/demo-sweep.jsonl): a fresh database gets it with the demo, the
Sweep page shows it as a heat-map with n per cell and the demo's source line on a first start, a broken file never
breaks a first start, and the file is what the code measures now (re-measured: slow, MiniLM)."""
from __future__ import annotations

import json

import pytest
from conftest import start_app

from tmem import api
from tmem.demo import DEMO_CORPUS, DEMO_JSONL, ensure_demo
from tmem.demo import sweep as spec
from tmem.evaluation.sweep import default_name, grid_cells, parse_grid
from tmem.models import embedders

pytestmark = pytest.mark.skipif(not DEMO_JSONL.exists(), reason="no demo corpus in data/")


def shipped() -> list[dict]:
    return spec.load_demo_sweep()


def test_the_shipped_sweep_is_the_grid_it_names():
    rows = shipped()
    cells = grid_cells(spec.VARIANT, parse_grid(spec.GRID))
    assert spec.NAME == default_name(spec.VARIANT, parse_grid(spec.GRID))  # the command's own name: a rerun resumes
    assert {r["cell"] for r in rows} == {c.key for c in cells} and len(cells) == 9
    assert sorted({r["question_id"] for r in rows}) == [f"knowledge_update_{i}" for i in range(1, 9)]
    assert len(rows) == 9 * 8 and {r["measure"] for r in rows} == {"recall"} and not any(r["error"] for r in rows)
    assert all(r["backend"].startswith("offline:") for r in rows)  # offline roles measured it
    assert spec.DEMO_SWEEP.stat().st_size < 100_000


def test_a_fresh_database_gets_the_sweep_with_the_demo(tmp_path):
    store = api.open_store(tmp_path / "first.duckdb")
    assert store.sweep_names(DEMO_CORPUS) == [spec.NAME]
    rows = store.sweep_results(DEMO_CORPUS, spec.NAME)
    assert len(rows) == 72 and rows["created_at"].notna().all()
    # the paper's default cell (k 36, eps 12 h): 15 of the 16 gold units (8 questions x 2), as the file says
    default = rows[rows["cell"] == "discovery.eps_hours=12.0,retrieval.k=36"]
    file_default = [r for r in shipped() if r["cell"] == "discovery.eps_hours=12.0,retrieval.k=36"]
    assert (default["units_recovered"].sum(), default["units"].sum()) == \
        (sum(r["units_recovered"] for r in file_default), 16)
    store.close()


def test_a_broken_sweep_file_is_a_warning_not_a_failed_first_start(tmp_path):
    bad = tmp_path / "demo-sweep.jsonl"
    bad.write_text('{"cell": "x"}\n')
    store = api.open_store(tmp_path / "d.duckdb", demo=False)
    with pytest.warns(UserWarning, match=r"demo-sweep.jsonl:1: field 'scope' missing"):
        assert ensure_demo(store, vectors=None, sweep=bad)
    assert store.has_corpus(DEMO_CORPUS) and store.sweep_names(DEMO_CORPUS) == []
    store.close()


@pytest.mark.app
def test_the_sweep_page_shows_a_heat_map_on_first_start(tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_DB", str(tmp_path / "first.duckdb"))
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    at = start_app("pages/sweep.py")
    assert not at.exception
    (chart,) = at.get("plotly_chart")
    heat = next(d for d in json.loads(chart.proto.spec)["data"] if d["type"] == "heatmap")
    assert heat["x"] == ["18", "36", "72"] and heat["y"] == ["6.0", "12.0", "24.0"]
    # n per cell: the 16 gold units of the 8 questions; the paper's default cell starred
    assert all("n=16" in t for r in heat["text"] for t in r)
    assert "★" in heat["text"][1][1]
    assert any(i.value.startswith("Generated demo corpus, n = 8 questions") and "BM25" in i.value
               for i in at.info)


@pytest.mark.slow
@pytest.mark.skipif(embedders.minilm_files() is None, reason="the shipped sweep was measured with MiniLM")
def test_the_shipped_sweep_is_what_the_code_measures_now():
    """Re-measured as `python -m tmem demo --sweep` does (about 20 s of CPU): every figure equal, timings aside.
    When this fails, the pipeline changed what the demo's cells recover: regenerate with that command."""
    from tmem.commands.corpus.demo import measure_sweep

    rows, label = measure_sweep()
    measured = {(r["cell"], r["question_id"]): r for r in json.loads(json.dumps(
        [{k: spec._plain(v) for k, v in r.items() if k not in (*spec.TIMES, "seconds")} for r in rows]))}
    expected = {(r["cell"], r["question_id"]): {k: v for k, v in r.items() if k != "seconds"} for r in shipped()}
    assert measured == expected, f"data/demo-sweep.jsonl is stale: regenerate it with {spec.REGENERATE}"
