"""AppTest: the Structuring page (expected vs built edges per stored trace, the wrong ones first)."""
from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.app  # every test here runs the explorer under AppTest

STRUCTURING = "pages/structuring.py"

RECORDS = [
    ("M1", "2025-03-10T09:00:00", "U1", "Code freeze Thursday 18:00 for release 4.2.", None),
    ("M2", "2025-03-11T09:00:00", "U2", "Thursday is too early for the 4.2 code freeze, the suite is red?", "M1"),
    ("M3", "2025-03-12T09:00:00", "U1", "OK, the 4.2 code freeze moves to Tuesday 18:00 <b>instead</b>.", "M2"),
    ("M4", "2025-03-13T09:00:00", "U3", "4.2 code freeze checklist: nothing merges after the freeze on Tuesday.", None),
]
SIDECAR = [("M1", None, "ROOT"), ("M2", "M1", "EXPAND"), ("M3", "M1", "UPDATE"), ("M4", "M3", "EXPAND")]


def _case_corpus(app_db, tmp_path, variant="full"):
    """A one-scope GroupMemBench-layout case with a gold_edges.jsonl sidecar and one stored offline trace."""
    from tmem import api
    from tmem.corpora.imports import import_corpus
    from tmem.store import Store

    root = tmp_path / "case"
    folder = root / "data" / "final" / "Freeze"
    folder.mkdir(parents=True)
    channel = [{"msg_node": i, "content": text, "author": a, "timestamp": t, "reply_to": r, "topic": "freeze"}
               for i, t, a, text, r in RECORDS]
    channel += [{"msg_node": f"F{i}", "content": f"Lunch order {i} for the offsite is in the sheet.", "author": "U9",
                 "timestamp": f"2025-03-1{i}T12:00:00", "reply_to": None, "topic": "misc"} for i in range(8)]
    (folder / "synthetic_domain_channels_rolevariants_Freeze.json").write_text(json.dumps({"release": channel}))
    (root / "questions" / "Freeze").mkdir(parents=True)
    (root / "questions" / "Freeze" / "knowledge_update.jsonl").write_text(json.dumps(
        {"id": "ku1", "question": "When is the 4.2 code freeze?", "answer": "Tuesday 18:00"}) + "\n")
    (root / "gold_edges.jsonl").write_text("".join(json.dumps({"scope": "Freeze", "child": c, "parent": p,
                                                               "relation": r}) + "\n" for c, p, r in SIDECAR))
    store = Store(app_db)
    import_corpus(store, "groupmembench", root, corpus="case")
    question, gold = api.stored_question(store, "case", "ku1")
    config = api.resolve_config(variant, "retrieval.k=4")
    from tmem.models.offline import offline_roles

    api.run_and_store(store, "case", question, variant, config, offline_roles(), gold)
    store.close()


def test_expected_vs_built_edges(app, app_db, tmp_path):
    _case_corpus(app_db, tmp_path)
    at = app(STRUCTURING, corpus="case")
    assert not at.exception
    summary, confusion, edges, near = (d.value for d in at.dataframe)
    assert list(summary["question"]) == ["ku1"] and summary.loc[0, "scored"] >= 3
    # the corpus's confusion (one stored trace: its scored children), gold x built split by right / wrong parent
    assert list(confusion.columns) == ["gold", "ROOT", "EXPAND right parent", "EXPAND wrong parent",
                                       "UPDATE right parent", "UPDATE wrong parent"]
    assert confusion.drop(columns="gold").to_numpy().sum() == summary.loc[0, "scored"] == len(edges)
    right_cells = {"ROOT": "ROOT", "EXPAND": "EXPAND right parent", "UPDATE": "UPDATE right parent"}
    assert sum(int(confusion.loc[confusion["gold"] == g, cell].sum()) for g, cell in right_cells.items()) == \
        summary.loc[0, "edges right"]
    # each wrong child's miss class in a column; the caption counts them
    assert set(edges.loc[edges["right"] == "✓", "miss"]) <= {""}
    classes = {"rooted-revision", "expand-not-update", "false-update", "chain-tip", "under-reply", "wrong-parent"}
    assert set(edges.loc[edges["right"] == "✗", "miss"]) <= classes
    misses = edges.loc[edges["right"] == "✗", "miss"].value_counts()
    caption = next(c.value for c in at.caption if c.value.startswith("Misses by class"))
    assert all(f"{name} {n}" in caption for name, n in misses.items())
    # near misses: the fitted role's decisions with the smallest margin to their runner-up, smallest first
    assert len(near) >= 1 and list(near["margin"]) == sorted(near["margin"]) and "runner-up" in near.columns
    assert set(edges.columns) >= {"right", "expected", "built", "expected parent", "built parent", "reason"}
    wrong = edges[edges["right"] == "✗"]
    assert list(edges["right"]) == ["✗"] * len(wrong) + ["✓"] * (len(edges) - len(wrong))  # wrong ones first
    assert summary.loc[0, "edges right"] == len(edges) - len(wrong)
    # message text is shown as plain text in a dataframe cell, markup and all
    assert any("<b>instead</b>" in t for t in edges["child text"])


def test_a_corpus_without_gold_edges_explains_itself(app):
    at = app(STRUCTURING, corpus="golden")  # the golden conversation has no gold edges (the demo has its plan's)
    assert not at.exception and at.info and "no gold edges" in at.info[0].value


def test_each_miss_gets_its_class(app, app_db, tmp_path):
    """The cue-overlap baseline on the Freeze case (measured, then checked by hand against the gold edges): M3, the
    revision, is built as an UPDATE of M2, the challenge replying to M1 (gold: UPDATE of M1, so under a reply); M4 is
    left ROOT (gold EXPAND of M3: wrong parent); M1 and M2 are right."""
    _case_corpus(app_db, tmp_path, "cue-overlap-structuring")
    at = app(STRUCTURING, corpus="case")
    assert not at.exception
    summary, confusion, edges = [d.value for d in at.dataframe][:3]
    assert dict(zip(edges["child"], edges["miss"])) == {"M1": "", "M2": "", "M3": "under-reply", "M4": "wrong-parent"}
    table = confusion.set_index("gold")
    assert table.loc["ROOT", "ROOT"] == 1 and table.loc["EXPAND", "EXPAND right parent"] == 1
    assert table.loc["EXPAND", "ROOT"] == 1 and table.loc["UPDATE", "UPDATE wrong parent"] == 1
    assert table.to_numpy().sum() == 4
    assert any(c.value.startswith("Misses by class: under-reply 1, wrong-parent 1.") for c in at.caption)


def test_at_1100_px_the_scores_lead_and_no_label_is_pipe_joined(app, app_db, tmp_path):
    """Issue 42, 1100 px: the six roles on one line (~300 characters) stood before the score columns and pushed them
    off screen; the question selector and the confusion caption showed the stored "a|b|c" label; the edge table's
    confidence read "0.689000" (a Styler's six places)."""
    _case_corpus(app_db, tmp_path)
    at = app(STRUCTURING, corpus="case")
    assert not at.exception
    summary, _, edges = [d.value for d in at.dataframe][:3]
    columns = list(summary.columns)
    assert columns[:5] == ["question", "variant", "edge accuracy", "UPDATE recall", "UPDATE precision"]
    assert columns[5:] == ["scored", "edges right", "parents right", "scope", "relation role", "roles"]
    assert summary.loc[0, "relation role"] == "offline:revision-first"
    assert not any("|" in str(v) for v in summary.to_numpy().ravel())
    pick = at.selectbox(key="sq")
    assert pick.options == ["ku1 · full · relation: offline:revision-first"] and "|" not in pick.options[0]
    caption = next(c.value for c in at.caption if c.value.startswith("Gold (rows)")).replace("\\", "")
    assert "|" not in caption and "relation: offline:revision-first" in caption
    # three places, as text, like the summary's rates; and so in the rendered (styled) table
    assert all(re.fullmatch(r"\d\.\d{3}", c) for c in edges["confidence"])
    from tmem.viz.question.structuring import highlight_wrong

    html = highlight_wrong(edges).to_html()
    assert all(f">{c}<" in html for c in edges["confidence"]) and not re.search(r"\d\.\d{6}", html)


def test_the_scores_are_kept_across_sessions_and_follow_new_traces(app, app_db, tmp_path):
    """The page scores every stored trace once for all sessions (pages._widgets.shared): a trace stored after the
    first visit shows on the next one, with its own scores, not the kept table of the first."""
    from tmem import api
    from tmem.models.offline import offline_roles
    from tmem.store import Store

    _case_corpus(app_db, tmp_path)
    first = app(STRUCTURING, corpus="case")
    assert not first.exception and list(first.dataframe[0].value["variant"]) == ["full"]
    store = Store(app_db)
    question, gold = api.stored_question(store, "case", "ku1")
    api.run_and_store(store, "case", question, "cue-overlap-structuring",
                      api.resolve_config("cue-overlap-structuring", "retrieval.k=4"), offline_roles(), gold)
    store.close()
    second = app(STRUCTURING, corpus="case")
    summary = second.dataframe[0].value
    assert not second.exception and sorted(summary["variant"]) == ["cue-overlap-structuring", "full"]
    # the cue-overlap trace's own scores (test_each_miss_gets_its_class: 2 of 4 edges right)
    assert summary.set_index("variant").loc["cue-overlap-structuring", "edges right"] == 2
