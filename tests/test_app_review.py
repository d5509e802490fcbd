"""AppTest: the Failures and Compare pages as a reviewer uses them -- evidence-first verdicts offline, the run pinned
in the URL, one control per label, a batch form that counts as you type, no raw Python values in any table,
significance on Compare, annotations and gold versions."""
from __future__ import annotations

import re

import pandas as pd
import pytest
from conftest import APP_RUN_ID

from tmem.analysis import verdicts as vd

pytestmark = pytest.mark.app  # every test here runs the explorer under AppTest

FAILURES, COMPARE, SWEEP = "pages/failures.py", "pages/compare.py", "pages/sweep.py"
RAW = re.compile(r"^(None|nan|NaN|True|False|<NA>)$|^\(.*,.*\)$|^\[.*\]$|\d\.\d{5,}")


def _table(at, column="failure"):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _with_unscored_rows(app_db) -> str:
    """golden q2 (no gold at all: not scored on evidence) run under full and flat beside q1: a run of 4 rows."""
    from tmem import api
    from tmem.demo.golden import SCOPE
    from tmem.store import Store

    store = Store(app_db)
    q2 = next(q for q in store.questions("golden") if q.id == "q2")
    roles = api.build_roles({}, store)
    for variant in ("full", "flat"):
        api.run_and_store(store, "golden", q2, variant, api.resolve_config(variant), roles,
                          store.gold("golden", SCOPE, "q2"))
    store.save_run_results(api.trace_results(store, "golden").assign(run_id="with-q2").to_dict("records"))
    store.close()
    return "with-q2"


def assert_readable(frame: pd.DataFrame, where: str) -> None:
    """No None / nan / True / tuples / lists / 6-decimal floats / "|"-joined text in what a person reads."""
    for column in frame.columns:
        for value in frame[column]:
            text = str(value)
            if column == "open":  # a link: its query string is not read
                continue
            assert not RAW.search(text), f"{where}: column {column!r} shows {text!r}"
            assert "|" not in text, f"{where}: column {column!r} shows {text!r}"


def _shown(at, frame_column="failure"):
    """The displayed columns of a dataframe (its column_order when set)."""
    element = next(d for d in at.dataframe if frame_column in d.value.columns)
    order = list(element.proto.column_order) or list(element.value.columns)
    return element.value[[c for c in order if c in element.value.columns]]


def test_the_default_run_is_pinned_in_the_url(app):
    for page in (FAILURES, COMPARE):
        at = app(page, corpus="golden")
        assert not at.exception
        assert at.query_params["run"] == [at.selectbox(key="run").value] or \
            at.query_params["run"] == at.selectbox(key="run").value, page


def test_no_two_controls_share_the_label_variant(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    labels = [w.label for w in [*at.selectbox, *at.multiselect]]
    assert labels.count("Variant") <= 1, labels  # the sidebar's; the row filter is "Show variant"
    assert "Show variant" in labels


def test_the_batch_form_counts_the_typed_limit_at_once(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    at.number_input(key="batch_limit").set_value(1).run()
    captions = [c.value for c in at.caption]
    assert any(c.startswith("1 question × 4 variants") for c in captions), captions


def test_unscored_rows_come_last_and_every_category_is_explained(app, app_db):
    from tmem.analysis.funnel import FAILURE_CATEGORIES
    from tmem.viz.batch import review

    run = _with_unscored_rows(app_db)
    at = app(FAILURES, corpus="golden", run=run)
    assert not at.exception
    table = _table(at)
    verdicts = list(table["verdict"])
    assert verdicts[0] == "no gold unit held" and verdicts[-2:] == [vd.NOT_SCORED] * 2, verdicts
    options = at.pills(key="failure").options
    names = [o.rsplit(" · ", 1)[0] for o in options]
    assert "unattributed" not in names
    assert all(n in review.CATEGORY_EXPLAIN or n in FAILURE_CATEGORIES for n in names), names
    at.pills(key="failure").set_value(vd.NOT_SCORED).run()
    assert any("no unit to hold" in c.value for c in at.caption)


def test_opening_a_flat_row_leaves_the_sidebar_variant_alone(app, app_db):
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat", against="full", pair="golden/q1")
    before = at.selectbox(key="variant").value
    at.button(key="open (baseline)").click().run()
    assert not at.exception
    shown = "\n".join([i.value for i in at.info] + [c.value for c in at.caption])
    assert "variant **flat**" in shown and "Stored trace" in shown  # the flat row's own trace is shown
    assert at.selectbox(key="variant").value == before == "full"  # and the sidebar keeps the user's variant


@pytest.mark.parametrize("page", [FAILURES, COMPARE])
def test_tables_show_no_raw_values(app, app_db, page):
    run = _with_unscored_rows(app_db)
    at = app(page, corpus="golden", run=run, baseline="flat")
    assert not at.exception
    for element in at.dataframe:
        order = list(element.proto.column_order) or list(element.value.columns)
        frame = element.value[[c for c in order if c in element.value.columns]]
        assert_readable(frame, page)


def test_compare_shows_intervals_and_does_not_colour_noise(app):
    """One paired question (flat none, full complete): the bootstrap interval is [+100, +100] but McNemar's p is 1
    (one discordant pair), so the delta is inconclusive: grey, not a win."""
    import re

    from tmem.viz.batch import significance

    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    assert not at.exception
    table = _table(at, "McNemar p").set_index("group")
    assert table.loc["overall", "Δ"] == "+100.0 pp" and table.loc["overall", "95% CI"] == "[+100.0, +100.0] pp"
    assert table.loc["overall", "McNemar p"] == "1.000" and table.loc["overall", "outcome"] == "inconclusive"
    whiskers = next(m.value for m in at.markdown if 'aria-label="paired deltas with intervals"' in m.value)
    dots = re.findall(r'<circle [^>]*fill="([^"]+)"', whiskers)  # a dot per group, its whisker in the same colour
    bars = re.findall(r'<line [^>]*stroke="([^"]+)" stroke-width="3"', whiskers)
    assert len(dots) == len(bars) == len(table) and set(dots + bars) == {significance.COLOURS["inconclusive"]}
    assert any("never" in c.value or "excludes 0" in c.value for c in at.caption)


def test_compare_counts_stale_answers_per_variant(app):
    at = app(COMPARE, corpus="golden", run=APP_RUN_ID, baseline="flat")
    counts = _table(at, "evidence complete").set_index("variant")
    assert counts.loc["full", "evidence complete"] == "1 of 1 (100.0%)"
    assert counts.loc["flat", "evidence complete"] == "0 of 1 (0.0%)"
    assert {"stale — states the superseded state", "revision without rollback"} <= set(counts.columns)


def _select(at, row: int = 0):
    at.session_state["fail_table"] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    return at.run()


def test_a_selected_row_takes_an_annotation_kept_as_a_column_and_a_filter(app):
    at = _select(app(FAILURES, corpus="golden", run=APP_RUN_ID))
    assert not at.exception
    first = _table(at).iloc[0]
    at.selectbox(key="note_label").set_value("new label…")
    at.text_input(key="note_new").input("date slip")
    at.text_area(key="note_text").input("the <b>launch</b> moved twice")
    at.text_input(key="note_author").input("rev")
    at.button(key="FormSubmitter:annotate-Save the annotation").click().run()
    assert not at.exception
    table = _table(at)
    row = table[(table["variant"] == first["variant"]) & (table["question_id"] == first["question_id"])].iloc[0]
    assert row["annotation"].startswith("date slip — the <b>launch</b> moved twice (rev, ")
    at.selectbox(key="label").set_value("date slip").run()
    assert list(_table(at)["variant"]) == [first["variant"]]
    assert "date slip" in at.selectbox(key="note_label").options  # a created label is offered next time


def test_the_author_is_never_the_servers_login_and_bidi_controls_are_neutralised(app, monkeypatch):
    """Issue 44: the Author field was pre-filled with the server's login name (every visitor read it), and a bidi
    override in a note rendered reversed in Failures."""
    import getpass

    monkeypatch.setattr(getpass, "getuser", lambda: "server-login-name")
    at = _select(app(FAILURES, corpus="golden", run=APP_RUN_ID))
    assert not at.exception
    assert at.text_input(key="note_author").value in ("", None)
    assert "server-login-name" not in str([e.value for e in at.text_input])
    first = _table(at).iloc[0]
    at.selectbox(key="note_label").set_value("new label…")
    at.text_input(key="note_new").input("mirror \u202eevil\u202c")
    at.text_area(key="note_text").input("read \u202egnp.exe\u2066 this")
    at.button(key="FormSubmitter:annotate-Save the annotation").click().run()
    assert not at.exception
    table = _table(at)
    row = table[(table["variant"] == first["variant"]) & (table["question_id"] == first["question_id"])].iloc[0]
    assert row["annotation"].startswith("mirror \ufffdevil\ufffd — read \ufffdgnp.exe\ufffd this (anonymous, ")
    assert not re.search("[\u202a-\u202e\u2066-\u2069]", " ".join(map(str, table["annotation"])))


def test_a_selected_row_shows_what_raising_k_would_have_found(app):
    at = _select(app(FAILURES, corpus="golden", run=APP_RUN_ID))
    ranks = _table(at, "BM25 rank (= k needed)")
    assert len(ranks) == 1 and list(ranks["messages"]) == ["m04"]  # golden q1's one gold unit


def test_a_gold_version_rescores_the_pages_and_says_which(app, app_db):
    from tmem.demo.golden import SCOPE
    from tmem.evaluation.gold_versions import Correction, save_version
    from tmem.store import Store

    store = Store(app_db)
    save_version(store, "golden", "v1", [Correction(SCOPE, "q1", None, (("m01",),), "the launch message")])
    store.close()
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    assert "Gold: **original**" in "\n".join(c.value for c in at.caption)
    at.selectbox(key="gold").set_value("v1").run()
    assert not at.exception and at.query_params["gold"] in ("v1", ["v1"])
    shown = "\n".join(c.value for c in at.caption)
    assert "version **v1**" in shown and "2 row(s) with corrected gold" in shown
    for page in (COMPARE,):
        at = app(page, corpus="golden", run=APP_RUN_ID, gold="v1", baseline="flat")
        assert not at.exception and "version **v1**" in "\n".join(c.value for c in at.caption)


def test_what_if_on_k_across_the_run(app):
    """golden q1's one gold unit, m04, is built to rank below BM25's k = 36 seeds and is found by discovery: the
    run's curve says the variant found 1 of 1 at k = 36 and BM25 alone would need a k over 36."""
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    at.selectbox(key="whatif_variant").set_value("full").run()
    assert not [c for c in at.caption if "gold units at k" in c.value]  # built only on request
    at.toggle(key="whatif_on").set_value(True).run()
    assert not at.exception
    caption = next(c.value for c in at.caption if "gold units at k" in c.value).replace("\\", "")  # md escapes
    found = re.search(r"found 100\.0% of 1 gold units at k = 36; BM25 alone needs k = (\d+)", caption)
    assert found and int(found.group(1)) > 36, caption
    curve = next(m.value for m in at.markdown if 'aria-label="what-if on k"' in m.value)  # drawn as SVG
    assert "variant at k = 36: 100.0%" in curve


def test_what_if_on_k_stays_open_and_starts_on_the_sidebars_variant(app):
    """Issue 42, item 4: switching the what-if on folded its expander, and it defaulted to `flat` (whose k is
    trivially 36); now it keeps its open state and starts on the sidebar's variant."""
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    assert at.selectbox(key="whatif_variant").value == at.selectbox(key="variant").value == "full"
    at.session_state["whatif_open"] = True  # the reviewer opens it
    at.run()
    at.toggle(key="whatif_on").set_value(True).run()
    assert not at.exception and at.session_state["whatif_open"] is True
    whatif = next(x for x in at.expander if x.label.startswith("What-if on k"))
    assert whatif.proto.id.endswith("whatif_open"), "a keyed expander: the browser keeps it open across reruns"


def test_an_annotation_opens_with_its_saved_label_and_note_is_confirmed_and_shows_on_the_question_page(app):
    """Issue 42, item 4: a re-opened annotated row showed the default label ("anchor miss", even on a window-miss
    row) and an empty note, saving gave no confirmation, and the note never reached the Question page."""
    at = _select(app(FAILURES, corpus="golden", run=APP_RUN_ID))
    record = _table(at).iloc[0]
    attributed = record["failure"] if record["failure"] in at.selectbox(key="note_label").options else "other"
    assert at.selectbox(key="note_label").value == attributed, "an unannotated row opens on its attributed stage"
    assert at.text_area(key="note_text").value == ""
    at.selectbox(key="note_label").set_value("gold wrong")
    at.text_area(key="note_text").input("the gold names the old date")
    at.text_input(key="note_author").input("rev")
    at.button(key="FormSubmitter:annotate-Save the annotation").click().run()
    assert not at.exception
    assert any("Saved: gold wrong by rev — the gold names the old date." in s.value.replace("\\", "")
               for s in at.success), "confirmed on save"
    _select(at, 1)  # another row, then back: the form holds what was saved, not the defaults
    assert at.text_area(key="note_text").value == ""
    _select(at, 0)
    assert at.selectbox(key="note_label").value == "gold wrong"
    assert at.text_area(key="note_text").value == "the gold names the old date"
    ref = {"trace_variant": record["variant"], "trace_config": record["config_hash"],
           "trace_backend": record["backend"]}
    question = app(corpus="golden", scope=record["scope"], q=record["question_id"], **ref)
    notes = [i.value.replace("\\", "") for i in question.info if "Reviewer's note" in i.value]
    assert notes and "gold wrong" in notes[0] and "the gold names the old date" in notes[0] and "rev" in notes[0]


def test_a_selected_failure_shows_its_question_gold_answer_and_missing_messages(app):
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    table = _table(at)
    row = next(i for i, m in enumerate(table["missing units"]) if m != "—")
    at = _select(at, row)
    shown = "\n".join(m.value for m in at.markdown).replace("\\", "")
    assert f"**Question:** {table['question'].iloc[row]}" in shown and "**Gold answer:**" in shown
    missing = next(d.value for d in at.dataframe if list(d.value.columns[:2]) == ["id", "timestamp"]
                   or "text" in d.value.columns and "failure" not in d.value.columns and "author" in d.value.columns)
    assert set(missing["id"]) <= set(table["missing units"].iloc[row].replace(";", " or ").split(" or ")) | {""}
    assert missing["text"].str.len().min() > 0


def test_keyboard_review(app):
    at = _select(app(FAILURES, corpus="golden", run=APP_RUN_ID))
    assert at.button(key="fail_open").proto.shortcut.lower() == "o"
    submit = at.button(key="FormSubmitter:annotate-Save the annotation")
    assert submit.proto.shortcut.lower() in ("mod+enter", "ctrl+enter", "cmd+enter")


def test_search_across_the_stored_traces(app):
    """Issue 42, item 7: rows whose stored trace holds a text (a word of a message in its context, here)."""
    at = app(FAILURES, corpus="golden", run=APP_RUN_ID)
    everything = len(_table(at))
    at.text_input(key="fsearch").input("launch").run()
    assert not at.exception and len(_table(at)) == everything  # golden q1 asks about the launch: every row
    at.text_input(key="fsearch").input("no-such-word-anywhere").run()
    assert not at.exception and len(_table(at)) == 0
