"""tmem.viz.question.spans: compressed-span markup, token summary, omitted-gold warnings."""
from __future__ import annotations

from dataclasses import replace

from tmem.viz.question.spans import omitted_gold, span_markup, token_summary


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


def test_a_what_if_budget_shows_compression_on_the_demo_and_keeps_the_answer_chain(demo_traces):
    """On the demo compression never fires at B = 8,192; re-run alone at a tighter B it omits spans, lists their
    g_q and protections, and the curated question's answer chain (Msg_1497 -> Msg_2100, both gold units) survives."""
    from tmem import api
    from tmem.config import variant_config
    from tmem.models.offline import offline_roles
    from tmem.viz.question.answers import lost_unit
    from tmem.viz.question.spans import span_table, token_summary, whatif

    traces, gold, _ = demo_traces
    trace = traces["full"]
    assert token_summary(trace).omitted == 0 and trace.tokens_before_compression < 8192
    store = api.open_store(":memory:")
    scope = api.open_scope(store, "demo", trace.question.scope)
    budget = trace.tokens_before_compression - 10
    tight = whatif(trace, scope, variant_config("full"), offline_roles().tokens.count, budget)
    summary = token_summary(tight)
    assert summary.omitted > 0 and summary.budget_met and summary.after <= budget
    assert lost_unit(tight, gold) == (), "every gold unit reaches the answer model"
    table = span_table(tight, gold)
    assert set(table["fate"]) == {"kept", "omitted"} and (table["protected"] != "").any()
    omitted = table[table["fate"] == "omitted"]
    assert omitted["g_q per token"].max() <= table[table["fate"] == "kept"]["g_q per token"].max()
    roomy = whatif(trace, scope, variant_config("full"), offline_roles().tokens.count, budget + 200)
    assert token_summary(roomy).omitted == 0
