"""What the interactive forest shows and where (paper Sec. 4.3, drawn like the paper's figures 8 and 10): time runs
left to right, one lane per topic, a child always right of its parent.

Which trees: by default only the trees that matter for the answer — those holding gold evidence, a message the
answer cites (an id named in an answer's text or reason: the offline answerer names its best match and the UPDATE
chain it followed) or an ancestor of one (the answer chain). A forest of 50 trees is mostly one-message trees;
those are folded into a compact strip below the lanes instead of each taking a tree's slot. When nothing matters
(no gold, no citation) every tree is shown. Pure functions over a Trace: no I/O, no HTML.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tmem.types import ForestNode, Gold, Trace

X_STEP, ROW_H, LANE_GAP, MAX_ROWS = 180, 84, 34, 3  # px; sub-rows a lane may open before it moves right
LANE_HEAD = 26  # px above a lane's first row for its name, so the name never covers a node
STRIP_STEP, STRIP_GAP, STRIP_ROW = 130, 56, 58
NO_TOPIC = "(no topic)"


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

    @property
    def drawn(self) -> int:
        return len(self.positions) - len(self.hidden)


def cited_ids(trace: Trace) -> frozenset[str]:
    """Forest messages an answer names (in its text or its reason), matched as whole ids."""
    blob = " ".join(f"{a.text} {a.reason}" for a in trace.answers)
    return frozenset(n.message_id for n in trace.nodes
                     if re.search(rf"(?<![\w-]){re.escape(n.message_id)}(?![\w-])", blob))


def answer_chain(trace: Trace) -> frozenset[int]:
    """Indices of the cited nodes and of every ancestor of one (the path the answer read down its tree)."""
    by_index = {n.index: n for n in trace.nodes}
    cited = cited_ids(trace)
    out: set[int] = set()
    for n in trace.nodes:
        if n.message_id in cited:
            node: ForestNode | None = n
            while node is not None and node.index not in out:
                out.add(node.index)
                node = by_index.get(node.parent_index)
    return frozenset(out)


def focus_trees(trace: Trace, gold: Gold | None = None) -> frozenset[int]:
    """Trees holding gold evidence or answer-chain nodes; every tree when none does."""
    gold_ids = gold.evidence_ids if gold else frozenset()
    chain = answer_chain(trace)
    trees = frozenset(n.tree for n in trace.nodes if n.message_id in gold_ids or n.index in chain)
    return trees or frozenset(n.tree for n in trace.nodes)


def _columns(nodes: Sequence[ForestNode], lane_of: Mapping[int, str]) -> dict[int, tuple[int, int]]:
    """{index: (column, sub-row)}: columns never decrease with time, a child sits right of its parent and on its
    parent's sub-row when that is free (a chain reads as a line); siblings open new sub-rows, up to MAX_ROWS."""
    last: dict[str, list[int]] = defaultdict(list)  # lane -> last column used per sub-row
    out: dict[int, tuple[int, int]] = {}
    cursor = 0
    for n in sorted(nodes, key=lambda n: (n.timestamp, n.index)):
        rows = last[lane_of[n.index]]
        parent = out.get(n.parent_index)
        least = max(cursor, parent[0] + 1 if parent else 0)
        same_lane = parent is not None and lane_of[n.parent_index] == lane_of[n.index]
        order = ([parent[1]] if same_lane else []) + list(range(len(rows)))
        row = next((r for r in order if rows[r] < least), None)
        if row is None and len(rows) < MAX_ROWS:
            rows.append(-1)
            row = len(rows) - 1
        if row is None:
            row = min(range(len(rows)), key=lambda r: (rows[r], r))
            least = rows[row] + 1
        rows[row] = least
        out[n.index] = (least, row)
        cursor = least
    return out


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
    graph = [n for n in trace.nodes if n.tree in shown and n.index not in folded]
    hidden = frozenset(n.index for n in trace.nodes if n.tree not in shown and n.index not in folded)
    lane_of = {n.index: topics.get(n.message_id) or NO_TOPIC for n in graph}
    order = list(dict.fromkeys(lane_of[n.index] for n in sorted(graph, key=lambda n: (n.timestamp, n.index))))
    cells = _columns(graph, lane_of)
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
    return ForestView(positions, tuple(lanes), _ticks(graph, cells), strip, strip_top, hidden, tuple(focus), chain,
                      shown, len(sizes))


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
