"""AppTest: the Sweep view: a heat-map over two swept parameters with the paper's default cell
marked, a line over one, and a cell opening its questions under exactly its configuration."""
from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pytest

from tmem.cli import main as cli

pytestmark = pytest.mark.app  # every test here runs the explorer under AppTest

SWEEP = "pages/sweep.py"
TWO = "full: retrieval.k x discovery.eps_hours"


@pytest.fixture
def swept(app_db):
    base = ["sweep", "--db", str(app_db), "--corpus", "golden", "--offline", "--quiet"]
    assert cli([*base, "--grid", "retrieval.k=12,36", "--grid", "discovery.eps_hours=6,12"]) == 0
    assert cli([*base, "--grid", "discovery.pad_hours=6,12,24", "--name", "pad"]) == 0
    return app_db


def _charts(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_two_parameters_make_a_heatmap_with_the_paper_default_marked(app, swept):
    at = app(SWEEP, corpus="golden", sweep=TWO)
    assert not at.exception
    (spec,) = _charts(at)
    heat = next(d for d in spec["data"] if d["type"] == "heatmap")
    assert heat["x"] == ["12", "36"] and heat["y"] == ["6.0", "12.0"]  # k across, eps down, values sorted
    assert len(heat["z"]) == 2 and all(len(r) == 2 for r in heat["z"])
    starred = [(i, j) for i, r in enumerate(heat["text"]) for j, t in enumerate(r) if "★" in t]
    assert starred == [(1, 1)]  # k = 36 and eps = 12 h: the paper's values
    assert [s["type"] for s in spec["layout"]["shapes"]] == ["rect"]
    opener = next(d for d in spec["data"] if d["type"] == "scatter")  # the clickable layer over the cells
    assert sorted(opener["customdata"]) == sorted(c for r in heat["customdata"] for c in r)
    table = next(d.value for d in at.dataframe if "paper default" in d.value.columns)
    assert list(table["paper default"]) == ["—", "—", "—", "★"]  # a mark, not True / False


def test_one_parameter_makes_a_line_with_the_default_as_a_dashed_line(app, swept):
    at = app(SWEEP, corpus="golden", sweep="pad")
    assert not at.exception
    (spec,) = _charts(at)
    line = spec["data"][0]
    assert line["type"] == "scatter" and line["x"] == [6.0, 12.0, 24.0] and len(line["y"]) == 3
    assert any(s.get("line", {}).get("dash") == "dash" and s["x0"] == 12.0 for s in spec["layout"]["shapes"])


def test_a_cell_opens_its_questions_under_its_configuration(app, swept):
    cell = "discovery.eps_hours=6.0,retrieval.k=12"
    at = app(SWEEP, corpus="golden", sweep=TWO, cell=cell)
    assert not at.exception and at.selectbox(key="cell").value == cell
    questions = next(d.value for d in at.dataframe if "open" in d.value.columns)
    assert list(questions["question_id"]) == ["q1"]
    query = parse_qs(urlparse(questions["open"][0]).query)
    assert query["q"] == ["q1"] and query["variant"] == ["full"] and query["corpus"] == ["golden"]
    assert set(query["cfg"][0].split(",")) == {"discovery.eps_hours=6.0", "retrieval.k=12"}


def test_without_a_sweep_the_page_says_how_to_make_one(app):
    at = app(SWEEP, corpus="golden")
    assert not at.exception and any("python -m tmem sweep" in i.value for i in at.info)


def test_sweep_tables_show_no_raw_values(app, swept):
    from test_app_review import assert_readable

    at = app(SWEEP, corpus="golden", sweep=TWO, cell="discovery.eps_hours=6.0,retrieval.k=12")
    assert not at.exception and len(at.dataframe) == 2
    for element in at.dataframe:
        assert_readable(element.value, "Sweep")


def test_a_sweep_being_measured_shows_its_progress_not_a_silent_partial_map(app, swept):
    """Issue 43: a `python -m tmem sweep` measuring now (here: a progress row of this live process) is shown with its
    progress above the map its cells fill; one whose process is gone is not."""
    import os
    import socket
    from datetime import datetime, timedelta

    from tmem.store import Store

    store = Store(swept)
    store.save_sweep_progress("golden", "pad", os.getpid(), socket.gethostname(), 3, 12,
                              datetime.now() - timedelta(seconds=40))
    store.save_sweep_progress("golden", "dead", 2 ** 22 + 7, socket.gethostname(), 1, 9, datetime.now())
    store.close()
    at = app(SWEEP, corpus="golden", sweep="pad")
    assert not at.exception
    shown = [p.proto.text.replace("\\", "") for p in at.get("progress")]
    assert len(shown) == 1 and shown[0].startswith("Sweep pad: running — 3/12 (cell, question) pairs measured (25%)")
    assert "redraws when it ends" in shown[0]


def test_the_roles_read_as_words_not_a_pipe_joined_label(app, swept):
    """Issue 42, item 8: role strings were pipe-joined on Sweep."""
    at = app("pages/sweep.py", corpus="golden")
    roles = next(c.value for c in at.caption if "roles" in c.value).replace("\\", "")
    assert "answer: offline:extractive-answerer" in roles and "judge: offline:lexical-judge" in roles
    assert "|" not in roles


def test_at_1100_px_the_title_is_the_metric_and_the_metric_box_has_a_row(app, swept):
    """Issue 42, 1100 px: the chart's one-line title carried the legend's sentence and was cut; the Metric box
    shared a row with the two axes and cut its label. The title is the metric; the legend is a caption (it wraps);
    the Metric box is alone on its row (tests/test_browser_layout.py checks both in a browser)."""
    from tmem.viz.batch.sweep import HEATMAP_LEGEND, METRICS

    at = app(SWEEP, corpus="golden", sweep=TWO)
    assert not at.exception
    (spec,) = _charts(at)
    assert spec["layout"]["title"]["text"] == METRICS["recall"][0]
    assert any(c.value == HEATMAP_LEGEND for c in at.caption) and "within noise" in HEATMAP_LEGEND
    rows = [b for b in at.main.children.values() if b.type == "flex_container"]  # st.columns -> horizontal blocks
    boxes = [[w.label for w in r.get("selectbox")] for r in rows if r.get("selectbox")]
    assert ["x axis", "y axis"] in boxes and not any("Metric" in b for b in boxes)
    table = next(d.value for d in at.dataframe if "paper default" in d.value.columns)  # the figures before the key
    assert list(table.columns)[:4] == ["paper default", "retrieval.k", "discovery.eps_hours", "questions"]
    assert list(table.columns)[-1] == "cell" and list(table.columns).index("recall") < len(table.columns) - 1
