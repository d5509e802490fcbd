"""AppTest: the Compare page (per-type accuracy with deltas, per-question changes, heat-map)."""
from __future__ import annotations

import json
import re

import pytest
from conftest import APP_RUN_ID

from tmem.viz.batch import compare

pytestmark = pytest.mark.app  # every test here runs the explorer under AppTest

COMPARE = "pages/compare.py"


def _frame(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_baseline_against_full(app):
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    assert not at.exception
    summary = _frame(at, "question type").set_index("question type")  # offline: the evidence verdict leads
    assert summary.loc["all", "flat evidence"] == 0 and summary.loc["all", "full evidence"] == 1
    assert summary.loc["all", "n"] == 1 and summary.loc["all", "Δ evidence full"] == "+100.0 pp"  # signed points
    aligned = _frame(at, "change")
    assert list(aligned["change"]) == ["improved"]
    assert {m.label: m.value for m in at.metric}["improved"] == "1"


def test_heatmap_has_question_by_variant(app):
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    heat = next(m.value for m in at.markdown if 'aria-label="question by variant"' in m.value)
    assert re.findall(r"<th[^>]*>([^<]*)</th>", heat) == ["question", "flat", "full"]
    cells = re.findall(r"background:(#\w+)", heat)  # one question: flat none / wrong (red), full complete (green)
    assert cells == [compare.HEAT_COLOURS[0.0], compare.HEAT_COLOURS[1.0]]


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


def test_side_by_side_question_comes_from_the_url_and_shows_each_sides_trace(app, baseline_run):
    run_id, found = baseline_run
    (_, embedding), (_, full) = found["embedding"], found["full"]
    at = app(COMPARE, corpus="golden", run=run_id, baseline="full", against="embedding", pair="golden/q1")
    assert not at.exception and at.selectbox(key="pair").value == "golden/q1"
    answers = [t.value for t in at.text]
    assert embedding.answer("flat").text in answers and full.answer("forest").text in answers
    assert not at.get("iframe"), "an evidence diff, not thumbnail forests"
    diff = _frame(at, "message_id")
    ours, theirs = set(full.evidence_ids), set(embedding.evidence_ids)  # full is the baseline here
    gained, lost = theirs - ours, ours - theirs
    assert gained or lost, "the test needs traces whose evidence differs"
    assert set(diff[diff["change"] == "gained"]["message_id"]) == gained
    assert set(diff[diff["change"] == "lost"]["message_id"]) == lost
    gold = list(diff["gold"])
    assert gold == sorted(gold, reverse=True), "gold first"


def test_only_questions_both_variants_answered_are_compared(app, app_db):
    """flat answers q1 and q2, full only q1: the summary compares q1 alone and says n per variant."""
    from tmem import api
    from tmem.demo.golden import SCOPE
    from tmem.store import Store

    store = Store(app_db)
    q2 = next(q for q in store.questions("golden") if q.id == "q2")
    api.run_and_store(store, "golden", q2, "flat", api.resolve_config("flat"), api.build_roles({}, store),
                      store.gold("golden", SCOPE, "q2"))
    rows = api.trace_results(store, "golden").assign(run_id="uneven")
    store.save_run_results(rows.to_dict("records"))
    store.close()
    at = app(COMPARE, corpus="golden", run="uneven", baseline="flat")
    summary = _frame(at, "question type").set_index("question type")
    shown = "\n".join(c.value for c in at.caption)
    assert summary.loc["all", "n"] == 1 and "knowledge_update" in summary.index
    assert "**flat** n=" in shown and "**full** n=1" in shown and "Compared on **1**" in shown


def test_opening_a_baseline_side_shows_that_stored_trace(app, baseline_run):
    run_id, found = baseline_run
    (row, embedding), (_, full) = found["embedding"], found["full"]
    at = app(COMPARE, corpus="golden", run=run_id, baseline="full", against="embedding", pair="golden/q1")
    at.button(key="open (embedding)").click().run()
    assert not at.exception
    shown = "\n".join([i.value for i in at.info] + [c.value for c in at.caption])
    assert "Stored trace" in shown and "variant **embedding**" in shown and row["config_hash"] in shown
    answers = [t.value for t in at.text]
    assert embedding.answer("flat").text in answers and full.answer("forest").text not in answers
    assert not [b for b in at.button if b.label in ("Re-run", "Run the pipeline")]


def test_a_fixed_budget_baseline_is_also_shown_at_the_compared_variants_message_count(app):
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    assert not at.exception
    table = next(d.value for d in at.dataframe if "group" in d.value.columns
                 and any(str(g).startswith("equal budget") for g in d.value["group"]))
    assert list(table["group"]) == ["unmatched: flat", "equal budget: flat@full"]
    assert any("Evidence complete at equal budget" in m.value for m in at.markdown)
    assert any("budget matched in messages" in c.value for c in at.caption)
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="full")  # full has no fixed budget: nothing to match
    assert not any("at equal budget" in m.value for m in at.markdown)


def _equal_budget(at):
    return next(d.value for d in at.dataframe if "group" in d.value.columns
                and any(str(g).startswith("equal budget") for g in d.value["group"])).set_index("group")


def test_equal_budget_figures_are_the_runs_own_and_read_stored_on_the_first_visit(app, app_db, tmp_path,
                                                                                   monkeypatch):
    """`run`'s `matched` (flat given full's message count) is what Compare shows, and the run stored those rows: the
    first visit after it (with the re-run made to fail) reads them instead of re-running the baseline."""
    from tmem.cli import main as cli
    from tmem.evaluation import matched
    from tmem.evaluation.gold_versions import ORIGINAL

    assert cli(["run", "--db", str(app_db), "--corpus", "golden", "--variants", "full,flat", "--out",
                str(tmp_path / "run"), "--offline", "--quiet"]) == 0
    report = json.loads((tmp_path / "run" / "summary.json").read_text())
    want = next(p for p in report["comparisons"] if p["baseline"] == "flat" and p.get("matched"))["matched"]
    assert want["n"] == 1 and want["delta"] == 1.0  # full holds q1's evidence, flat at full's count does not
    assert matched.ORIGINAL_GOLD == ORIGINAL  # the run stores them under the version the page opens on

    def no_rerun(*args, **kw):
        raise AssertionError("re-ran the baseline although the run stored its rows")
    monkeypatch.setattr(matched, "matched_rows", no_rerun)
    at = app(COMPARE, corpus="golden", run=report["run_id"], baseline="flat")
    assert not at.exception
    row = _equal_budget(at).loc[f"equal budget: {want['method']}"]
    assert row["n"] == 1 and row["Δ"] == "+100.0 pp" and row["outcome"] == want["outcome"]
    assert _mean_messages(at) == f"{want['mean_messages']:.1f}"


def test_rows_computed_on_a_visit_are_read_by_a_new_server(app, monkeypatch):
    """A run stored without them (the app's batch stores one variant at a time): the first visit computes and
    stores them; with the cache cleared (a new server) and the re-run made to fail, the page still shows them."""
    import streamlit as st

    from tmem.evaluation import matched

    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    first = _equal_budget(at)

    def no_rerun(*args, **kw):
        raise AssertionError("re-ran the baseline although its rows are stored")
    monkeypatch.setattr(matched, "matched_rows", no_rerun)
    st.cache_data.clear()
    again = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    assert not again.exception
    assert _equal_budget(again).equals(first) and _mean_messages(again) == _mean_messages(at)


def _mean_messages(at) -> str:
    text = next(m.value for m in at.markdown if "Evidence complete at equal budget" in m.value)
    return text.split("(mean ", 1)[1].split(" per question", 1)[0]


def test_a_changed_run_computes_its_equal_budget_rows_again(app, app_db):
    """flat@full gives flat as many messages as full showed on q1; once the run's full row is replaced by a trace
    with k = 4 seeds (fewer messages), the page matches flat at that new count, not the stored rows of before."""
    from tmem import api
    from tmem.analysis.funnel import stage_sets
    from tmem.config import config_hash
    from tmem.demo.golden import GOLD, QUESTION
    from tmem.store import Store

    store = Store(app_db)
    old = api.result_trace(store, "golden", store.run_results("golden", APP_RUN_ID).query("variant == 'full'")
                           .to_dict("records")[0])
    store.close()
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    assert _mean_messages(at) == f"{len(stage_sets(old)['after_compression']):.1f}"
    store = Store(app_db)
    config = api.resolve_config("full", {"retrieval.k": 4})
    new = api.run_and_store(store, "golden", QUESTION, "full", config, api.build_roles({}, store), GOLD)
    rows = api.trace_results(store, "golden").query(f"config_hash == '{config_hash(config)}'")  # labelled full (k=4)
    assert len(rows) == 1
    store.replace_run_results(APP_RUN_ID, ["full"], rows.assign(run_id=APP_RUN_ID, variant="full").to_dict("records"))
    store.close()
    shown_before, shown_now = len(stage_sets(old)["after_compression"]), len(stage_sets(new)["after_compression"])
    assert shown_now != shown_before, "the test needs a changed message count"
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    assert not at.exception and _mean_messages(at) == f"{shown_now:.1f}"
