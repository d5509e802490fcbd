"""AppTest: the Failures page (filters, clickable counts, URL state, exports)."""
from __future__ import annotations

from conftest import APP_RUN_ID

from tmem.evaluation.funnel import ANCHOR_MISS

FAILURES = "pages/failures.py"


def _table(at):
    return next(d.value for d in at.dataframe if "failure" in d.value.columns)


def test_batch_run_rows_with_attributed_failures(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    assert not at.exception
    table = _table(at).set_index("variant")
    assert table.loc["full", "verdict"] == "correct" and table.loc["flat", "verdict"] == "wrong"
    assert table.loc["flat", "failure"] == ANCHOR_MISS
    assert table["open"].str.contains("q=q1").all()


def test_counts_are_clickable_filters(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    pills = at.pills(key="failure")
    assert ANCHOR_MISS in pills.options[0] or any(ANCHOR_MISS in o for o in pills.options)
    pills.set_value(ANCHOR_MISS).run()
    assert list(_table(at)["variant"]) == ["flat"]
    at.pills(key="failure").set_value("correct").run()
    assert list(_table(at)["variant"]) == ["full"]


def test_filters_come_from_the_url(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID, fv="flat", verdict="wrong", failure=ANCHOR_MISS)
    assert at.selectbox(key="fv").value == "flat" and at.pills(key="failure").value == ANCHOR_MISS
    assert len(_table(at)) == 1


def test_widget_filters(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    at.selectbox(key="verdict").set_value("correct").run()
    assert list(_table(at)["variant"]) == ["full"]
    at.selectbox(key="qtype").set_value("knowledge_update").run()
    assert len(_table(at)) == 1


def test_traces_run_in_the_app_are_a_source_too(app):
    at = app(FAILURES, corpus="golden")
    assert "(traces run in the app)" in at.selectbox(key="run").options
    at.selectbox(key="run").set_value("(traces run in the app)").run()
    assert set(_table(at)["variant"]) == {"full", "flat"}


def test_empty_corpus_run_explains_itself(app):
    at = app(FAILURES)  # the demo corpus: no batch run, no stored trace yet in this copy
    assert not at.exception and (at.info or at.dataframe)


def test_exports(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    assert {"CSV", "JSON"} <= {b.proto.label for b in at.get("download_button")}
