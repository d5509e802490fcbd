"""Diagnostics of Temporal Memory Structuring against gold edges (`python -m tmem links --json --details`, the
Structuring page; docs/evaluation.md, "Diagnostics").

Two views of the same scored children (tmem/evaluation/links.py):
- a **confusion matrix** per corpus (a "style": IRC, the cases, each blind style) and per scope: gold ROOT / EXPAND /
  UPDATE (LINK: an untyped gold parent) x built ROOT / EXPAND / UPDATE, the built edges split into those that chose
  the right parent and those that did not (a gold ROOT has no parent, so any edge built for it is "wrong parent");
- the **error class** of each miss (a child whose edge is not reproduced exactly), first match wins:
  `rooted-revision`   a gold UPDATE built as ROOT;
  `expand-not-update` a gold UPDATE built as EXPAND of the right parent;
  `false-update`      a gold EXPAND or ROOT built as an UPDATE;
  `chain-tip`         an edge to an earlier statement of the same chain instead of the gold parent: the built parent
                      is an ancestor of the gold parent in the gold forest (in A -> B -> C, C attached to A: the
                      chain's first statement, not its tip B, the latest state C replaces; a return to an earlier
                      value attached to that value);
  `under-reply`       an edge to a message under the gold parent (its descendant in the gold forest: a challenge,
                      question or answer replying to it) instead of the gold parent itself: a revision hung under
                      the question about the option it replaces rather than under the state;
  `wrong-parent`      any other miss (another parent, a gold parent left ROOT, an edge built for a gold ROOT).
Pure functions; the scoring (LinkScore) calls them.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from tmem.types import EXPAND, ROOT, UPDATE

LINK = "LINK"  # an untyped gold parent (IRC reply links)
GOLD_ROWS = (ROOT, EXPAND, UPDATE, LINK)
RIGHT, WRONG = "right parent", "wrong parent"
BUILT_CELLS = (ROOT, f"{EXPAND} {RIGHT}", f"{EXPAND} {WRONG}", f"{UPDATE} {RIGHT}", f"{UPDATE} {WRONG}")
MISS_CLASSES = ("rooted-revision", "expand-not-update", "false-update", "chain-tip", "under-reply", "wrong-parent")


def built_cell(built: str, right_parent: bool) -> str:
    """The matrix column of a built edge: ROOT, or its label with whether its parent is the gold one."""
    return ROOT if built == ROOT else f"{built} {RIGHT if right_parent else WRONG}"


def label_right(gold: str, built: str) -> bool:
    """An untyped gold parent (LINK) is matched by either edge label; only ROOT contradicts it."""
    return built == gold or (gold == LINK and built != ROOT)


def miss_class(gold: str, gold_parents: Iterable[str], chain: Iterable[str], built_parent: str | None,
               built: str, below: Iterable[str] = ()) -> str | None:
    """The error class of one scored child (module docstring), None when its gold edge is reproduced exactly.
    `chain`: the gold parents' ancestors (gold_chains); `below`: the messages under them (gold_replies)."""
    parents = set(gold_parents)
    right_parent = built_parent in parents if parents else built_parent is None
    if right_parent and label_right(gold, built):
        return None
    if gold == UPDATE and built == ROOT:
        return "rooted-revision"
    if gold == UPDATE and built == EXPAND and right_parent:
        return "expand-not-update"
    if gold in (EXPAND, ROOT) and built == UPDATE:
        return "false-update"
    if built_parent is not None and built_parent in set(chain):
        return "chain-tip"
    if built_parent is not None and built_parent in set(below):
        return "under-reply"
    return "wrong-parent"


def gold_chains(parents: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """Per child: the ancestors of its gold parents in the gold forest (`parents`: child -> its gold parents), the
    earlier statements of its chain that are not its gold parent. A cycle in the annotation cannot loop."""
    out = {}
    for child, direct in parents.items():
        seen: set[str] = set()
        todo = [p for d in direct for p in parents.get(d, ())]
        while todo:
            node = todo.pop()
            if node not in seen and node != child:
                seen.add(node)
                todo += parents.get(node, ())
        out[child] = frozenset(seen - set(direct))
    return out


def gold_replies(parents: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """Per child: the messages under its gold parents in the gold forest (their descendants), other than the child
    and what lies under it."""
    under: dict[str, set[str]] = {}
    for child, direct in parents.items():
        for parent in direct:
            under.setdefault(parent, set()).add(child)
    out = {}
    for child, direct in parents.items():
        seen: set[str] = set()
        todo = [k for d in direct for k in under.get(d, ())]
        while todo:
            node = todo.pop()
            if node not in seen and node != child:
                seen.add(node)
                todo += under.get(node, ())
        out[child] = frozenset(seen - set(direct))
    return out


def matrix(cells: Counter) -> dict[str, dict[str, int]]:
    """{gold label: {built cell: n}} of the gold rows present, every built cell listed (zeros included)."""
    golds = [g for g in GOLD_ROWS if any(k[0] == g for k in cells)]
    return {g: {c: cells.get((g, c), 0) for c in BUILT_CELLS} for g in golds}


def row_cell(row: Mapping) -> tuple[str, str]:
    """(gold label, built cell) of a stored per-child row of LinkScore (its `rows`)."""
    gold_parents = set(row["expected_parent"] or [])
    right = row["built_parent"] in gold_parents if gold_parents else False
    return row["expected"], built_cell(row["built"], right)


def summarize(rows: Iterable[Mapping]) -> dict:
    """The matrix and the miss counts of stored per-child rows (LinkScore.rows)."""
    cells, misses = Counter(), Counter()
    for row in rows:
        cells[row_cell(row)] += 1
        misses[row.get("miss")] += 1
    return {"matrix": matrix(cells), "misses": miss_counts(misses)}


def by_group(rows: Iterable[Mapping], key: str = "scope") -> dict[str, dict]:
    """`summarize` of the rows grouped by `key` (per scope, or per corpus)."""
    groups: dict[str, list] = {}
    for row in rows:
        groups.setdefault(str(row.get(key, "")), []).append(row)
    return {g: summarize(rs) for g, rs in groups.items()}


def miss_counts(misses: Counter) -> dict[str, int]:
    """Every error class with its count (zeros included), in MISS_CLASSES order."""
    return {c: misses.get(c, 0) for c in MISS_CLASSES}


def format_matrix(name: str, m: Mapping[str, Mapping[str, int]], misses: Mapping[str, int]) -> list[str]:
    """Plain-text lines: the matrix with one row per gold label, then the miss classes."""
    width = max(len(c) for c in BUILT_CELLS) + 2
    lines = [f"{name}: gold (rows) x built (columns)",
             f"  {'gold':<8}" + "".join(f"{c:>{width}}" for c in BUILT_CELLS)]
    lines += [f"  {g:<8}" + "".join(f"{row[c]:>{width}}" for c in BUILT_CELLS) for g, row in m.items()]
    lines.append("  misses: " + ", ".join(f"{c} {n}" for c, n in misses.items()))
    return lines
