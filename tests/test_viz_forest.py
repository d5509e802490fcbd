"""tmem.viz.question.forest: deterministic layout, offline page, escaping, node count in the DOM."""
from __future__ import annotations

import json
import re

from tmem.viz.question.forest import forest_height, forest_html, forest_network


def _nodes(trace):
    return re.search(r"nodes = new vis\.DataSet\((\[.*?\])\);", forest_html(trace), re.DOTALL)


def test_page_is_offline_and_hardened(golden_trace):
    trace, gold, _ = golden_trace
    page = forest_html(trace, gold)
    tags = re.findall(r"<(?:script|link|img|iframe)\b[^>]*>", page, re.IGNORECASE)
    assert not [t for t in tags if re.search(r"(src|href)\s*=", t)], "no external resources"
    assert "cdn.jsdelivr" not in page and "cdnjs" not in page and "bootstrap.min" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "vis.Network" in page and len(page) > 300_000  # vis-network inlined from the pyvis package
    assert "<h1>" not in page and "select-node" not in page


def test_node_count_exposed_and_matches_trace(golden_trace):
    trace, gold, _ = golden_trace
    page = forest_html(trace, gold)
    assert f'data-node-count="{len(trace.nodes)}"' in page
    assert f'data-edge-count="{sum(1 for n in trace.nodes if n.parent_index)}"' in page
    data = json.loads(_nodes(trace).group(1))
    assert sorted(d["id"] for d in data) == sorted(n.index for n in trace.nodes)
    assert all(isinstance(d["id"], int) for d in data)


def test_physics_off_and_edges_styled_by_relation(golden_trace):
    trace, gold, _ = golden_trace
    net = forest_network(trace, gold)
    assert json.loads(net.options if isinstance(net.options, str) else json.dumps(net.options))["physics"][
        "enabled"] is False
    styles = {(e["label"], e["color"], str(e["dashes"])) for e in net.edges}
    assert ("UPDATE", "#d62728", "False") in styles
    assert any(label == "EXPAND" and dashes != "False" for label, _, dashes in styles)


def test_gold_and_origin_statuses_in_node_style(golden_trace):
    trace, gold, _ = golden_trace
    net = forest_network(trace, gold)
    m04 = next(n for n in trace.nodes if n.message_id == "m04")
    node = next(d for d in net.nodes if d["id"] == m04.index)
    assert node["borderWidth"] == 4  # gold
    assert node["color"]["background"] == "#ffd8a8"  # recovered, not an anchor
    assert "recovered" in node["title"] and "gold" in node["title"]


def test_payloads_never_reach_the_page_as_markup(evil_trace):
    trace, gold, frame = evil_trace
    page = forest_html(trace, gold, dict(zip(frame["id"], frame["topic"])))
    body = _nodes(trace).group(1)
    assert "<" not in body and ">" not in body  # labels/titles: no raw angle brackets inside the JSON
    data = json.loads(body)
    assert not any("href" in (d.get("title") or "").lower() for d in data)
    assert "tooltip_link" not in page and "popup.innerHTML" not in page  # pyvis' innerHTML tooltip mode is off
    for raw in ("<img src=x", "<svg onload", "<script>window", "<a href=\"javascript", "</script><script>"):
        assert raw not in page  # payloads survive only as inert JSON string text with neutralised brackets
    assert any("‹img src=x" in (d.get("title") or "") for d in data)


def test_height_is_explicit_and_bounded(golden_trace):
    trace, _, _ = golden_trace
    assert 360 <= forest_height(trace) <= 1100
