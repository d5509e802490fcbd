"""One verdict model (issue 42): the app's Failures page, the static report and `run`'s summary decide the primary
verdict and the failure attribution with the same function (tmem.analysis.verdicts.with_primary), so on a demo batch
the report says, row by row and in its counts, what the app says."""
from __future__ import annotations

import json

import pytest

from tmem.analysis import verdicts as vd
from tmem.cli import main as cli
from tmem.evaluation.report import build
from tmem.store import Store
from tmem.viz.batch import review as review_view

FAILURES = "pages/failures.py"


@pytest.mark.app
def test_app_report_and_run_agree_on_the_demo_batch(app, app_db, tmp_path, capsys):
    out = tmp_path / "demo-run"
    assert cli(["run", "--db", str(app_db), "--corpus", "demo", "--variants", "full,flat", "--types",
                "knowledge_update,temporal,multi_hop", "--limit", "12", "--out", str(out), "--offline", "--quiet",
                "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    run_id = summary["run_id"]
    at = app(FAILURES, corpus="demo", scope="Technology", run=run_id)
    assert not at.exception
    shown = next(d.value for d in at.dataframe if "failure" in d.value.columns and "verdict" in d.value.columns)
    app_rows = {(r["variant"], r["question_id"]): (r["verdict"], r["failure"]) for r in shown.to_dict("records")}

    store = Store(app_db)
    site = build(store, "demo", run_id)
    store.close()
    assert site.primary == vd.EVIDENCE  # offline stand-ins answered: the evidence leads in both
    report_rows = {(r["variant"], r["question_id"]): (r["verdict"], review_view.readable_text(r["failure"]))
                   for r in site.rows.to_dict("records")}
    assert report_rows == app_rows and len(app_rows) == 24
    assert any(v in (vd.PARTIAL, vd.NONE) for v, _ in app_rows.values()), "the batch has failures to attribute"
    # the report's failure counts, the app's clickable counts and run's summary count the same categories
    for variant in ("full", "flat"):
        part = site.rows[site.rows["variant"] == variant]
        mine = part["category"].value_counts().to_dict()
        assert summary["review"]["counts"][variant]["categories"] == mine
        app_counts = review_view.category_counts(part, vd.EVIDENCE)
        for category, n in mine.items():
            if category in app_counts:
                assert app_counts[category] == n, (variant, category)
