"""tmem.viz.spans: compressed-span markup, token summary, omitted-gold warnings."""
from __future__ import annotations

from dataclasses import replace

from tmem.viz.spans import omitted_gold, span_markup, token_summary


def _cut(trace, message_id):
    """The trace with every span of one message omitted (as compression would under a tiny budget)."""
    spans = tuple(replace(s, kept=False) if s.message_id == message_id else s for s in trace.spans)
    return replace(trace, spans=spans)


def test_every_node_is_shown_with_its_header(golden_trace):
    trace, gold, _ = golden_trace
    html = span_markup(trace, gold)
    assert html.count("<b>[") == len(trace.nodes)
    assert "UPDATE" in html and "m04" in html


def test_omitted_spans_are_struck_and_gold_cut_is_reported(golden_trace):
    trace, gold, _ = golden_trace
    cut = _cut(trace, "m04")
    html = span_markup(cut, gold)
    assert "<del" in html and "go-live to March 17" in html
    assert omitted_gold(cut, gold) and omitted_gold(cut, gold)[0][0] == "m04"
    assert omitted_gold(trace, gold) == []
    only = span_markup(cut, gold, changed_only=True)
    assert only.count("<b>[") == 1


def test_token_summary(golden_trace):
    trace, _, _ = golden_trace
    summary = token_summary(trace)
    assert summary.before == trace.tokens_before_compression and summary.after == trace.tokens_after_compression
    assert summary.spans == len(trace.spans) and summary.omitted == 0


def test_payloads_are_escaped(evil_trace):
    trace, gold, _ = evil_trace
    html = span_markup(_cut(trace, trace.nodes[0].message_id), gold)
    for raw in ("<img", "<script", "<svg", "<a href"):
        assert raw not in html
    assert "&lt;img src=x onerror=" in html or "&lt;script&gt;" in html
