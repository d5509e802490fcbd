"""AppTest: the Compare page (per-type accuracy with deltas, per-question changes, heat-map)."""
from __future__ import annotations

import json

import pytest
from conftest import APP_RUN_ID

COMPARE = "pages/compare.py"


def _frame(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_baseline_against_full(app):
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    assert not at.exception
    summary = _frame(at, "question type").set_index("question type")
    assert summary.loc["all", "flat acc"] == 0 and summary.loc["all", "full acc"] == 1
    assert summary.loc["all", "Δacc full"] == pytest.approx(1.0)
    aligned = _frame(at, "change")
    assert list(aligned["change"]) == ["improved"]
    assert {m.label: m.value for m in at.metric}["improved"] == "1"


def test_heatmap_has_question_by_variant(app):
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    heat = spec["data"][0]
    assert heat["type"] == "heatmap" and heat["x"] == ["flat", "full"] and heat["z"] == [[0.0, 1.0]]


def test_baseline_switch_flips_the_change(app):
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="full")
    assert list(_frame(at, "change")["change"]) == ["regressed"]
    at.selectbox(key="baseline").set_value("flat").run()
    at.query_params["baseline"] = "flat"
    at.run()
    assert list(_frame(at, "change")["change"]) == ["improved"]


def test_only_changed_keeps_changed_questions(app):
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat", changed="true")
    assert at.toggle(key="changed").value is True
    assert list(_frame(at, "change")["change"]) == ["improved"]


def test_one_variant_is_not_enough(app):
    at = app(COMPARE)
    assert not at.exception and any("at least two variants" in i.value for i in at.info)
