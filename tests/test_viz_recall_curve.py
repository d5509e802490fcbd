"""Recall view model (tmem.viz.batch.recall_curve) and page: the budget-matched table and the recall-vs-messages curve
from a file written by `python -m tmem recall --out`."""
import json
import re

import pytest

from tmem.cli import main as cli
from tmem.viz.batch import recall_curve as view


@pytest.fixture
def recall_file(tmp_path, monkeypatch):
    from tmem.demo.golden import GOLD, MESSAGES, QUESTION, SCOPE
    from tmem.store import CorpusData, Store

    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    db = tmp_path / "g.duckdb"
    Store(db).replace_corpus("golden", CorpusData(MESSAGES, [QUESTION], [(SCOPE, GOLD)]), format="test")
    out = tmp_path / "recall" / "golden.json"
    assert cli(["recall", "--db", str(db), "--corpus", "golden", "--k", "12,36", "--budgets", "12,48", "--quiet",
                "--out", str(out)]) == 0
    return out


def test_table_and_figure(recall_file):
    body = view.load(recall_file)
    run = body["runs"][1]
    assert run["k"] == 36 and view.splits(run) == ["all"]
    table = view.matched_table(run)
    assert list(table["method"]) == ["tmem", "bm25@tmem", "embedding@tmem", "global-control@tmem"]
    assert set(table["mean messages"]) == {37.0}
    svg = view.curve_svg(run, "all")
    points = re.findall(r"<title>([^<·]+) · budget [^:]+: ([\d.]+) messages, recall ([\d.]+)</title>", svg)
    lines = {}
    for name, messages, recall in points:  # each method's points in order
        lines.setdefault(name, []).append((float(messages), float(recall)))
    assert list(lines) == ["bm25", "embedding", "tmem", "global-control"] and "T-Mem R'(q): 37.0 messages" in svg
    # k itself joins the budgets
    assert [m for m, _ in lines["tmem"]] == [12.0, 36.0, 37.0] and [r for _, r in lines["bm25"]] == [0.0, 0.0, 0.0]


def test_bad_files_name_the_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match=r"x.json: no 'runs'"):
        view.load(bad)
    bad.write_text(json.dumps({"runs": [{"k": 36}]}))
    with pytest.raises(ValueError, match=r"runs\[0\] has no 'budget'"):
        view.load(bad)
    bad.write_text("not json")
    with pytest.raises(ValueError, match="not a readable recall file"):
        view.load(bad)


@pytest.mark.app
def test_recall_page(app, recall_file, monkeypatch):
    monkeypatch.setattr(view, "RECALL_DIR", recall_file.parent)
    at = app("pages/recall.py", recall_k="36")
    assert not at.exception
    curve = next(m.value for m in at.markdown if 'aria-label="recall against messages"' in m.value)
    names = re.findall(r"<title>([^<·]+) · budget", curve)
    assert list(dict.fromkeys(names)) == ["bm25", "embedding", "tmem", "global-control"]
    assert "k = 36, split all" in curve
    table = next(d.value for d in at.dataframe if "method" in d.value.columns)
    assert "global-control@tmem" in set(table["method"])
    # the why view: the golden unit is found by both sides, so no row differs until every question is shown
    why = next(d.value for d in at.dataframe if "windows only" in d.value.columns)
    assert why.empty
    at.toggle(key="recall_why_all").set_value(True).run()
    why = next(d.value for d in at.dataframe if "windows only" in d.value.columns)
    assert list(why["both"]) == [1] and "> μ" in why["rates beaten"][0]


def test_why_table_by_hand():
    run = {"budget": {"splits": {"all": {"scopes": ["a", "b"]}, "dev": {"scopes": ["a"]}},
                      "why": [{"question": "q1", "group": "a", "units": 2, "windows_only": ["m1"], "global_only": [],
                               "both": 1, "messages": 40, "rejected_clusters": 2,
                               "unit": "message", "windows": [["conv-1", 2, 0.5, 0.3246, 0.15, 40]]},
                              {"question": "q2", "group": "b", "units": 1, "windows_only": [], "global_only": ["m9"],
                               "both": 0, "messages": 30, "windows": []}]}}
    assert view.why_summary(run, "all") == {"questions": 2, "windows only": 1, "global only": 1, "both": 1}
    assert view.why_summary(run, "dev") == {"questions": 1, "windows only": 1, "global only": 0, "both": 1}
    table = view.why_table(run, "all")
    assert list(table["question"]) == ["q1", "q2"]
    assert table["rates beaten"][0] == "conv-1: ρ 0.5 > μ* 0.325 (background 0.15/message)"
    assert view.why_summary({"budget": {"splits": {"all": {"scopes": []}}}}, "all")["questions"] == 0


@pytest.mark.app
def test_the_recall_page_says_when_and_with_what_its_figures_were_made(app, recall_file, monkeypatch):
    """Issue 42, item 7: run metadata (date, commit, backend) on Recall."""
    monkeypatch.setattr(view, "RECALL_DIR", recall_file.parent)
    body = view.load(recall_file)
    assert body["created_at"].endswith("UTC")  # the command records when it ran
    at = app("pages/recall.py", recall_k="36")
    run = next(c.value for c in at.caption if c.value.startswith("Run:")).replace("\\", "")
    assert f"written {body['created_at']}" in run and "commit not recorded" in run
    assert "answer: offline:extractive-answerer" in run or "offline" in run


@pytest.mark.app
def test_the_recall_page_of_the_demo_says_its_figures_are_the_generated_corpus(app, recall_file, monkeypatch):
    """Issue 42 item 6: every figure shown on the demo says "generated demo corpus, n = ..." (Compare and Sweep did;
    the shipped demo recall file's curve did not); another corpus's file says nothing of the kind."""
    body = view.load(view.RECALL_DIR / "demo.json")
    assert body["corpus"] == "demo"
    at = app("pages/recall.py", recall_file="demo.json", recall_k=str(body["runs"][0]["k"]))
    table = next(d.value for d in at.dataframe if "method" in d.value.columns)
    n = int(table.loc[table["split"] == "all", "questions"].max())
    assert n == 40 and [i.value for i in at.info if i.value.startswith(f"Generated demo corpus, n = {n} questions")]
    monkeypatch.setattr(view, "RECALL_DIR", recall_file.parent)
    at = app("pages/recall.py", recall_k="36")
    assert not [i.value for i in at.info if "enerated demo corpus" in i.value]
