"""AppTest: the tables and figures pages derive from stored rows are computed once for every session
(pages._widgets.shared) and computed again when what they are made of changes -- a new variant in the run, a new
annotation, a re-imported corpus. A stale view is the risk of such a cache: each test changes the database between
two sessions and reads the change on the page."""
from __future__ import annotations

from datetime import datetime

import pytest
from conftest import APP_RUN_ID
from waiting import wait_until

pytestmark = pytest.mark.app  # every test here runs the explorer under AppTest

CORPUS, FAILURES, COMPARE = "pages/corpus.py", "pages/failures.py", "pages/compare.py"


def _frame(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _counting(monkeypatch, module, name: str) -> list:
    """Count the calls of module.name (the page calls it through the module)."""
    calls, real = [], getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)
    return calls


def test_compare_derives_its_tables_once_for_every_session_and_again_for_a_changed_run(app, app_db, monkeypatch):
    """flat misses golden q1's gold message m04 at its default k; once the run's flat row is replaced by a flat
    trace with k = all 59 messages (m04 in its context), the same variants show flat's evidence complete."""
    from tmem import api
    from tmem.config import config_hash
    from tmem.demo.golden import GOLD, MESSAGES, QUESTION
    from tmem.store import Store
    from tmem.viz.batch import compare

    calls = _counting(monkeypatch, compare, "summary")
    first = _frame(app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat"), "question type")
    again = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")  # a second tab: a new session
    assert not again.exception and _frame(again, "question type").equals(first)
    assert len(calls) == 1, "the second session re-derived the summary"
    summary = first.set_index("question type")
    assert summary.loc["all", "flat evidence"] == 0 and summary.loc["all", "Δ evidence full"] == "+100.0 pp"
    store = Store(app_db)
    config = api.resolve_config("flat", {"retrieval.k": len(MESSAGES)})
    api.run_and_store(store, "golden", QUESTION, "flat", config, api.build_roles({}, store), GOLD)
    rows = api.trace_results(store, "golden").query(f"config_hash == '{config_hash(config)}'")
    store.replace_run_results(APP_RUN_ID, ["flat"], rows.assign(run_id=APP_RUN_ID, variant="flat").to_dict("records"))
    store.close()
    now = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    assert not now.exception and len(calls) == 2
    summary = _frame(now, "question type").set_index("question type")
    assert summary.loc["all", "flat evidence"] == 1 and summary.loc["all", "full evidence"] == 1
    assert summary.loc["all", "Δ evidence full"] == "±0.0 pp"
    assert list(_frame(now, "change")["change"]) == ["unchanged"]


def test_failures_shows_an_annotation_saved_elsewhere_in_a_new_session(app, app_db, monkeypatch):
    """The table is shared by sessions under the stored annotations: one saved by another session (or the CLI)
    shows on the next visit, while a visit with nothing changed reads the shared table."""
    from tmem.analysis.annotations import annotate
    from tmem.store import Store
    from tmem.viz.batch import review

    calls = _counting(monkeypatch, review, "failure_table")
    before = _frame(app(FAILURES, corpus="golden", run=APP_RUN_ID), "failure")
    assert set(before["annotation"]) == {"—"}
    assert _frame(app(FAILURES, corpus="golden", run=APP_RUN_ID), "failure").equals(before)
    assert len(calls) == 1, "the second session rebuilt the table"
    store = Store(app_db)
    row = store.run_results("golden", APP_RUN_ID).query("variant == 'flat'").to_dict("records")[0]
    annotate(store, "golden", row, "date slip", "moved twice", "rev")
    store.close()
    after = _frame(app(FAILURES, corpus="golden", run=APP_RUN_ID), "failure")
    assert len(calls) == 2
    flat = after[after["variant"] == "flat"].iloc[0]
    assert flat["annotation"].startswith("date slip — moved twice (rev, ")
    assert set(after[after["variant"] == "full"]["annotation"]) == {"—"}


def test_failures_counts_follow_a_new_row_of_the_run(app, app_db):
    """golden q2 run under full and flat and added to the run: the counts and the table grow from 2 rows to 4."""
    from tmem import api
    from tmem.demo.golden import SCOPE
    from tmem.store import Store

    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    assert len(_frame(at, "failure")) == 2
    store = Store(app_db)
    q2 = next(q for q in store.questions("golden") if q.id == "q2")
    for variant in ("full", "flat"):
        api.run_and_store(store, "golden", q2, variant, api.resolve_config(variant), api.build_roles({}, store),
                          store.gold("golden", SCOPE, "q2"))
    rows = api.trace_results(store, "golden").query("question_id == 'q2'").assign(run_id=APP_RUN_ID)
    store.save_run_results(rows.to_dict("records"))
    store.close()
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    assert not at.exception
    table = _frame(at, "failure")
    assert len(table) == 4 and sorted(table["question_id"]) == ["q1", "q1", "q2", "q2"]
    assert any("4 of 4 rows" in c.value for c in at.caption)


def test_the_corpus_overview_follows_a_re_import(app, app_db):
    from dataclasses import replace

    from tmem.demo.golden import GOLD, MESSAGES, QUESTION, SCOPE
    from tmem.store import CorpusData, Store

    channels = _frame(app(CORPUS, corpus="golden"), "channel")
    assert "#moved-here" not in set(channels["channel"])
    store = Store(app_db)
    # the import's time (whole seconds) names the corpus version the views are kept under: import again in a
    # later second than the template database's import
    imported = store.corpus_info("golden")["imported_at"]
    wait_until(lambda: datetime.now().replace(microsecond=0) > imported, "a second after the corpus's import")
    store.replace_corpus("golden", CorpusData([replace(m, channel="#moved-here") for m in MESSAGES], [QUESTION],
                                              [(SCOPE, GOLD)]), format="test")
    store.close()
    channels = _frame(app(CORPUS, corpus="golden"), "channel")
    assert list(channels["channel"]) == ["#moved-here"] and list(channels["messages"]) == [len(MESSAGES)]


def test_compare_reads_a_batch_runs_traces_a_scope_at_a_time(app, monkeypatch):
    """The first visit re-runs flat at full's message count (nothing stored for the run yet): the compared traces
    come from one query per scope, as the review's do, not two queries per row (a trace's version, then its
    JSON; 96 queries on the demo batch); and the gold a scope at a time."""
    from tmem.store import Store

    by_row, by_question = _counting(monkeypatch, Store, "load_trace"), _counting(monkeypatch, Store, "gold")
    per_scope = _counting(monkeypatch, Store, "run_trace_json")
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    assert not at.exception and any("Evidence complete at equal budget" in m.value for m in at.markdown)
    # golden's one scope read twice: by the review, and by the equal-budget pass
    assert by_row == [] and by_question == [] and len(per_scope) == 2


def _forest_nodes(at) -> int | None:
    import re

    found = [re.search(r'data-node-count="(\d+)"', f.proto.srcdoc) for f in at.get("iframe")]
    return int(found[0].group(1)) if found and found[0] else None


def test_the_forest_is_laid_out_once_per_stored_trace_and_again_when_the_trace_changes(app, app_db, monkeypatch):
    """Leaving the Forest tab and coming back, or a second session, reuse the layout; the same stored trace
    replaced by one with a node fewer (same question, variant, configuration and backend) is laid out anew."""
    from dataclasses import replace

    from tmem.store import Store
    from tmem.viz.question import forest

    calls = _counting(monkeypatch, forest, "forest_view")
    url = {"corpus": "golden", "scope": "golden", "q": "q1", "variant": "full", "tab": "Forest"}
    at = app(**url)
    nodes = _forest_nodes(at)
    assert not at.exception and nodes and len(calls) == 1
    at.query_params["tab"] = "Stages"  # (not Timeline, the default: its URL has no tab= for AppTest to send)
    at.run()
    assert _forest_nodes(at) is None
    at.query_params["tab"] = "Forest"
    at.run()
    assert _forest_nodes(at) == nodes and len(calls) == 1
    assert _forest_nodes(app(**url)) == nodes and len(calls) == 1  # a second session
    store = Store(app_db)
    row = store.trace_index("golden").query("question_id == 'q1' and variant == 'full'").iloc[-1]
    trace = store.load_trace("golden", "golden", "q1", "full", row["config_hash"], row["backend"])
    leaf = next(n for n in reversed(trace.nodes) if not any(m.parent_index == n.index for m in trace.nodes))
    # written again at once: a stored trace's version is its write time to the microsecond and its size
    # (Store.trace_version), so a change within the same second is a new version too
    store.save_trace(replace(trace, nodes=tuple(n for n in trace.nodes if n is not leaf)), row["backend"])
    store.close()
    at = app(**url)
    assert not at.exception and _forest_nodes(at) == nodes - 1 and len(calls) == 2
