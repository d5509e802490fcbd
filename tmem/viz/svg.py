"""Static SVG pictures of one trace for the HTML report, which runs no script: the anchor timeline (clusters as
bands, padded windows, anchors, recovered messages, gold evidence) and the evidence forest (the same layout as
the interactive pyvis graph, tmem.viz.forest). Hovering an element shows its <title> text (browsers do this
without scripts). Every text comes from message data and goes through `esc`.
"""
from __future__ import annotations

import pandas as pd

from tmem.types import EXPAND, UPDATE, Gold, Trace
from tmem.viz.evidence import statuses
from tmem.viz.forest import BORDER, FILL, forest_layout, node_title
from tmem.viz.safe import esc, shorten
from tmem.viz.timeline import COLORS, OTHER, _lane_value, lanes_for

NODE_W, NODE_H = 124, 38  # smaller than the layout's X_STEP / Y_STEP, so neighbouring boxes never overlap
EDGE_SVG = {UPDATE: ("#d62728", 3, ""), EXPAND: ("#1f77b4", 2, "8 6")}
OTHER_EDGE_SVG = ("#8c8c8c", 1.5, "2 5")


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{esc(label)}" width="100%" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" style="max-width:{width:.0f}px;font-family:sans-serif">'
            + "".join(body) + "</svg>")


def forest_svg(trace: Trace, gold: Gold | None = None) -> str:
    """The forest: trees left to right by root time, depth downwards; UPDATE solid red, EXPAND dashed blue, other
    edges dotted grey; fill blue = anchor, orange = recovered; thick green border = gold; dashed = compressed."""
    if not trace.nodes:
        return "<p><i>no forest in this variant</i></p>"
    st = statuses(trace, gold)
    layout = forest_layout(trace.nodes)
    x0 = min(x for x, _ in layout.values()) - NODE_W / 2 - 10
    y0 = min(y for _, y in layout.values()) - NODE_H / 2 - 10
    pos = {i: (x - x0, y - y0) for i, (x, y) in layout.items()}
    width = max(x for x, _ in pos.values()) + NODE_W / 2 + 10
    height = max(y for _, y in pos.values()) + NODE_H / 2 + 10
    body = []
    for n in trace.nodes:
        if n.parent_index:
            (px, py), (cx, cy) = pos[n.parent_index], pos[n.index]
            color, stroke, dash = EDGE_SVG.get(n.relation, OTHER_EDGE_SVG)
            body.append(f'<line x1="{px:.0f}" y1="{py + NODE_H / 2:.0f}" x2="{cx:.0f}" y2="{cy - NODE_H / 2:.0f}" '
                        f'stroke="{color}" stroke-width="{stroke}" stroke-dasharray="{dash}">'
                        f"<title>{esc(n.relation)}</title></line>")
    for n in trace.nodes:
        x, y = pos[n.index]
        origin = "anchor" if n.message_id in st.anchors else "recovered"
        is_gold = n.message_id in st.gold
        dash = "5 4" if n.message_id in st.compressed else ""
        body.append(f'<g><title>{esc(node_title(n, st.of(n.message_id)))}</title>'
                    f'<rect x="{x - NODE_W / 2:.0f}" y="{y - NODE_H / 2:.0f}" width="{NODE_W}" height="{NODE_H}" '
                    f'rx="4" fill="{FILL[origin]}" stroke="{BORDER["gold" if is_gold else origin]}" '
                    f'stroke-width="{4 if is_gold else 1.5}" stroke-dasharray="{dash}"/>'
                    f'<text x="{x:.0f}" y="{y - 3:.0f}" font-size="11" text-anchor="middle">'
                    f"{esc(f'{n.index}. ' + shorten(n.author or '?', 14))}</text>"
                    f'<text x="{x:.0f}" y="{y + 12:.0f}" font-size="10" text-anchor="middle" fill="#555">'
                    f"{n.timestamp:%m-%d %H:%M}</text></g>")
    return _svg(width, height, body, f"evidence forest of {len(trace.nodes)} messages")


def timeline_svg(trace: Trace, messages: pd.DataFrame, gold: Gold | None = None, lane: str = "topic") -> str:
    """The anchor timeline around the evidence: one lane per topic (or channel); accepted clusters as green bands,
    rejected as grey, padded windows as dashed outlines; anchors as blue dots sized by BM25 score, recovered
    messages as orange diamonds, gold evidence as green ticks."""
    st = statuses(trace, gold)
    shown = st.anchors | st.recovered | st.gold
    rows = messages[messages["id"].isin(shown)]
    if not len(rows):
        return "<p><i>no evidence messages</i></p>"
    lanes = lanes_for(trace, messages, gold, lane)
    lane_of = {r.id: (v if (v := _lane_value(getattr(r, lane))) in lanes else OTHER) for r in rows.itertuples()}
    times = list(rows["timestamp"]) + [w.start for w in trace.windows] + [w.end for w in trace.windows]
    t0, t1 = min(times), max(times)
    span = max((t1 - t0).total_seconds(), 3600.0)
    left, width, lane_h = 170, 860, 34
    height = 30 + lane_h * len(lanes)
    x = lambda t: left + width * (pd.Timestamp(t) - pd.Timestamp(t0)).total_seconds() / span  # noqa: E731
    y = lambda name: 20 + lane_h * lanes.index(name) + lane_h / 2  # noqa: E731
    body = [f'<text x="4" y="{y(name) + 4:.0f}" font-size="11">{esc(shorten(name, 26))}</text>'
            f'<line x1="{left}" x2="{left + width}" y1="{y(name):.0f}" y2="{y(name):.0f}" stroke="#e9ecef"/>'
            for name in lanes]
    for w in trace.windows:
        name = _lane_value(w.topic) if _lane_value(w.topic) in lanes else OTHER
        body.append(f'<rect x="{x(w.start):.1f}" y="{y(name) - lane_h / 2 + 2:.0f}" '
                    f'width="{max(x(w.end) - x(w.start), 2):.1f}" height="{lane_h - 4}" fill="none" '
                    f'stroke="{COLORS["window"]}" stroke-dasharray="5 3"><title>window {w.window_id}: '
                    f"{w.start:%Y-%m-%d %H:%M} – {w.end:%Y-%m-%d %H:%M}, {w.n_messages} messages</title></rect>")
    for c in trace.clusters:
        name = _lane_value(c.topic) if _lane_value(c.topic) in lanes else OTHER
        fill = "#2ea043" if c.accepted else "#8c8c8c"
        body.append(f'<rect x="{x(c.start):.1f}" y="{y(name) - lane_h / 2 + 5:.0f}" '
                    f'width="{max(x(c.end) - x(c.start), 3):.1f}" height="{lane_h - 10}" fill="{fill}" '
                    f'fill-opacity="0.18" stroke="{fill}"><title>C{c.cluster_id}: {len(c.member_ids)} anchors '
                    f"over {c.span_hours:.1f} h, ρ = {c.density:.2f} "
                    f"{'&gt; μ: window' if c.accepted else '≤ μ: no window'}</title></rect>")
    scores = {a.message_id: a.score for a in trace.anchors}
    top = max(scores.values(), default=1.0) or 1.0
    for r in rows.sort_values("timestamp").itertuples():
        cx, cy = x(r.timestamp), y(lane_of[r.id])
        title = (f"<title>{esc(r.id)} · {r.timestamp:%Y-%m-%d %H:%M} · {esc(r.author)}: "
                 f"{esc(shorten(r.text, 160))}</title>")
        if r.id in st.gold:
            body.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{cy - 15:.0f}" y2="{cy + 15:.0f}" '
                        f'stroke="{COLORS["gold"]}" stroke-width="2">{title}</line>')
        if r.id in st.anchors:
            radius = 3 + 5 * scores[r.id] / top
            body.append(f'<circle cx="{cx:.1f}" cy="{cy:.0f}" r="{radius:.1f}" fill="{COLORS["anchor"]}" '
                        f'fill-opacity="0.75">{title}</circle>')
        elif r.id in st.recovered:
            body.append(f'<path d="M{cx:.1f} {cy - 6:.0f} l6 6 l-6 6 l-6 -6 z" fill="{COLORS["recovered"]}">'
                        f"{title}</path>")
    body.append(f'<text x="{left}" y="{height - 4}" font-size="10" fill="#555">{t0:%Y-%m-%d %H:%M}</text>'
                f'<text x="{left + width}" y="{height - 4}" font-size="10" fill="#555" text-anchor="end">'
                f"{t1:%Y-%m-%d %H:%M}</text>")
    return _svg(left + width + 10, height, body, "anchor timeline")

