"""What the interactive forest shows and where (paper Sec. 4.3, drawn like the paper's figures 8 and 10): time runs
left to right, one lane per topic, a child always right of its parent.

Which trees: by default only the trees that matter for the answer — those holding gold evidence, a message the
answer cites (an id named in an answer's text or reason: the offline answerer names its best match and the UPDATE
chain it followed) or an ancestor of one (the answer chain). A forest of 50 trees is mostly one-message trees;
those are folded into a compact strip below the lanes instead of each taking a tree's slot. When nothing matters
(no gold, no citation) every tree is shown. Both views come from one layout of every tree: the default view drops
the other trees' nodes and the columns, sub-rows and lanes left empty, so a node keeps its lane, its sub-row and its
place in time order when the view switches.

An edge is drawn as vis-network's horizontal cubic Bézier; one that would pass behind an unrelated node's box (a
long UPDATE across a row of other messages reads as a chain through them) is routed as an arc above or below the
row instead (`edge_routes`, the same curves the browser draws, sampled). Pure functions over a Trace: no I/O, no
HTML.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from tmem.types import UPDATE, ForestNode, Gold, Trace

X_STEP, ROW_H, LANE_GAP, MAX_ROWS = 180, 84, 34, 3  # px; sub-rows a lane may open before it moves right
LANE_HEAD = 26  # px above a lane's first row for its name, so the name never covers a node
STRIP_STEP, STRIP_GAP, STRIP_ROW = 130, 56, 58
# Above this many drawn nodes a view fitted to all of them is too small to read (the demo's curated forest: 36
# drawn, labels at ~9 px): the default view leaves out the unrelated single messages, All trees opens on the trees
# that matter.
FOLD_ABOVE = 30
NO_TOPIC = "(no topic)"
# a drawn node's box (at most; tmem.viz.report.svg draws the same): within one X_STEP x ROW_H cell
BOX_W, BOX_H = 164, 58
CORNER = 14  # px of a box's side an edge may clip without reading as passing behind the node
ROUNDNESS = 0.4  # vis-network's cubic Bézier (tmem.viz.question.forest OPTIONS)
ARCS = tuple((kind, r) for r in (0.2, 0.3, 0.45, 0.6, 0.8) for kind in ("curvedCW", "curvedCCW"))


@dataclass(frozen=True)
class Lane:
    name: str
    top: float
    bottom: float


@dataclass(frozen=True)
class ForestView:
    """Positions of the drawn nodes, the lanes and time ticks behind them, and which nodes are hidden or folded."""

    positions: dict[int, tuple[float, float]]  # every node index -> (x, y); hidden nodes sit at (0, 0)
    lanes: tuple[Lane, ...]
    ticks: tuple[tuple[float, str], ...]  # (x, "Mar 19") where a new day starts
    strip: tuple[int, ...]  # single-node trees folded into the strip, in time order
    strip_top: float
    hidden: frozenset[int]  # nodes of trees not shown (default view: trees that do not matter for the answer)
    focus: tuple[int, ...]  # the nodes the view opens on: the answer chain, else gold, else everything shown
    chain: frozenset[int]  # cited nodes and their ancestors
    shown_trees: frozenset[int]
    all_trees: int
    opens_on: tuple[int, ...] = ()  # the nodes the view opens fitted to (a crowded view: the trees that matter)
    folded_singles: int = 0  # one-message trees left out of a crowded default view (All trees draws them)

    @property
    def drawn(self) -> int:
        return len(self.positions) - len(self.hidden)


def cited_ids(trace: Trace) -> frozenset[str]:
    """Forest messages the forest answer names (in its text or its reason; the answers of a variant without a
    forest answer), matched as whole ids. The flat answer read a list, not the forest: its best match is no part
    of the forest's answer chain."""
    forest = trace.answer("forest")
    blob = " ".join(f"{a.text} {a.reason}" for a in ((forest,) if forest else trace.answers))
    return frozenset(n.message_id for n in trace.nodes
                     if re.search(rf"(?<![\w-]){re.escape(n.message_id)}(?![\w-])", blob))


def answer_chain(trace: Trace) -> frozenset[int]:
    """Indices of the chain the answer used: the nodes it cites (its best match and the UPDATE chain it followed)
    and the states each of them replaced (UPDATE parents, up the chain); EXPAND ancestors are context, not the
    chain (marking the whole path from the root starred 9 messages of the demo's curated tree, 2 of them its
    answer's)."""
    by_index = {n.index: n for n in trace.nodes}
    cited = cited_ids(trace)
    out: set[int] = set()
    for n in trace.nodes:
        node: ForestNode | None = n if n.message_id in cited else None
        while node is not None and node.index not in out:
            out.add(node.index)
            node = by_index.get(node.parent_index) if node.relation == UPDATE else None
    return frozenset(out)


def focus_trees(trace: Trace, gold: Gold | None = None) -> frozenset[int]:
    """Trees holding gold evidence or answer-chain nodes; every tree when none does."""
    gold_ids = gold.evidence_ids if gold else frozenset()
    chain = answer_chain(trace)
    trees = frozenset(n.tree for n in trace.nodes if n.message_id in gold_ids or n.index in chain)
    return trees or frozenset(n.tree for n in trace.nodes)


def _columns(nodes: Sequence[ForestNode], lane_of: Mapping[int, str]) -> dict[int, tuple[int, int]]:
    """{index: (column, sub-row)}: columns never decrease with time, a child sits right of its parent and on its
    parent's sub-row when that is free (a chain reads as a line), else on the nearest free sub-row; siblings open
    new sub-rows, up to MAX_ROWS. Among those cells the first whose edge from its parent passes no node placed so
    far, and whose box no edge drawn so far passes through, is taken (within a lane; else the first free cell)."""
    last: dict[str, list[int]] = defaultdict(list)  # lane -> last column used per sub-row
    out: dict[int, tuple[int, int]] = {}
    placed: dict[str, dict[int, tuple[float, float]]] = defaultdict(dict)  # lane -> index -> local (x, y)
    paths: dict[str, list[tuple[int, int, list]]] = defaultdict(list)  # lane -> (parent, child, drawn path)
    cursor = 0
    for n in sorted(nodes, key=lambda n: (n.timestamp, n.index)):
        lane = lane_of[n.index]
        rows = last[lane]
        parent = out.get(n.parent_index)
        least = max(cursor, parent[0] + 1 if parent else 0)
        same_lane = parent is not None and lane_of[n.parent_index] == lane
        near = sorted(range(len(rows)), key=lambda r: (abs(r - parent[1]), r)) if same_lane else range(len(rows))
        free = [(least, r) for r in near if rows[r] < least] + ([(least, len(rows))] if len(rows) < MAX_ROWS else [])
        later = [(least + d, r) for d in (1, 2) for r in near if rows[r] < least + d]  # a step right, if clearer
        cell = next((c for c in free + later if _clear(c, n, same_lane, placed[lane], paths[lane])), None) or \
            (free[0] if free else None)
        if cell is None:
            row = min(range(len(rows)), key=lambda r: (rows[r], r))
            cell = (rows[row] + 1, row)
        col, row = cell
        if row == len(rows):
            rows.append(-1)
        rows[row] = col
        out[n.index] = cell
        placed[lane][n.index] = (col * X_STEP, row * ROW_H)
        if same_lane:
            paths[lane].append((n.parent_index, n.index, _edge_path(placed[lane][n.parent_index],
                                                                    placed[lane][n.index], None)))
        cursor = col
    return out


def _clear(cell: tuple[int, int], node: ForestNode, same_lane: bool, placed: Mapping[int, tuple[float, float]],
           paths: Sequence[tuple[int, int, list]]) -> bool:
    """Whether a node put in `cell` crosses nothing placed so far in its lane (edge from its parent, its box)."""
    xy = (cell[0] * X_STEP, cell[1] * ROW_H)
    box = {node.index: xy}
    if any(_blocked(path, box, {p, c}) for p, c, path in paths):
        return False
    if not same_lane:
        return True
    return not _blocked(_edge_path(placed[node.parent_index], xy, None), placed, {node.parent_index})


def forest_view(trace: Trace, gold: Gold | None = None, topics: Mapping[str, str | None] | None = None,
                show_all: bool = False) -> ForestView:
    """The layout of one trace's forest (`topics`: message id -> topic; `show_all`: every tree, not only the
    trees that matter for the answer)."""
    topics = topics or {}
    sizes: dict[int, int] = defaultdict(int)
    for n in trace.nodes:
        sizes[n.tree] += 1
    chain = answer_chain(trace)
    matter = focus_trees(trace, gold)
    shown = frozenset(sizes) if show_all else matter
    gold_ids = gold.evidence_ids if gold else frozenset()
    # a one-message tree that matters (gold, cited) keeps its place in its lane; the others fold into the strip
    strip = tuple(n.index for n in sorted(trace.nodes, key=lambda n: (n.timestamp, n.index))
                  if sizes[n.tree] == 1 and not (n.tree in matter and len(matter) < len(sizes)))
    folded = set(strip)
    every = [n for n in trace.nodes if n.index not in folded]
    graph = [n for n in every if n.tree in shown]
    hidden = frozenset(n.index for n in trace.nodes if n.tree not in shown and n.index not in folded)
    lane_all = {n.index: topics.get(n.message_id) or NO_TOPIC for n in every}
    order_all = list(dict.fromkeys(lane_all[n.index] for n in sorted(every, key=lambda n: (n.timestamp, n.index))))
    cells = _compact(_columns(every, lane_all), {n.index for n in graph}, lane_all)
    lane_of = {i: lane_all[i] for i in cells}
    order = [name for name in order_all if name in set(lane_of.values())]
    positions: dict[int, tuple[float, float]] = {n.index: (0.0, 0.0) for n in trace.nodes}
    lanes, top = [], 0.0
    for name in order:
        rows = 1 + max(r for i, (_, r) in cells.items() if lane_of[i] == name)
        for i, (col, row) in cells.items():
            if lane_of[i] == name:
                positions[i] = (col * X_STEP, top + LANE_HEAD + ROW_H / 2 + row * ROW_H)
        lanes.append(Lane(name, top, top + LANE_HEAD + rows * ROW_H))
        top += LANE_HEAD + rows * ROW_H + LANE_GAP
    width = max([c for c, _ in cells.values()] + [3]) + 1
    per_row = max(4, int(width * X_STEP // STRIP_STEP))
    strip_top = top + STRIP_GAP - LANE_GAP if lanes else 0.0
    for k, index in enumerate(strip):
        positions[index] = ((k % per_row) * STRIP_STEP, strip_top + STRIP_ROW / 2 + (k // per_row) * STRIP_ROW)
    focus = [n.index for n in graph if n.index in chain] or [n.index for n in graph if n.message_id in gold_ids] \
        or [n.index for n in graph] or list(strip)
    crowded = len(graph) + len(strip) > FOLD_ABOVE and len(matter) < len(sizes)
    if crowded and not show_all:  # the single messages unrelated to the answer leave the default view
        hidden, folded_singles, strip = hidden | set(strip), len(strip), ()
    else:
        folded_singles = 0
    # a crowded view opens fitted to the trees that matter (at a readable scale); *Fit all* shows the rest
    opens_on = tuple(n.index for n in graph if n.tree in matter) if crowded and show_all else \
        tuple(i for i in positions if i not in hidden)
    return ForestView(positions, tuple(lanes), _ticks(graph, cells), strip, strip_top, hidden, tuple(focus), chain,
                      shown, len(sizes), opens_on, folded_singles)


def _compact(cells: Mapping[int, tuple[int, int]], keep: set[int],
             lane_of: Mapping[int, str]) -> dict[int, tuple[int, int]]:
    """The cells of the `keep` nodes with the columns and each lane's sub-rows that hold none of them removed:
    order in time, sub-row order and lanes stay those of the whole layout."""
    kept = {i: cell for i, cell in cells.items() if i in keep}
    column = {c: k for k, c in enumerate(sorted({c for c, _ in kept.values()}))}
    rows: dict[str, list[int]] = defaultdict(list)
    for i, (_, r) in kept.items():
        rows[lane_of[i]].append(r)
    row = {lane: {r: k for k, r in enumerate(sorted(set(rs)))} for lane, rs in rows.items()}
    return {i: (column[c], row[lane_of[i]][r]) for i, (c, r) in kept.items()}


def fit_bounds(trace: Trace, view: ForestView, routes: Mapping[int, tuple[str, float] | None],
               nodes: Sequence[int]) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of the boxes of `nodes` and of every drawn edge between two of them, as drawn (an
    arc around a node bulges beyond the boxes: fitting to the nodes alone cut UPDATE arcs off the canvas's top)."""
    keep = set(nodes)
    xs = [v for i in keep for v in (view.positions[i][0] - BOX_W / 2, view.positions[i][0] + BOX_W / 2)]
    ys = [v for i in keep for v in (view.positions[i][1] - BOX_H / 2, view.positions[i][1] + BOX_H / 2)]
    for n in trace.nodes:
        if n.index in keep and n.parent_index in keep and n.index in routes:
            path = _edge_path(view.positions[n.parent_index], view.positions[n.index], routes[n.index])
            xs += [x for x, _ in path]
            ys += [y for _, y in path]
    return (min(xs), min(ys), max(xs), max(ys)) if xs else (0.0, 0.0, 0.0, 0.0)


def _bezier(points: Sequence[tuple[float, float]], steps: int = 48) -> list[tuple[float, float]]:
    """Points along a quadratic or cubic Bézier curve (its end points left out)."""
    out = []
    for k in range(1, steps):
        t = k / steps
        level = list(points)
        while len(level) > 1:  # de Casteljau
            level = [((1 - t) * a[0] + t * b[0], (1 - t) * a[1] + t * b[1]) for a, b in zip(level, level[1:])]
        out.append(level[0])
    return out


def _edge_path(start: tuple[float, float], end: tuple[float, float], route: tuple[str, float] | None):
    """The curve vis-network draws for an edge: its default horizontal cubic Bézier, or a curvedCW / curvedCCW arc
    (a quadratic Bézier through vis-network's via point, BezierEdgeStatic._getViaCoordinates)."""
    (x0, y0), (x1, y1) = start, end
    if route is None:
        dx = x1 - x0
        return _bezier([start, (x0 + ROUNDNESS * dx, y0), (x1 - ROUNDNESS * dx, y1), end])
    kind, factor = route
    dx, dy = x1 - x0, y0 - y1
    radius, angle = math.hypot(dx, dy), math.atan2(dy, dx)
    turn = (factor * 0.5 + 0.5) if kind == "curvedCW" else (-factor * 0.5 + 0.5)
    my = (angle + turn * math.pi) % (2 * math.pi)
    via = (x0 + (factor * 0.5 + 0.5) * radius * math.sin(my), y0 + (factor * 0.5 + 0.5) * radius * math.cos(my))
    return _bezier([start, via, end])


def _blocked(path, boxes: Mapping[int, tuple[float, float]], skip: set[int], margin: float = -4) -> list[int]:
    """The nodes (not in `skip`) whose box, shrunk by `margin` px on each side (negative: grown), a path passes
    through."""
    if not path:
        return []
    hw, hh = BOX_W / 2 - margin, BOX_H / 2 - margin
    xs, ys = [px for px, _ in path], [py for _, py in path]
    # only a box within reach of the path's bounding box can hold one of its points: the point-by-point test ran
    # for every box of the forest (~0.8 M comparisons of the demo's curated forest, twice per draw)
    left, right, top, bottom = min(xs) - hw, max(xs) + hw, min(ys) - hh, max(ys) + hh
    return [i for i, (x, y) in boxes.items() if i not in skip and left < x < right and top < y < bottom
            and any(abs(px - x) < hw and abs(py - y) < hh for px, py in path)]


def edge_routes(trace: Trace, view: ForestView) -> dict[int, tuple[str, float] | None]:
    """{child index: None (the default curve) or (arc kind, roundness)} for every drawn edge: the default curve
    where it passes no other node's box, else the flattest arc that passes none (the default when none does)."""
    boxes = {i: xy for i, xy in view.positions.items() if i not in view.hidden}
    routes: dict[int, tuple[str, float] | None] = {}
    for n in trace.nodes:
        if not n.parent_index or n.index not in boxes or n.parent_index not in boxes:
            continue
        start, end, skip = boxes[n.parent_index], boxes[n.index], {n.index, n.parent_index}
        routes[n.index] = next((r for r in (None, *ARCS) if not _blocked(_edge_path(start, end, r), boxes, skip)),
                               None)
    return routes


def crossings(trace: Trace, view: ForestView, routes: Mapping[int, tuple[str, float] | None] | None = None,
              margin: float = CORNER):
    """[(parent index, child index, index of a node whose box the edge passes behind)] as drawn: through the box,
    not only across one of its corners (`margin` px of each side; a fan of three children from one parent into the
    next column cannot avoid the corners of the middle one's neighbours)."""
    routes = edge_routes(trace, view) if routes is None else routes
    boxes = {i: xy for i, xy in view.positions.items() if i not in view.hidden}
    return [(n.parent_index, n.index, m) for n in trace.nodes if n.index in routes
            for m in _blocked(_edge_path(boxes[n.parent_index], boxes[n.index], routes[n.index]), boxes,
                              {n.index, n.parent_index}, margin)]


def _ticks(nodes: Sequence[ForestNode], cells: Mapping[int, tuple[int, int]]) -> tuple[tuple[float, str], ...]:
    """A date label at the first column of each new day (columns hold nodes of non-decreasing time)."""
    first: dict[int, ForestNode] = {}
    for n in sorted(nodes, key=lambda n: (n.timestamp, n.index)):
        first.setdefault(cells[n.index][0], n)
    out, day = [], None
    for col in sorted(first):
        stamp = first[col].timestamp
        if stamp.date() != day:
            out.append((col * X_STEP, f"{stamp:%b} {stamp.day}"))
            day = stamp.date()
    return tuple(out)


def first_words(text: str, words: int = 7, limit: int = 52) -> str:
    """The opening words of a message for a node label (one line; vis-network wraps it)."""
    head = " ".join((text or "").split()[:words])
    head = head if len(head) <= limit else head[: limit - 1] + "…"
    return head + ("…" if len((text or "").split()) > words and not head.endswith("…") else "")


def changed_words(text: str, before: str | None, words: int = 9, limit: int = 64) -> str:
    """A state's label: the words after the longest run of words it shares with the state it replaces ("OK, we
    drop contract checks against the Contoso sandbox and switch to shadow traffic at 20%" after "... = contract
    checks against the Contoso sandbox" is "… and switch to shadow traffic at 20%."; its first words said nothing
    of the new state), else its first words; "…" marks a cut."""
    mine = (text or "").split()
    norm = lambda ws: [re.sub(r"\W+", "", w.lower()) for w in ws]  # noqa: E731 - local, read once
    run = SequenceMatcher(None, norm(mine), norm((before or "").split()), autojunk=False).find_longest_match()
    if run.size < 3 or run.a + run.size >= len(mine):  # no shared run worth skipping, or nothing after it
        return first_words(text, words, limit)
    return "… " + first_words(" ".join(mine[run.a + run.size:]), words, limit - 2)
