"""Static SVG pictures of one trace for the HTML report, which runs no script: the anchor timeline (clusters as
bands, padded windows, anchors, recovered messages, gold evidence) and the evidence forest (the layout of the
app's interactive graph, tmem.viz.question.forest_view: time left to right, lanes by topic). Hovering an element shows
its <title> text (browsers do this without scripts). Every text comes from message data and goes through `esc`.
"""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from tmem.types import EXPAND, UPDATE, ForestNode, Gold, Trace
from tmem.viz.question.evidence import statuses
from tmem.viz.question.forest import BORDER, FILL, node_title
from tmem.viz.question.forest_view import changed_words, forest_view
from tmem.viz.question.timeline import COLORS, OTHER, _lane_value, lanes_for
from tmem.viz.safe import esc, shorten

NODE_W, NODE_H = 164, 58  # within forest_view's X_STEP x ROW_H cells (180 x 84), so boxes never overlap
STRIP_W, STRIP_H = 118, 40  # within its STRIP_STEP x STRIP_ROW cells (130 x 58)
LABEL_CHARS, STRIP_CHARS = 26, 19  # characters per label line at 11 px in those boxes
MARGIN, TOP = 12, 34  # px around the drawing; above the first lane for the day ticks
EDGE_SVG = {UPDATE: ("#d62728", 3, ""), EXPAND: ("#1f77b4", 2, "8 6")}
OTHER_EDGE_SVG = ("#8c8c8c", 1.5, "2 5")
LANE_FILL = ("#eef2f7", "#ffffff")
STRIP_NOTE = "single messages (no parent, no child), in time order"


def _svg(width: float, height: float, body: list[str], label: str, natural: bool = False) -> str:
    """`natural`: drawn at its own pixel size (the caller scrolls it), else scaled down to the page's width."""
    size = f'width="{width:.0f}" height="{height:.0f}"' if natural else 'width="100%"'
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{esc(label)}" {size} '
            f'viewBox="0 0 {width:.0f} {height:.0f}" style="max-width:{width:.0f}px;font-family:sans-serif">'
            + "".join(body) + "</svg>")


def _lines(text: str, width: int, count: int) -> list[str]:
    """The message's first words wrapped into at most `count` lines of `width` characters (… where cut)."""
    lines: list[str] = []
    for word in (text or "").split():
        if lines and len(f"{lines[-1]} {word}") <= width:
            lines[-1] = f"{lines[-1]} {word}"
        elif len(lines) < count and len(word) <= width:
            lines.append(word)
        else:  # no room left: end on "…" after the last whole word (a word longer than a line is cut)
            if not lines or (len(lines) < count and len(word) > width):
                lines.append(word[: width - 1] + "…")
            else:
                lines[-1] = (lines[-1] if len(lines[-1]) < width else lines[-1][: width - 1]) + "…"
            break
    return lines or [""]


def _text(x: float, y: float, text: str, size: int = 11, fill: str = "#111", anchor: str = "middle",
          weight: str = "normal") -> str:
    return (f'<text x="{x:.0f}" y="{y:.0f}" font-size="{size}" fill="{fill}" text-anchor="{anchor}" '
            f'font-weight="{weight}">{esc(text)}</text>')


def _edge(parent: tuple[float, float], child: tuple[float, float], relation: str) -> str:
    """Parent's right side to child's left side as a horizontal S-curve (time runs left to right)."""
    (px, py), (cx, cy) = parent, child
    x1, x2 = px + NODE_W / 2, cx - NODE_W / 2
    bend = max((x2 - x1) / 2, 12)
    color, stroke, dash = EDGE_SVG.get(relation, OTHER_EDGE_SVG)
    return (f'<path d="M{x1:.0f} {py:.0f} C{x1 + bend:.0f} {py:.0f} {x2 - bend:.0f} {cy:.0f} {x2:.0f} {cy:.0f}" '
            f'fill="none" stroke="{color}" stroke-width="{stroke}" stroke-dasharray="{dash}" '
            f'marker-end="url(#arrow)"><title>{esc(relation)}</title></path>')


def forest_svg(trace: Trace, gold: Gold | None = None, topics: Mapping[str, str | None] | None = None) -> str:
    """The forest laid out as in the app (tmem.viz.question.forest_view, its *All trees* view: a static report cannot
    switch): time left to right, one band per topic with its name, day ticks above; one-message trees in a strip
    below. Each box shows the message's first words over author and time, ★ on the answer chain; UPDATE edges solid
    red, EXPAND dashed blue, other edges dotted grey; fill blue = anchor, orange = recovered; thick green border =
    gold; dashed border = compressed. Drawn at its natural size in a horizontally scrolling box."""
    if not trace.nodes:
        return "<p><i>no forest in this variant</i></p>"
    marks = statuses(trace, gold)
    topics = topics or {}
    view = forest_view(trace, gold, topics, show_all=True)
    strip = set(view.strip)
    xs = [x for x, _ in view.positions.values()]
    x0 = min(xs) - NODE_W / 2 - MARGIN
    y0 = min([ln.top for ln in view.lanes] or [view.strip_top - 24]) - TOP
    pos = {i: (x - x0, y - y0) for i, (x, y) in view.positions.items()}
    width = max(xs) - x0 + NODE_W / 2 + MARGIN
    height = max(y for _, y in pos.values()) + NODE_H / 2 + MARGIN
    body = ['<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="#666"/></marker></defs>']
    for k, lane in enumerate(view.lanes):
        body.append(f'<rect x="0" y="{lane.top - y0:.0f}" width="{width:.0f}" height="{lane.bottom - lane.top:.0f}" '
                    f'fill="{LANE_FILL[k % 2]}"/>'
                    + _text(6, lane.top - y0 + 17, shorten(lane.name, 60), 13, "#33415c", "start", "bold"))
    for x, day in view.ticks:
        body.append(_text(x - x0, TOP - 12, day, 12, "#7a8599"))
    if view.strip:
        body.append(_text(6, view.strip_top - y0 - 8, STRIP_NOTE, 12, "#7a8599", "start"))
    for n in trace.nodes:
        if n.parent_index and n.index not in strip and n.parent_index not in strip:
            body.append(_edge(pos[n.parent_index], pos[n.index], n.relation))
    text_of = {n.index: n.text for n in trace.nodes}
    for n in trace.nodes:
        body.append(_node(n, pos[n.index], marks, n.index in strip, n.index in view.chain, topics.get(n.message_id),
                          text_of.get(n.parent_index) if n.relation == UPDATE else None))
    return ('<div style="overflow-x:auto">' + _svg(width, height, body, f"evidence forest of {len(trace.nodes)} "
                                                   "messages", natural=True) + "</div>")


def _node(n: ForestNode, at: tuple[float, float], marks, small: bool, chain: bool, topic: str | None,
          before: str | None = None) -> str:
    x, y = at
    w, h = (STRIP_W, STRIP_H) if small else (NODE_W, NODE_H)
    origin = "anchor" if n.message_id in marks.anchors else "recovered"
    is_gold = n.message_id in marks.gold
    border = 4 if is_gold else (2.5 if chain else 1.5)
    dash = "5 4" if n.message_id in marks.compressed else ""
    shown = changed_words(n.text, before, 40, 400) if before else n.text  # an UPDATE: the changed value first
    head = _lines(n.text, STRIP_CHARS, 1) if small else _lines(("★ " if chain else "") + shown, LABEL_CHARS, 2)
    when = f"{shorten(n.author or '?', 12 if small else 16)} · {n.timestamp:%b} {n.timestamp.day} {n.timestamp:%H:%M}"
    top = y - h / 2
    texts = [_text(x, top + 15 + 13 * k, line, 10 if small else 11) for k, line in enumerate(head)]
    texts.append(_text(x, y + h / 2 - 7, when, 9 if small else 10, "#555"))
    return (f'<g><title>{esc(node_title(n, marks.of(n.message_id), topic))}</title>'
            f'<rect x="{x - w / 2:.0f}" y="{top:.0f}" width="{w}" height="{h}" rx="4" fill="{FILL[origin]}" '
            f'stroke="{BORDER["gold" if is_gold else origin]}" stroke-width="{border}" stroke-dasharray="{dash}"/>'
            + "".join(texts) + "</g>")


def timeline_svg(trace: Trace, messages: pd.DataFrame, gold: Gold | None = None, lane: str = "topic") -> str:
    """The anchor timeline around the evidence: one lane per topic (or channel); accepted clusters as green bands,
    rejected as grey, padded windows as dashed outlines; anchors as blue dots sized by BM25 score, recovered
    messages as orange diamonds, gold evidence as green ticks."""
    marks = statuses(trace, gold)
    shown = marks.anchors | marks.recovered | marks.gold
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
        if r.id in marks.gold:
            body.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{cy - 15:.0f}" y2="{cy + 15:.0f}" '
                        f'stroke="{COLORS["gold"]}" stroke-width="2">{title}</line>')
        if r.id in marks.anchors:
            radius = 3 + 5 * scores[r.id] / top
            body.append(f'<circle cx="{cx:.1f}" cy="{cy:.0f}" r="{radius:.1f}" fill="{COLORS["anchor"]}" '
                        f'fill-opacity="0.75">{title}</circle>')
        elif r.id in marks.recovered:
            body.append(f'<path d="M{cx:.1f} {cy - 6:.0f} l6 6 l-6 6 l-6 -6 z" fill="{COLORS["recovered"]}">'
                        f"{title}</path>")
    body.append(f'<text x="{left}" y="{height - 4}" font-size="10" fill="#555">{t0:%Y-%m-%d %H:%M}</text>'
                f'<text x="{left + width}" y="{height - 4}" font-size="10" fill="#555" text-anchor="end">'
                f"{t1:%Y-%m-%d %H:%M}</text>")
    return _svg(left + width + 10, height, body, "anchor timeline")

