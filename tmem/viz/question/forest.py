"""The evidence forest (paper Sec. 4.3-4.4) as a self-contained, offline pyvis/vis-network page.

The layout is computed (`tmem.viz.question.forest_view`), not by physics, so it is identical on every rerun: time left
to right, one lane per topic, by default only the trees that matter for the answer (gold, cited, answer chain) with
one-message trees folded into a strip; it opens fitted to every node of the trees it shows (*Answer chain* zooms
to the chain at a readable scale), and zooms only with its buttons or ctrl + wheel (a plain wheel scrolls the
page). The report's static SVG (`tmem.viz.report.svg`) draws the same
layout.
UPDATE edges are solid red, EXPAND dashed blue, RELATED dotted grey. Node fill shows how the message got in (BM25
anchor / recovered by discovery); a thick green border marks gold evidence, a dashed border a node whose text lost
spans to compression, ★ the answer chain. Hovering a node shows the message as plain text.

Safety (see /work/shared/notes): integer node ids; no heading, no select/filter menus; every title and label goes
through `plain_title` so no "href" reaches pyvis (which would switch all tooltips to innerHTML); node and edge
data are JSON-encoded by pyvis' template; vis-network JS/CSS are inlined from the pyvis package, and its
bootstrap CDN tags are stripped; a Content-Security-Policy forbids every network fetch; lane names reach the
canvas script as JSON with <, > and & escaped and are drawn with fillText (never parsed as HTML).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tmem.types import EXPAND, UPDATE, ForestNode, Gold, Trace
from tmem.viz.question.evidence import statuses
from tmem.viz.question.forest_view import X_STEP as COLUMN
from tmem.viz.question.forest_view import (
    ForestView,
    changed_words,
    edge_routes,
    first_words,
    fit_bounds,
    forest_view,
)
from tmem.viz.safe import esc, plain_title, shorten

if TYPE_CHECKING:
    from pyvis.network import Network

FILL = {"anchor": "#d0e2ff", "recovered": "#ffd8a8"}
BORDER = {"anchor": "#1f6feb", "recovered": "#e8590c", "gold": "#2b8a3e"}
EDGE_STYLE = {UPDATE: {"color": "#d62728", "dashes": False, "width": 3},
              EXPAND: {"color": "#1f77b4", "dashes": [8, 6], "width": 2}}
OTHER_EDGE = {"color": "#8c8c8c", "dashes": [2, 5], "width": 1.5}
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
       "font-src data:; connect-src 'none'")
OPTIONS = {
    "physics": {"enabled": False},
    # zoomView off: vis-network then leaves the mouse wheel alone and the page scrolls over the graph; zooming is
    # the toolbar's buttons or ctrl + wheel (ZOOM_SCRIPT)
    "interaction": {"hover": True, "tooltipDelay": 60, "dragNodes": False, "dragView": True, "zoomView": False},
    "nodes": {"shape": "box", "margin": 7, "font": {"size": 14, "face": "sans-serif"},
              "widthConstraint": {"maximum": 160}},
    "edges": {"smooth": {"type": "cubicBezier", "forceDirection": "horizontal", "roundness": 0.4},
              "font": {"size": 9, "align": "middle", "strokeWidth": 3, "color": "#666"},
              "arrows": {"to": {"scaleFactor": 0.6}}},
}
TOOLBAR_H = 40
# The canvas's height in the app: the window's height less RESERVE px (the app's header, the tab bar, the toolbar,
# a margin), within MIN_CANVAS..MAX_CANVAS px (it was a fixed 380-760 px, 390 px for the demo's curated forest).
RESERVE, MIN_CANVAS, MAX_CANVAS = 150, 420, 1400
READABLE = 0.6  # the least scale the graph opens at: 14 px labels at 8.4 px (fitted to 24 nodes of the demo: 0.3)
WIDTH = 1000  # px: about the main column at a 1600 px window (at 1100 px the fitted view is smaller, still whole)


def node_title(node: ForestNode, status: Sequence[str], topic: str | None = None) -> str:
    """Plain-text hover for one node: id, time, author, topic, statuses and the message text."""
    head = f"[{node.index}] {node.message_id} · {node.timestamp:%Y-%m-%d %H:%M} · {node.author or '?'}"
    where = f"topic: {topic}\n" if topic else ""
    return plain_title(f"{head}\n{where}{node.relation} · {', '.join(status) or 'evidence'}\n\n{node.text}")


def node_label(node: ForestNode, chain: bool, before: str | None = None) -> str:
    """The first words of the message (of an UPDATE, the words after what it shares with the state it replaces:
    the changed value) over "author · date"; ★ marks the answer chain (plain text, see safe.py)."""
    head = ("★ " if chain else "") + (changed_words(node.text, before) if before else first_words(node.text))
    return plain_title(f"{head}\n{shorten(node.author or '?', 16)} · {node.timestamp:%b} {node.timestamp.day} "
                       f"{node.timestamp:%H:%M}", 120)


def forest_network(trace: Trace, gold: Gold | None = None, topics: dict[str, str] | None = None,
                   height: int = 560, show_all: bool = False, view: ForestView | None = None,
                   routes: Mapping[int, tuple[str, float] | None] | None = None) -> Network:
    """The pyvis Network of a trace's forest (positions fixed from `forest_view`, physics off; `routes`: the
    edges' arcs, tmem.viz.question.forest_view.edge_routes)."""
    from pyvis.network import Network  # pyvis (and the IPython it imports: ~0.3 s) loads only when a forest is drawn
    marks = statuses(trace, gold)
    topics = topics or {}
    view = view or forest_view(trace, gold, topics, show_all)
    text_of = {n.index: n.text for n in trace.nodes}
    net = Network(height=f"{height - TOOLBAR_H}px", width="100%", directed=True, cdn_resources="in_line")
    strip = set(view.strip)
    replaced = {n.index: text_of.get(n.parent_index) for n in trace.nodes if n.relation == UPDATE}
    for n in trace.nodes:
        status = marks.of(n.message_id)
        origin = "anchor" if n.message_id in marks.anchors else "recovered"
        gold_node = n.message_id in marks.gold
        x, y = view.positions[n.index]
        small = n.index in strip
        label = plain_title(first_words(n.text, 4, 28), 60) if small else node_label(n, n.index in view.chain,
                                                                                  replaced.get(n.index))
        net.add_node(n.index, label=label, title=node_title(n, status, topics.get(n.message_id)), x=x, y=y,
                     physics=False, shape="box", hidden=n.index in view.hidden,
                     font={"size": 11 if small else 14, "face": "sans-serif", "color": "#555" if small else "#111"},
                     widthConstraint={"maximum": 110 if small else 160},
                     color={"background": FILL[origin], "border": BORDER["gold" if gold_node else origin],
                            "highlight": {"background": "#fff3bf", "border": "#000000"}},
                     borderWidth=4 if gold_node else (2.5 if n.index in view.chain else 1.5),
                     shapeProperties={"borderDashes": [5, 4] if n.message_id in marks.compressed else False})
    routes = edge_routes(trace, view) if routes is None else routes
    for n in trace.nodes:
        if n.parent_index:
            style = EDGE_STYLE.get(n.relation, OTHER_EDGE)
            arc = routes.get(n.index)  # around a node the default curve would pass behind
            net.add_edge(n.parent_index, n.index, label=plain_title(n.relation, 20), title=plain_title(n.relation),
                         **style, **({"smooth": {"type": arc[0], "roundness": arc[1]}} if arc else {}))
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


def _js(value: object) -> str:
    """JSON for an inline script: no "<", ">" or "&" can close the script or open a tag (lane names are data)."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# The buttons keep their one line (at 1100 px "+ zoom in" once wrapped to three); the note takes what is left and
# wraps in a smaller font, the toolbar growing with it (at 1100 px its third line was cut at the canvas's edge).
TOOLBAR = ('<div id="forest-toolbar" style="min-height:{h}px;display:flex;gap:6px;align-items:center;'
           'font:13px sans-serif;color:#444;padding:2px 0;box-sizing:border-box">'
           '<button id="zoom-in" title="Zoom in" style="{b}">+ zoom in</button>'
           '<button id="zoom-out" title="Zoom out" style="{b}">- zoom out</button>'
           '<button id="zoom-answer" title="Back to the answer chain" style="{b}">Answer chain</button>'
           '<button id="zoom-fit" title="Fit every drawn node" style="{b}">Fit all</button>'
           '<span style="margin-left:8px;min-width:0;font-size:12px;line-height:1.25">{note}</span></div>'
           ).replace("{b}", "white-space:nowrap;flex:none")
# Lanes and day ticks are painted on the canvas (not as nodes, so the node count stays the trace's); the view
# opens fitted to every drawn node; ctrl + wheel zooms, a plain wheel scrolls the page.
SCRIPT = """<script>(function () {
  var lanes = %(lanes)s, ticks = %(ticks)s, strip = %(strip)s, focus = %(focus)s, drawn = %(drawn)s;
  /* [left, top, right, bottom] of all drawn, of what it opens on, and of the answer chain and gold with their
     parents and children (opened on instead when the first would be fitted below a readable scale) */
  var whole = %(whole)s, opening = %(opening)s, near = %(near)s;
  var box = document.getElementById("mynetwork");
  /* the canvas takes the height of the window the app is shown in (the page, not a fixed 390 px), within bounds;
     the app's frame follows the content's height. Read from the parent: the frame is same-origin (srcdoc). */
  try {
    var room = window.parent.innerHeight - %(reserve)s;
    var h = Math.round(Math.max(%(least)s, Math.min(%(most)s, room)));
    if (h > 0 && Math.abs(h - box.clientHeight) > 4) {
      box.style.height = h + "px"; network.setSize("100%%", h + "px");
    }
  } catch (e) { /* opened on its own (a saved page): the height it was written with */ }
  network.on("beforeDrawing", function (ctx) {
    var left = %(left)s, right = %(right)s;
    ctx.save();
    lanes.forEach(function (l, i) {
      ctx.fillStyle = i %% 2 ? "#ffffff" : "#eef2f7"; ctx.fillRect(left, l[1], right - left, l[2] - l[1]);
    });
    ctx.fillStyle = "#7a8599"; ctx.font = "13px sans-serif";
    ticks.forEach(function (t) { ctx.fillText(t[1], t[0] - 20, (lanes.length ? lanes[0][1] : 0) - 10); });
    if (strip.length) { ctx.fillStyle = "#7a8599"; ctx.font = "italic 13px sans-serif";
      ctx.fillText(strip[0], left + 8, strip[1] - 8); }
    ctx.restore();
  });
  network.on("afterDrawing", function (ctx) {  /* lane names on top of the nodes, stuck to the left edge */
    var x = Math.max(%(left)s, network.DOMtoCanvas({x: 0, y: 0}).x) + 6;
    ctx.save(); ctx.font = "bold 14px sans-serif";
    lanes.forEach(function (l) {
      var w = ctx.measureText(l[0]).width;
      ctx.fillStyle = "rgba(255,255,255,0.9)"; ctx.fillRect(x - 3, l[1] + 2, w + 6, 19);
      ctx.fillStyle = "#33415c"; ctx.fillText(l[0], x, l[1] + 16);
    });
    ctx.restore();
  });
  function clamp(s) { return Math.max(0.08, Math.min(2.5, s)); }
  function zoom(f) { network.moveTo({position: network.getViewPosition(), scale: clamp(network.getScale() * f)}); }
  function toAnswer() {  /* the answer chain at a readable scale; too long to fit: its latest end in view */
    network.fit({nodes: focus, animation: false});
    var s = network.getScale(), scale = Math.max(0.8, Math.min(1.1, s)), at = network.getViewPosition();
    if (s < scale) {
      var xs = focus.map(function (id) { return network.getPositions([id])[id].x; });
      at = {x: Math.max.apply(null, xs) + 110 - box.clientWidth / scale / 2, y: at.y};
    }
    network.moveTo({position: at, scale: scale});
  }
  document.getElementById("zoom-in").onclick = function () { zoom(1.25); };
  document.getElementById("zoom-out").onclick = function () { zoom(0.8); };
  function scaleFor(b) {
    var pad = 24, w = Math.max(1, b[2] - b[0]) + 2 * pad, hh = Math.max(1, b[3] - b[1]) + 2 * pad;
    return Math.max(0.08, Math.min(1.1, box.clientWidth / w, box.clientHeight / hh));
  }
  function fitBox(b, least) {  /* boxes and arcs inside the canvas, never above a readable 1.1 */
    var s = Math.max(least || 0, scaleFor(b));
    network.moveTo({position: {x: (b[0] + b[2]) / 2, y: (b[1] + b[3]) / 2}, scale: s, animation: false});
  }
  function open() {  /* fitted, unless that is too small to read: then the answer's neighbourhood, readable */
    box.setAttribute("data-placed", "");  /* set in the same task as the move: a state tests wait for */
    if (scaleFor(opening) >= %(readable)s || !near.length) { fitBox(opening); return; }
    fitBox(near, %(readable)s);
  }
  function fitAll() { fitBox(whole); }  /* every drawn node and edge, none of the hidden */
  document.getElementById("zoom-fit").onclick = fitAll;
  document.getElementById("zoom-answer").onclick = toAnswer;
  document.getElementById("mynetwork").addEventListener("wheel", function (e) {
    if (!e.ctrlKey) return;  /* a plain wheel is the page's */
    e.preventDefault(); zoom(e.deltaY < 0 ? 1.1 : 1 / 1.1);
  }, {passive: false});
  /* in a hidden tab the canvas has no size yet: place the view once it first gets one */
  var placed = false;
  function place() {
    if (placed || !box.clientWidth || !box.clientHeight) return;
    placed = true;  /* after vis-network's own resize handler has sized its canvas */
    setTimeout(function () { network.redraw(); open(); }, 80);  /* the shown trees (crowded: those that matter),
                                                                  arcs included, at a scale that can be read */
  }
  new ResizeObserver(place).observe(box);
  place();
})();</script>"""


def forest_html(trace: Trace, gold: Gold | None = None, topics: dict[str, str] | None = None,
                height: int = 560, show_all: bool = False, view: ForestView | None = None) -> str:
    """The whole forest page: pass it to st.iframe (or save it); it loads nothing from the network. `height` is the
    canvas's height until its script sizes it to the window it is shown in; `view`: the layout, when the caller
    has it (forest_height's)."""
    view = view or forest_view(trace, gold, topics, show_all)
    routes = edge_routes(trace, view)  # once: the network's arcs and the fitted bounds below read the same routes
    net = forest_network(trace, gold, topics, height, show_all, view, routes)
    page = harden(net.generate_html(notebook=False), len(trace.nodes), sum(1 for n in trace.nodes if n.parent_index))
    drawn = [view.positions[i] for i in view.positions if i not in view.hidden]
    left = min((x for x, _ in drawn), default=0) - COLUMN * 0.6
    right = max((x for x, _ in drawn), default=0) + COLUMN * 0.6
    note = (f"{len(view.shown_trees)} of {view.all_trees} trees shown" if len(view.shown_trees) < view.all_trees
            else f"all {view.all_trees} trees") + (f" · {len(view.strip)} single messages in the strip below"
                                                    if view.strip else "") + (
        f" · {view.folded_singles} unrelated single messages left out (All trees shows them)"
        if view.folded_singles else "") + " · drag to pan · ctrl + wheel zooms"
    shown = [i for i in view.positions if i not in view.hidden]
    script = SCRIPT % {"lanes": _js([[plain_title(ln.name, 60), ln.top, ln.bottom] for ln in view.lanes]),
                       "ticks": _js([list(t) for t in view.ticks]), "focus": _js(list(view.focus)),
                       "drawn": _js(shown), "whole": _js(list(fit_bounds(trace, view, routes, shown))),
                       "opening": _js(list(fit_bounds(trace, view, routes, view.opens_on or shown))),
                       "near": _js(list(fit_bounds(trace, view, routes, neighbourhood(trace, view))
                                        if neighbourhood(trace, view) else [])), "readable": READABLE,
                       "reserve": RESERVE, "least": MIN_CANVAS, "most": MAX_CANVAS,
                       "strip": _js(["single messages (no parent, no child), in time order", view.strip_top]
                                    if view.strip else []), "left": _js(left), "right": _js(right)}
    page = page.replace('<div id="mynetwork"', TOOLBAR.format(h=TOOLBAR_H, note=esc(note)) + '<div id="mynetwork"', 1)
    page = page.replace('<div id="mynetwork"', f'<div id="mynetwork" data-drawn-count="{view.drawn}" '
                        f'data-tree-count="{view.all_trees}" data-shown-trees="{len(view.shown_trees)}"', 1)
    head, tail = page.rsplit("</body>", 1)
    return head + script + "</body>" + tail


def neighbourhood(trace: Trace, view: ForestView) -> list[int]:
    """The nodes the view focuses on (answer chain, else gold) with their drawn parents and children."""
    focus = set(view.focus)
    around = {n.index for n in trace.nodes if n.index in focus or n.parent_index in focus} | {
        n.parent_index for n in trace.nodes if n.index in focus}
    return [i for i in view.positions if i in around and i not in view.hidden]


def forest_height(trace: Trace, gold: Gold | None = None, topics: dict[str, str] | None = None,
                  show_all: bool = False, view: ForestView | None = None) -> int:
    """An explicit iframe height: the drawn lanes and strip at the scale that fits their width into a main column
    of about WIDTH px (the view opens fitted), within bounds."""
    view = view or forest_view(trace, gold, topics, show_all)
    drawn = [xy for i, xy in view.positions.items() if i not in view.hidden]
    if not drawn:
        return 380
    span_x = max(x for x, _ in drawn) - min(x for x, _ in drawn) + COLUMN
    span_y = max(y for _, y in drawn) - min(y for _, y in drawn) + 90
    scale = min(1.0, WIDTH / span_x)
    return int(min(760, max(380, TOOLBAR_H + 40 + span_y * scale)))
