"""`python -m tmem sweep`: the grid, every cell measured on the same questions with the stages of
`recall`, rows in DuckDB, resume, the accuracy measure's stored traces, and the executor errors a user can hit."""
from __future__ import annotations

import builtins
import json

import pytest

from tmem.cli import main as cli


@pytest.fixture
def mini(tmp_path, monkeypatch):
    from tmem.demo import generate
    from tmem.store import Store

    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    db = tmp_path / "mini.duckdb"
    store = Store(db)
    store.replace_corpus("mini", generate(7, 300, 1), format="demo")
    store.close()
    return db


def sweep(db, *extra):
    return cli(["sweep", "--db", str(db), "--corpus", "mini", "--offline", "--quiet", *extra])


# ------------------------------------------------------------------------------------------------ grid
def test_the_grid_is_typed_deduplicated_and_ordered():
    from tmem.evaluation.sweep import grid_cells, parse_grid

    axes = parse_grid(["discovery.eps_hours=6,12,6", "retrieval.k=12,36", "retrieval.metadata_fields=topic|author,"])
    assert axes == {"discovery.eps_hours": (6.0, 12.0), "retrieval.k": (12, 36),
                    "retrieval.metadata_fields": (("topic", "author"),)}
    cells = grid_cells("full", axes, {"discovery.mu": 0.5})
    assert [dict(c.params)["retrieval.k"] for c in cells] == [12, 36, 12, 36]  # the first axis varies slowest
    assert cells[0].config.discovery.eps_hours == 6.0 and cells[0].config.discovery.mu == 0.5
    assert cells[1].key == "discovery.eps_hours=6.0,retrieval.k=36,retrieval.metadata_fields=topic|author"
    assert "discovery.mu=0.5" in cells[1].overrides and "discovery.mu" not in cells[1].key
    assert json.loads(cells[1].params_json)["retrieval.metadata_fields"] == ["topic", "author"]


@pytest.mark.parametrize("grid,message", [
    (["retrieval.kk=1,2"], "bad --grid"),
    (["retrieval.k"], "bad --grid"),
    (["retrieval.k=a,b"], "expected int"),
    (["retrieval.k=1", "retrieval.k=2"], "twice"),
    (["retrieval.k=,"], "no values"),
    (["compression.mode=compress,zip"], "compression.mode must be one of"),
    ([], "at least one --grid"),
])
def test_a_bad_grid_is_one_clear_error(mini, capsys, grid, message):
    args = [a for g in grid for a in ("--grid", g)]
    assert sweep(mini, *args) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_grid_too_large_or_clashing_with_set_is_refused(mini, capsys):
    assert sweep(mini, "--grid", "retrieval.k=" + ",".join(map(str, range(1, 30))),
                 "--grid", "discovery.top_n=" + ",".join(map(str, range(1, 30)))) == 1
    assert "841 cells" in capsys.readouterr().err
    assert sweep(mini, "--grid", "retrieval.k=12,36", "--set", "retrieval.k=5") == 1
    assert "both fixed" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------- sweep
def test_a_recall_sweep_matches_recall_and_resumes(mini, capsys):
    """Each cell is the `tmem` variant of `python -m tmem recall` at that configuration: the default cell's figures
    equal recall's at k = 36 (and its seeds equal recall's bm25), computed independently; a rerun measures
    nothing, and an extended grid measures only the new cells."""
    from tmem.evaluation.recall import evidence_recall
    from tmem.store import Store

    grid = ["--grid", "retrieval.k=12,36", "--grid", "discovery.eps_hours=6,12"]
    assert sweep(mini, *grid, "--json") == 0
    cells = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [(c["retrieval.k"], c["discovery.eps_hours"]) for c in cells] == [(12, 6.0), (12, 12.0), (36, 6.0),
                                                                            (36, 12.0)]
    store = Store(mini)
    reference = evidence_recall(store, "mini", [12, 36], ["bm25", "tmem"])
    for cell in cells:
        if cell["discovery.eps_hours"] == 12.0:  # the paper's eps: recall's own configuration at that k
            ref = reference[cell["retrieval.k"]]
            assert cell["recall"] == pytest.approx(ref["tmem"].recall)
            assert cell["seed_recall"] == pytest.approx(ref["bm25"].recall)
            assert cell["mean_messages"] == pytest.approx(ref["tmem"].mean_messages)
            assert cell["questions"] == ref["tmem"].questions and cell["units"] == ref["tmem"].units
        assert cell["errors"] == 0 and cell["measure"] == "recall" and cell["judged"] == 0
    assert cells[0]["recall"] < cells[2]["recall"]  # more seeds, more evidence: the grid is not a constant
    rows = store.sweep_results("mini")
    assert len(rows) == 4 * cells[0]["questions"] and set(rows["sweep"]) == {"full: retrieval.k x discovery.eps_hours"}
    stamp = rows["created_at"].max()
    store.close()

    assert cli(["sweep", "--db", str(mini), "--corpus", "mini", "--offline", *grid]) == 0
    captured = capsys.readouterr()
    assert "measured 0 (cell, question) pairs" in captured.err and "★" in captured.out  # the paper's default cell
    assert sweep(mini, "--grid", "retrieval.k=12,36,72", "--grid", "discovery.eps_hours=6,12") == 0
    rows = Store(mini).sweep_results("mini")
    assert len(rows) == 6 * cells[0]["questions"]
    assert (rows[rows["created_at"] > stamp]["cell"].str.contains("retrieval.k=72")).all()


def test_other_roles_or_measure_are_measured_again_not_reused(mini, capsys):
    from tmem.store import Store

    assert sweep(mini, "--grid", "retrieval.k=12", "--limit", "3") == 0
    rows = Store(mini).sweep_results("mini")
    assert len(rows) == 3 and set(rows["measure"]) == {"recall"}
    assert sweep(mini, "--grid", "retrieval.k=12", "--limit", "3", "--measure", "accuracy") == 0
    rows = Store(mini).sweep_results("mini")
    assert len(rows) == 3 and set(rows["measure"]) == {"accuracy"}  # the same cell and questions, replaced


def test_an_accuracy_sweep_stores_traces_the_app_finds_by_variant_and_cfg(mini, capsys):
    """A cell's question opens on the Question page with `variant=` and `cfg=`: the page looks its trace up by
    the configuration those give and the app's roles, which must find the trace the sweep stored."""
    from tmem import api
    from tmem.store import Store

    assert sweep(mini, "--grid", "discovery.pad_hours=6,12", "--limit", "3", "--measure", "accuracy") == 0
    store = Store(mini)
    rows = store.sweep_results("mini")
    assert len(rows) == 6 and rows["correct"].notna().all() and set(rows["measure"]) == {"accuracy"}
    roles = api.build_roles({"roles.answer.backend": "offline"}, store)
    for row in rows.to_dict("records"):
        question, _ = api.stored_question(store, "mini", row["question_id"], row["scope"])
        config = api.resolve_config(row["variant"], api.url_overrides(row["overrides"]))
        trace = api.find_trace(store, "mini", question, row["variant"], config, roles)
        assert trace is not None and trace.config_hash == row["config_hash"]
        assert trace.config["discovery"]["pad_hours"] == json.loads(row["params"])["discovery.pad_hours"]
        assert bool(trace.verdict(trace.answers[0].presentation).correct) == bool(row["correct"])
    assert "plumbing figure" in capsys.readouterr().out


def test_a_reimport_drops_the_corpus_sweeps(mini):
    from tmem.demo import generate
    from tmem.store import Store

    assert sweep(mini, "--grid", "retrieval.k=12", "--limit", "2") == 0
    store = Store(mini)
    assert len(store.sweep_results("mini")) == 2 and store.sweep_names("mini") == ["full: retrieval.k"]
    store.replace_corpus("mini", generate(7, 300, 1), format="demo")
    assert len(store.sweep_results("mini")) == 0


def test_a_failing_task_is_recorded_and_retried(mini, capsys, monkeypatch):
    from tmem.evaluation import sweep as sweep_module
    from tmem.store import Store

    real = sweep_module.run_discovery
    monkeypatch.setattr(sweep_module, "run_discovery", lambda *a: (_ for _ in ()).throw(RuntimeError("boom")))
    assert sweep(mini, "--grid", "retrieval.k=12", "--limit", "2") == 1
    rows = Store(mini).sweep_results("mini")
    assert list(rows["error"]) == ["RuntimeError: boom"] * 2
    monkeypatch.setattr(sweep_module, "run_discovery", real)
    assert sweep(mini, "--grid", "retrieval.k=12", "--limit", "2") == 0
    assert Store(mini).sweep_results("mini")["error"].isna().all()


# ------------------------------------------------------------------------------------------- executors
@pytest.mark.integration
def test_without_ray_the_ray_executor_says_how_to_install_it(mini, capsys, monkeypatch):
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    for command in (["sweep", "--grid", "retrieval.k=12"], ["run", "--limit", "1"]):
        assert cli([*command, "--db", str(mini), "--corpus", "mini", "--offline", "--quiet",
                    "--executor", "ray"]) == 1
        err = capsys.readouterr().err
        assert "requirements-scale.txt" in err and "Traceback" not in err


def test_address_needs_the_ray_executor(mini, capsys):
    assert sweep(mini, "--grid", "retrieval.k=12", "--address", "auto") == 1
    assert "needs --executor ray" in capsys.readouterr().err


@pytest.mark.parametrize("override,message", [({"cache.mode": "replay"}, "cannot replay"),
                                              ({"roles.answer.backend": "recorded"}, "recorded backend")])
def test_workers_refuse_what_only_this_machine_has(override, message):
    from tmem.evaluation.executors import ExecutorUnavailable, worker_settings
    from tmem.models.settings import BackendSettings

    with pytest.raises(ExecutorUnavailable, match=message):
        worker_settings(BackendSettings.from_sources(env={}, file={}, overrides=override))
    settings = worker_settings(BackendSettings.from_sources(env={}, file={}))
    assert settings.cache_mode == "off" and settings.cache_db == ""  # the cache is in the driver's database


def test_heatmap_cells_show_n_and_mark_differences_inside_noise():
    """Issue 42: a 0.75-0.844 colour scale over 32 units made 1 unit look large: each cell says its n, and a cell
    within 1.96 standard errors of the paper's default is marked."""
    import pandas as pd

    from tmem.viz.batch.sweep import NOISE_MARK, heatmap_figure, within_noise

    rows = []
    for k, found in ((12, 8), (36, 27), (72, 28)):
        for eps, extra in ((12.0, 0), (24.0, 1)):
            rows.append({"cell": f"k{k}e{eps}", "params": {"retrieval.k": k, "discovery.eps_hours": eps},
                         "retrieval.k": k, "discovery.eps_hours": eps, "questions": 20, "units": 32,
                         "recall": (found + extra) / 32})
    summary = pd.DataFrame(rows)
    noise = within_noise(summary, "recall")
    assert noise["k72e12.0"] and noise["k36e24.0"]  # 28 or 28 of 32 against the default's 27: noise
    assert not noise["k12e12.0"]  # 8 of 32: a real difference
    text = [t for row in heatmap_figure(summary, "retrieval.k", "discovery.eps_hours", "recall").data[0].text
            for t in row]
    assert all("n=32" in t for t in text) and sum(NOISE_MARK in t for t in text) == 3  # 28, 28, 29 of 32


def test_a_running_sweep_says_how_far_it_is_and_is_gone_when_it_ends(mini, monkeypatch):
    """Issue 43: while its tasks run, the store holds the sweep's progress (this live process, pairs measured of
    pairs to measure) for the app's Sweep view; when it ends, nothing is running."""
    from tmem.evaluation import sweep as sweeping
    from tmem.store import Store

    seen, measure = [], sweeping.measure_cell

    def watched(task, env):
        seen.append(sweeping.running_sweeps(env.store, "mini"))
        return measure(task, env)
    monkeypatch.setattr(sweeping, "measure_cell", watched)
    assert sweep(mini, "--grid", "retrieval.k=12,36", "--name", "watched") == 0
    first, second = seen
    assert [p.sweep for p in first] == ["watched"] and first[0].measured == 0 and first[0].total > 0
    assert second[0].measured == first[0].total // 2 and second[0].fraction == pytest.approx(0.5)
    store = Store(mini)
    assert sweeping.running_sweeps(store, "mini") == [] and store.sweep_progress("mini") == []
    store.close()
