"""tmem.viz.report: a self-contained, escaped HTML report of one question."""
from __future__ import annotations

import re

import pandas as pd

from tmem.viz.evidence import funnel_table, recovered_table
from tmem.viz.report import question_report


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


def test_report_draws_the_timeline_and_the_forest_as_static_svg(golden_trace):
    trace, gold, _ = golden_trace
    html = _report(golden_trace)
    timeline, forest = re.findall(r"<svg\b.*?</svg>", html, re.DOTALL)
    assert 'aria-label="anchor timeline"' in timeline and f'aria-label="evidence forest of {len(trace.nodes)}' in forest
    # one box per forest node, one line per edge; the UPDATE edge (m02 -> m04) is drawn solid red
    assert forest.count("<rect") == len(trace.nodes)
    assert forest.count("<line") == sum(1 for n in trace.nodes if n.parent_index)
    assert re.search(r'stroke="#d62728"[^>]*><title>UPDATE</title>', forest)
    # the timeline: a band per cluster, a dashed outline per window, a dot per anchor, a tick per gold message
    assert timeline.count("<circle") == len(trace.anchors)
    assert timeline.count('stroke-dasharray="5 3"') == len(trace.windows)
    assert timeline.count('fill-opacity="0.18"') == len(trace.clusters)
    assert timeline.count('stroke="#2b8a3e" stroke-width="2"') == len(gold.evidence_ids)


def test_report_escapes_payloads(evil_trace):
    html = _report(evil_trace)
    for raw in ("<img", "<script", "<svg onload", "<a href", "javascript:window.top.__pwned=3\">"):
        assert raw not in html
    assert html.count("<svg") == 2  # only the report's own two figures
    assert "&lt;" in html


def test_table_headers_escaped_once():
    from tmem.viz.report import table_html

    html = table_html(pd.DataFrame({"<b>&": ["<i>"]}))
    assert "&lt;b&gt;&amp;" in html and "&amp;lt;" not in html and "&lt;i&gt;" in html
