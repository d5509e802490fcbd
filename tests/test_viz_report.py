"""tmem.viz.report.question: a self-contained, escaped HTML report of one question."""
from __future__ import annotations

import html
import re

import pandas as pd
import pytest

from tmem.viz.question.evidence import funnel_table, recovered_table
from tmem.viz.question.forest_view import forest_view
from tmem.viz.report.question import question_report
from tmem.viz.report.svg import forest_svg


def _report(bundle):
    trace, gold, frame = bundle
    return question_report(trace, gold, recovered_table(trace, frame, gold), funnel_table(trace, gold),
                           pd.DataFrame([{"stage": "x", "seconds": 1.0}]),
                           pd.DataFrame([{"role": "answer", "backend": "offline:x", "offline": True}]), frame)


def test_report_is_self_contained(golden_trace):
    html = _report(golden_trace)
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|link|img|iframe)\b", html, re.IGNORECASE)
    assert not re.search(r"(src|href)\s*=", html, re.IGNORECASE)
    assert "default-src 'none'" in html


def test_report_has_every_section(golden_trace):
    html = _report(golden_trace)
    for section in ("Answers", "Evidence funnel", "Anchor timeline", "Recovered messages", "Evidence forest",
                    "Compressed spans", "Linearized context", "Stages", "Backends", "offline stand-in", "March 17"):
        assert section in html, section


def test_report_tables_read_as_words_not_python(golden_trace):
    """Flags read yes / no and empty cells "—" in every table of the report, as in the explorer's tables."""
    page = _report(golden_trace)
    cells = re.findall(r"<td>(.*?)</td>", page, re.DOTALL)
    assert cells and not {c.strip() for c in cells} & {"True", "False", "None", "nan", "()", "[]"}
    assert "<td>yes</td>" in page


def test_report_draws_the_timeline_and_the_forest_as_static_svg(golden_trace):
    trace, gold, _ = golden_trace
    html = _report(golden_trace)
    timeline, forest = re.findall(r"<svg\b.*?</svg>", html, re.DOTALL)
    assert 'aria-label="anchor timeline"' in timeline and f'aria-label="evidence forest of {len(trace.nodes)}' in forest
    # one box per forest node (plus one band per topic lane), one curve per edge; the UPDATE edge (m02 -> m04)
    # is drawn solid red
    view = forest_view(trace, gold, _topics(golden_trace), show_all=True)
    assert len(re.findall(r"<g><title>", forest)) == len(trace.nodes)
    assert forest.count("<rect") == len(trace.nodes) + len(view.lanes)
    assert forest.count("<path d=\"M") - 1 == sum(1 for n in trace.nodes if n.parent_index)  # - the arrow head
    assert re.search(r'stroke="#d62728" stroke-width="3" stroke-dasharray=""[^>]*><title>UPDATE</title>', forest)
    # the timeline: a band per cluster, a dashed outline per window, a dot per anchor, a tick per gold message
    assert timeline.count("<circle") == len(trace.anchors)
    assert timeline.count('stroke-dasharray="5 3"') == len(trace.windows)
    assert timeline.count('fill-opacity="0.18"') == len(trace.clusters)
    assert timeline.count('stroke="#2b8a3e" stroke-width="2"') == len(gold.evidence_ids)


def _topics(bundle):
    return dict(zip(bundle[2]["id"], bundle[2]["topic"]))


def _boxes(svg: str) -> dict[str, tuple[float, float, list[str]]]:
    """{message id: (box centre x, centre y, its label lines)} read back from the SVG."""
    out = {}
    for title, x, y, w, h, texts in re.findall(r'<g><title>\[\d+\] (\S+) .*?</title><rect x="(-?\d+)" '
                                               r'y="(-?\d+)" width="(\d+)" height="(\d+)"[^>]*/>(.*?)</g>', svg,
                                               re.DOTALL):
        out[title] = (float(x) + float(w) / 2, float(y) + float(h) / 2, re.findall(r"<text [^>]*>(.*?)</text>", texts))
    return out


def test_report_forest_uses_the_apps_layout(golden_trace):
    """Issue 12, item 4 in the report: time left to right (a child right of its parent), one band per topic with
    its name, the app's positions (tmem.viz.question.forest_view), labels with the message's first words."""
    trace, gold, _ = golden_trace
    topics = _topics(golden_trace)
    svg = forest_svg(trace, gold, topics)
    assert svg == forest_svg(trace, gold, topics), "deterministic"
    view = forest_view(trace, gold, topics, show_all=True)
    boxes = _boxes(svg)
    assert set(boxes) == {n.message_id for n in trace.nodes}
    by_index = {n.index: n for n in trace.nodes}
    for n in trace.nodes:
        x, y, _ = boxes[n.message_id]
        ax, ay = view.positions[n.index]  # the app's layout, shifted as a whole
        first = trace.nodes[0]
        assert (x - boxes[first.message_id][0], y - boxes[first.message_id][1]) == pytest.approx(
            (ax - view.positions[first.index][0], ay - view.positions[first.index][1]))
        if n.parent_index:
            assert x > boxes[by_index[n.parent_index].message_id][0], "a child is right of its parent"
    names = re.findall(r'font-weight="bold">(.*?)</text>', svg)
    lanes = {topics[n.message_id] or "(no topic)" for n in trace.nodes if n.index not in view.strip}
    assert sorted(names) == sorted(lanes) and names == [lane.name for lane in view.lanes]
    for n in trace.nodes:  # each label is the message's first words, of an UPDATE's the changed words (then "author
        # · time"); the labels of one-message trees in the strip are always first words
        label = html.unescape(" ".join(boxes[n.message_id][2][:-1])).removeprefix("★ ").removesuffix("…")
        text = " ".join(n.text.split())
        if label.startswith("… "):
            assert n.relation == "UPDATE" and n.index not in view.strip, (label, n.text)
            label = label.removeprefix("… ")
            text = text[text.index(label[:12]):] if label[:12] in text else text
        assert label and text.startswith(label), (label, n.text)
        assert html.unescape(boxes[n.message_id][2][-1]).endswith(f"{n.timestamp:%H:%M}")
    assert "overflow-x:auto" in svg  # drawn at a readable size, scrolled sideways


def test_report_escapes_payloads(evil_trace):
    html = _report(evil_trace)
    for raw in ("<img", "<script", "<svg onload", "<a href", "javascript:window.top.__pwned=3\">"):
        assert raw not in html
    assert html.count("<svg") == 2  # only the report's own two figures
    assert "&lt;" in html
    svg = forest_svg(evil_trace[0], evil_trace[1], _topics(evil_trace))  # labels, lane names and titles: escaped
    assert "<script" not in svg and "<img" not in svg and "&lt;" in svg


def test_table_headers_escaped_once():
    from tmem.viz.report.question import table_html

    html = table_html(pd.DataFrame({"<b>&": ["<i>"]}))
    assert "&lt;b&gt;&amp;" in html and "&amp;lt;" not in html and "&lt;i&gt;" in html
