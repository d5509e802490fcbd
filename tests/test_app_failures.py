"""AppTest: the Failures page (filters, clickable counts, URL state, exports)."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import APP_RUN_ID

from tmem.analysis.funnel import ANCHOR_MISS

pytestmark = pytest.mark.app  # every test here runs the explorer under AppTest

FAILURES = "pages/failures.py"


def _table(at):
    return next(d.value for d in at.dataframe if "failure" in d.value.columns)


def test_batch_run_rows_with_attributed_failures(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    assert not at.exception
    table = _table(at).set_index("variant")
    # offline stand-ins answered: the evidence leads, the stand-in's own verdict stays beside it
    # "none" read like an empty cell: it shows as "no gold unit held" (the URL keeps "none")
    assert table.loc["full", "verdict"] == "complete" and table.loc["flat", "verdict"] == "no gold unit held"
    assert table.loc["full", "answer verdict"] == "correct" and table.loc["flat", "answer verdict"] == "wrong"
    assert table.loc["flat", "failure"] == ANCHOR_MISS and table.loc["flat", "missing units"] != "—"
    assert table["open"].str.contains("q=q1").all()


def test_counts_are_clickable_filters(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    pills = at.pills(key="failure")
    assert ANCHOR_MISS in pills.options[0] or any(ANCHOR_MISS in o for o in pills.options)
    pills.set_value(ANCHOR_MISS).run()
    assert list(_table(at)["variant"]) == ["flat"]
    at.pills(key="failure").set_value("complete").run()
    assert list(_table(at)["variant"]) == ["full"]


def test_filters_come_from_the_url(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID, fv="flat", verdict="none", failure=ANCHOR_MISS)
    assert at.selectbox(key="verdict").value == "none"
    assert at.selectbox(key="fv").value == "flat" and at.pills(key="failure").value == ANCHOR_MISS
    assert len(_table(at)) == 1


def test_widget_filters(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    at.selectbox(key="verdict").set_value("complete").run()
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


# ------------------------------------------------------------------ a row opens exactly its own stored trace
def _texts(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [t.value for t in at.text]
                     + [i.value for i in at.info] + [w.value for w in at.warning])


def _has_forest(at) -> bool:
    """A forest graph is drawn (only on the Question page's Forest tab: open it with `tab="Forest"`)."""
    return any("data-node-count" in f.proto.srcdoc for f in at.get("iframe"))


def _no_run_button(at) -> bool:
    return not [b for b in at.button if b.label in ("Re-run", "Run the pipeline")]


def _open_link(app, url: str):
    """Open a row's `open ↗` link (a relative URL of the default page, Question) as a new browser tab would, on
    the Forest tab (as if the user then clicked it: only the open tab runs)."""
    return app(None, **{k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}, tab="Forest")


def test_a_baseline_row_link_opens_its_own_trace_not_the_sidebar_variant(app, baseline_run):
    run_id, found = baseline_run
    (row, embedding), (_, full) = found["embedding"], found["full"]
    assert embedding.answer("flat").text != full.answer("forest").text, "the test needs distinguishable answers"
    table = _table(app(FAILURES, corpus="golden", run=run_id))
    link = table[(table["variant"] == "embedding") & (table["question_id"] == "q1")]["open"].iloc[0]
    assert "trace_variant=embedding" in link and row["config_hash"] in link and "key" not in link.lower()
    at = _open_link(app, link)
    assert not at.exception
    shown = _texts(at)
    assert "Stored trace" in shown and "variant **embedding**" in shown and row["config_hash"] in shown
    answers = [t.value for t in at.text]
    assert embedding.answer("flat").text in answers and full.answer("forest").text not in answers
    assert not _has_forest(at), "the embedding baseline builds no forest"
    assert _no_run_button(at), "the app cannot re-run a batch baseline"


def test_back_to_the_sidebar_variant(app, baseline_run):
    row, _ = baseline_run[1]["embedding"]  # (run id, {variant: (row, trace)})
    at = app(corpus="golden", scope="golden", q="q1", variant="full", trace_variant="embedding",
             trace_config=row["config_hash"], trace_backend=row["backend"], tab="Forest")
    assert "Stored trace" in _texts(at) and not _has_forest(at)
    next(b for b in at.button if b.label.startswith("Show the sidebar's variant")).click().run()
    assert not at.exception and "Stored trace" not in _texts(at)
    assert "variant **full**" in _texts(at) and _has_forest(at) and not _no_run_button(at)


def test_a_stored_trace_that_does_not_exist_says_so(app):
    at = app(corpus="golden", scope="golden", q="q1", trace_variant="embedding", trace_config="0123456789abcdef",
             trace_backend="offline:nothing", tab="Forest")
    assert not at.exception
    assert any("does not exist" in w.value for w in at.warning)
    assert _no_run_button(at) and not _has_forest(at)


def test_a_preset_row_of_another_configuration_opens_that_configuration(app, app_db):
    from tmem import api
    from tmem.config import config_hash
    from tmem.demo.golden import GOLD, QUESTION
    from tmem.store import Store

    store = Store(app_db)
    config = api.resolve_config("full", {"retrieval.k": 5})
    stored = api.run_and_store(store, "golden", QUESTION, "full", config, api.build_roles({}, store), GOLD)
    store.close()
    table = _table(app(FAILURES, corpus="golden", run="(traces run in the app)"))
    link = table[table["variant"] == f"full@{config_hash(config)[:6]}"]["open"].iloc[0]
    at = _open_link(app, link)
    assert at.selectbox(key="variant").value == "full"
    assert "Stored trace" in _texts(at) and config_hash(config) in _texts(at)
    assert f'data-node-count="{len(stored.nodes)}"' in at.get("iframe")[0].proto.srcdoc


def test_choosing_another_sidebar_variant_or_question_leaves_the_stored_trace(app, baseline_run):
    row, _ = baseline_run[1]["embedding"]
    pinned = dict(corpus="golden", scope="golden", q="q1", variant="full", trace_variant="embedding",
                  trace_config=row["config_hash"], trace_backend=row["backend"])
    at = app(**pinned)
    at.query_params["variant"] = "flat"  # AppTest has no browser URL: mirror what the bound widget writes there
    at.selectbox(key="variant").set_value("flat").run()
    assert "Stored trace" not in _texts(at) and "variant **flat**" in _texts(at)
    at = app(**pinned)
    at.selectbox(key="q").set_value("q2").run()
    assert "Stored trace" not in _texts(at) and "Who drafted the newsletter section?" in _texts(at)


# ------------------------------------------------------------- rows carry their text; a failure opens in context
def test_rows_carry_question_answer_and_gold_without_python_syntax(app):
    table = _table(app(FAILURES, corpus="golden", run=APP_RUN_ID)).set_index("variant")
    assert set(table["question"]) == {"When is the product launch scheduled?"}
    assert table.loc["full", "gold answer"] and table.loc["full", "gold answer"] != "—"
    assert table.loc["full", "answer"] not in ("", "—") and table.loc["full", "answer"] != table.loc["flat", "answer"]
    assert "['" not in table.loc["flat", "failure_detail"] and table.loc["full", "failure"] == "—"


def _nav(at):
    from tmem.api import TraceRef

    rows = _table(at).to_dict("records")
    return {"index": 0, "back": {"run": APP_RUN_ID, "fv": "flat"},
            "rows": [{"scope": r["scope"], "question_id": r["question_id"], "ref": TraceRef.from_row(r),
                      "variant": r["variant"], "verdict": r["verdict"], "failure": None if r["failure"] == "—"
                      else r["failure"], "detail": r["failure_detail"]} for r in rows]}


def test_an_opened_failure_shows_its_attribution_with_previous_next_and_back(app):
    nav = _nav(app(FAILURES, corpus="golden", run=APP_RUN_ID))
    first = nav["rows"][0]
    at = app(corpus="golden", scope="golden", q="q1", **first["ref"].to_params())  # as the row opened it
    at.session_state["failure_nav"] = nav
    at.run()
    assert not at.exception
    banner = "\n".join(e.value for e in [*at.error, *at.info])
    assert f"Failures row 1 of {len(nav['rows'])}" in banner and first["variant"] in banner
    if first["failure"]:
        assert first["failure"] in banner and "['" not in banner
    assert at.button(key="fail_prev").disabled and not at.button(key="fail_next").disabled
    # keyboard review (issue 42): J next, K previous, B back to Failures
    assert [at.button(key=k).proto.shortcut.lower() for k in ("fail_next", "fail_prev", "fail_back")] == ["j", "k", "b"]
    at.button(key="fail_next").click().run()
    assert not at.exception and at.session_state["failure_nav"]["index"] == 1
    assert f"Failures row 2 of {len(nav['rows'])}" in "\n".join(e.value for e in [*at.error, *at.info])
    at.button(key="fail_back").click().run()
    assert not at.exception and at.selectbox(key="fv").value == "flat"  # the filters came back
    assert list(_table(at)["variant"]) == ["flat"]


def test_a_wrong_answer_rings_its_lost_unit_on_the_timeline(app):
    import json

    at = app(corpus="golden", scope="golden", q="q1", variant="flat")
    names = [t.get("name", "") for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]]
    assert any(n.startswith("lost gold evidence") for n in names)
    at = app(corpus="golden", scope="golden", q="q1", variant="full")  # correct: nothing lost
    names = [t.get("name", "") for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]]
    assert not any(n.startswith("lost gold evidence") for n in names)
