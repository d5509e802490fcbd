"""`--executor ray`: a local Ray with 2 CPUs runs a small sweep and a small batch run, whose
numbers must equal the local executor's. Ray is an optional requirement (requirements-scale.txt): without it the
module is skipped with that reason. Slow: starting Ray and its workers takes most of a minute on 2 cores."""
from __future__ import annotations

import json

import pytest

from tmem.cli import main as cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray():
    # imported here, not at collection: every xdist worker collects this file (0.6 s of CPU for `import ray`), and
    # make test-fast deselects it
    ray = pytest.importorskip("ray", reason="Ray is optional: pip install -r requirements-scale.txt")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def mini(tmp_path, monkeypatch):
    from tmem.demo import generate
    from tmem.store import Store

    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")  # the workers build their roles from the same settings
    db = tmp_path / "mini.duckdb"
    store = Store(db)
    store.replace_corpus("mini", generate(7, 300, 1), format="demo")
    store.close()
    return db


def test_a_sweep_on_ray_gives_the_local_numbers(mini, local_ray, capsys):
    from tmem.store import Store

    args = ["sweep", "--db", str(mini), "--corpus", "mini", "--offline", "--quiet", "--json",
            "--grid", "retrieval.k=12,36", "--grid", "discovery.mu=0.25,1.0"]
    assert cli([*args, "--name", "local"]) == 0
    local = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert cli([*args, "--name", "ray", "--executor", "ray"]) == 0  # Ray is up: the executor joins it
    remote = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert len(local) == len(remote) == 4  # four tasks (one per cell), spread over the two workers
    keep = ("cell", "questions", "units", "recovered", "recall", "seed_recall", "mean_messages", "errors")
    assert [{k: c[k] for k in keep} for c in remote] == [{k: c[k] for k in keep} for c in local]
    assert len({c["recall"] for c in local}) > 1  # the cells differ, so equality says something
    rows = Store(mini).sweep_results("mini")
    per_question = {name: part.set_index(["cell", "scope", "question_id"])[
        ["units_recovered", "seed_units_recovered", "evidence_messages"]].sort_index()
        for name, part in rows.groupby("sweep")}
    assert per_question["ray"].equals(per_question["local"])


def test_a_batch_run_on_ray_writes_the_local_records(mini, local_ray, tmp_path, capsys):
    from tmem.evaluation.batch.records import read_records

    common = ["run", "--db", str(mini), "--corpus", "mini", "--offline", "--quiet", "--variants", "full,flat",
              "--limit", "4", "--no-store"]
    assert cli([*common, "--out", str(tmp_path / "local")]) == 0
    assert cli([*common, "--out", str(tmp_path / "ray"), "--executor", "ray"]) == 0
    capsys.readouterr()
    summaries = {n: json.loads((tmp_path / n / "summary.json").read_text()) for n in ("local", "ray")}
    for variant in ("full", "flat"):
        a, b = (summaries[n]["variants"][variant] for n in ("local", "ray"))
        assert a["accuracy"] == b["accuracy"] and a["recall"] == b["recall"] and b["errors"] == 0
        for stage in a["stages"]:
            records = {n: read_records(tmp_path / n / variant / f"{stage}.jsonl").latest for n in ("local", "ray")}
            assert {k: r["selected_ids"] for k, r in records["ray"].items()} == \
                {k: r["selected_ids"] for k, r in records["local"].items()}
    assert summaries["ray"]["valid"] and summaries["local"]["valid"]
