"""The evidence forest (paper Sec. 4.3-4.4) as a self-contained, offline pyvis/vis-network page.

Layout is computed here, not by physics, so it is identical on every rerun: trees left to right in the order of
their root timestamps (the linearization order), wrapping into rows like text when there are many; within a tree
leaves take consecutive slots, a parent is centred over its children, depth grows downwards. UPDATE edges are
solid red, EXPAND dashed blue, RELATED dotted grey. Node fill shows how the message got in (BM25 anchor /
recovered by discovery); a thick green border marks gold evidence, a dashed border a node whose text lost spans
to compression. Hovering a node shows the message as plain text.

Safety (see /work/shared/notes): integer node ids; no heading, no select/filter menus; every title and label goes
through `plain_title` so no "href" reaches pyvis (which would switch all tooltips to innerHTML); node and edge
data are JSON-encoded by pyvis' template; vis-network JS/CSS are inlined from the pyvis package, and its
bootstrap CDN tags are stripped; a Content-Security-Policy forbids every network fetch.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence

from pyvis.network import Network

from tmem.types import EXPAND, UPDATE, ForestNode, Gold, Trace
from tmem.viz.evidence import statuses
from tmem.viz.safe import plain_title, shorten

X_STEP, Y_STEP, TREE_GAP, ROW_GAP = 150, 90, 0.4, 30
MIN_SLOTS, MAX_SLOTS, CANVAS = 4, 40, (1100, 1000)  # row lengths tried; the frame the layout is fitted to
FILL = {"anchor": "#d0e2ff", "recovered": "#ffd8a8"}
BORDER = {"anchor": "#1f6feb", "recovered": "#e8590c", "gold": "#2b8a3e"}
EDGE_STYLE = {UPDATE: {"color": "#d62728", "dashes": False, "width": 3},
              EXPAND: {"color": "#1f77b4", "dashes": [8, 6], "width": 2}}
OTHER_EDGE = {"color": "#8c8c8c", "dashes": [2, 5], "width": 1.5}
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
       "font-src data:; connect-src 'none'")
OPTIONS = {
    "physics": {"enabled": False},
    "interaction": {"hover": True, "tooltipDelay": 60, "dragNodes": True, "zoomView": True},
    "nodes": {"shape": "box", "margin": 8, "font": {"size": 12, "face": "sans-serif"},
              "widthConstraint": {"maximum": 150}},
    "edges": {"smooth": {"type": "cubicBezier", "forceDirection": "vertical", "roundness": 0.45},
              "font": {"size": 10, "align": "middle", "strokeWidth": 3}, "arrows": {"to": {"scaleFactor": 0.6}}},
}


def _tree_layout(root: int, children: dict[int, list[int]], depth: dict[int, int]) -> dict[int, tuple[float, int]]:
    """{index: (slot, depth)} of one tree: leaves on consecutive slots, a parent centred over its children."""
    out: dict[int, tuple[float, int]] = {}
    next_slot = 0.0

    def place(index: int) -> float:
        nonlocal next_slot
        kids = children.get(index, [])
        if kids:
            xs = [place(k) for k in kids]
            slot = (xs[0] + xs[-1]) / 2
        else:
            slot, next_slot = next_slot, next_slot + 1
        out[index] = (slot, depth[index])
        return slot

    place(root)
    return out


def forest_layout(nodes: Sequence[ForestNode], row_slots: float | None = None) -> dict[int, tuple[float, float]]:
    """{node index: (x, y)} from the linearized (preorder) nodes. Trees are placed left to right in root-time
    order and wrap into a new row, like text, once a row holds `row_slots` leaves (default: the row length
    that lets the canvas show the nodes largest), so that a forest of many small trees stays readable."""
    if row_slots is None:
        return max((_pack(nodes, float(w)) for w in range(MIN_SLOTS, MAX_SLOTS + 1)), key=_scale)
    return _pack(nodes, row_slots)


def _extent(layout: dict[int, tuple[float, float]]) -> tuple[float, float]:
    """(width, height) in layout pixels, one step of margin included."""
    xs, ys = [x for x, _ in layout.values()] or [0.0], [y for _, y in layout.values()] or [0.0]
    return max(xs) - min(xs) + X_STEP, max(ys) - min(ys) + Y_STEP


def _scale(layout: dict[int, tuple[float, float]]) -> float:
    """How large vis-network will draw the layout when it fits it into a CANVAS-sized frame (ties: fewer rows)."""
    width, height = _extent(layout)
    return min(CANVAS[0] / width, CANVAS[1] / height, 1.0) - height * 1e-9


def _pack(nodes: Sequence[ForestNode], row_slots: float) -> dict[int, tuple[float, float]]:
    children: dict[int, list[int]] = defaultdict(list)
    for n in nodes:
        if n.parent_index:
            children[n.parent_index].append(n.index)
    depth = {n.index: n.depth for n in nodes}
    out: dict[int, tuple[float, float]] = {}
    row_x, row_y, row_depth = 0.0, 0.0, 0
    for root in (n.index for n in nodes if n.parent_index == 0):
        tree = _tree_layout(root, children, depth)
        width = max(s for s, _ in tree.values()) + 1
        if row_x and row_x + width > row_slots:
            row_x, row_y, row_depth = 0.0, row_y + (row_depth + 1) * Y_STEP + ROW_GAP, 0
        out.update({i: ((row_x + s) * X_STEP, row_y + d * Y_STEP) for i, (s, d) in tree.items()})
        row_x += width + TREE_GAP
        row_depth = max(row_depth, max(d for _, d in tree.values()))
    return out


def node_title(node: ForestNode, status: Sequence[str], topic: str | None = None) -> str:
    """Plain-text hover for one node: id, time, author, topic, statuses and the message text."""
    head = f"[{node.index}] {node.message_id} · {node.timestamp:%Y-%m-%d %H:%M} · {node.author or '?'}"
    where = f"topic: {topic}\n" if topic else ""
    return plain_title(f"{head}\n{where}{node.relation} · {', '.join(status) or 'evidence'}\n\n{node.text}")


def forest_network(trace: Trace, gold: Gold | None = None, topics: dict[str, str] | None = None,
                   height: int = 560) -> Network:
    """The pyvis Network of a trace's forest (positions fixed, physics off)."""
    st = statuses(trace, gold)
    topics = topics or {}
    net = Network(height=f"{height}px", width="100%", directed=True, cdn_resources="in_line")
    positions = forest_layout(trace.nodes)
    for n in trace.nodes:
        status = st.of(n.message_id)
        origin = "anchor" if n.message_id in st.anchors else "recovered"
        gold_node = n.message_id in st.gold
        x, y = positions[n.index]
        net.add_node(n.index, label=plain_title(f"{n.index}. {shorten(n.author or '?', 18)}\n"
                                                f"{n.timestamp:%m-%d %H:%M}", 80),
                     title=node_title(n, status, topics.get(n.message_id)), x=x, y=y, physics=False, shape="box",
                     color={"background": FILL[origin], "border": BORDER["gold" if gold_node else origin],
                            "highlight": {"background": "#fff3bf", "border": "#000000"}},
                     borderWidth=4 if gold_node else 1.5,
                     shapeProperties={"borderDashes": [5, 4] if n.message_id in st.compressed else False})
    for n in trace.nodes:
        if n.parent_index:
            style = EDGE_STYLE.get(n.relation, OTHER_EDGE)
            net.add_edge(n.parent_index, n.index, label=plain_title(n.relation, 20), title=plain_title(n.relation),
                         **style)
    net.set_options(json.dumps(OPTIONS))
    return net


_EXTERNAL = re.compile(r"<(link|script)\b[^>]*\b(?:href|src)\s*=\s*[\"']?(?:https?:)?//[^>]*>(\s*</script>)?",
                       re.IGNORECASE)
_HEADING = re.compile(r"<center>\s*<h1>\s*</h1>\s*</center>", re.IGNORECASE)
_DEAD_COMMENT = re.compile(r"<!--(?:(?!-->).)*node_modules(?:(?!-->).)*-->", re.DOTALL)


def harden(page: str, node_count: int, edge_count: int) -> str:
    """Strip CDN tags and empty headings, add the CSP, tooltip CSS and node/edge counts as data attributes."""
    page = _HEADING.sub("", _EXTERNAL.sub("", _DEAD_COMMENT.sub("", page)))
    head = (f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            "<style>div.vis-tooltip{white-space:pre-wrap !important;max-width:420px;font-family:sans-serif;"
            "font-size:12px} body{margin:0} .card{border:none !important}</style>")
    page = page.replace('<meta charset="utf-8">', '<meta charset="utf-8">' + head, 1)
    return page.replace('<div id="mynetwork"',
                        f'<div id="mynetwork" data-node-count="{node_count}" data-edge-count="{edge_count}"', 1)


def forest_html(trace: Trace, gold: Gold | None = None, topics: dict[str, str] | None = None,
                height: int = 560) -> str:
    """The whole forest page: pass it to st.iframe (or save it); it loads nothing from the network."""
    net = forest_network(trace, gold, topics, height)
    page = net.generate_html(notebook=False)
    return harden(page, len(trace.nodes), sum(1 for n in trace.nodes if n.parent_index))


def forest_height(trace: Trace) -> int:
    """An explicit iframe height: the packed layout's height at the scale its width allows, within bounds."""
    width, height = _extent(forest_layout(trace.nodes))
    return int(min(CANVAS[1] + 60, max(360, 60 + height * min(1.0, CANVAS[0] / width))))
