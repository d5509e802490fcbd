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
                           pd.DataFrame([{"role": "answer", "backend": "offline:x", "offline": True}]))


def test_report_is_self_contained(golden_trace):
    html = _report(golden_trace)
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|link|img|iframe)\b", html, re.IGNORECASE)
    assert not re.search(r"(src|href)\s*=", html, re.IGNORECASE)
    assert "default-src 'none'" in html


def test_report_has_every_section(golden_trace):
    html = _report(golden_trace)
    for section in ("Answers", "Evidence funnel", "Recovered messages", "Evidence forest", "Linearized context",
                    "Stages", "Backends", "offline stand-in", "March 17"):
        assert section in html, section


def test_report_escapes_payloads(evil_trace):
    html = _report(evil_trace)
    for raw in ("<img", "<script", "<svg", "<a href", "javascript:window.top.__pwned=3\">"):
        assert raw not in html
    assert "&lt;" in html


def test_table_headers_escaped_once():
    from tmem.viz.report import table_html

    html = table_html(pd.DataFrame({"<b>&": ["<i>"]}))
    assert "&lt;b&gt;&amp;" in html and "&amp;lt;" not in html and "&lt;i&gt;" in html
