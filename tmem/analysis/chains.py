"""Complete Chain Recall (paper Sec. 5.6, Exp-5): did the answer context hold every message of the question's gold
UPDATE chain — the original state, each revision and the rollback — so the answer model could follow the decision to
its current state? A partial chain favours an obsolete answer (stale.ROLLBACK_MISSED names one such case).

A question's gold chain, as units of acceptable message ids:
- with gold UPDATE edges (GroupMemBench-layout corpora, the case studies, a corpus written by the noise-chain
  injector, tmem/evaluation/noise_chains.py): its gold evidence units that an UPDATE path joins to another of them,
  and every message on those paths (the intermediate revisions, one unit each);
- without them, for a question whose gold names a `superseded` state: its gold evidence units (the states);
- otherwise it has no chain and is not counted.
A chain is complete when every unit of it is in the primary answer's context (tmem.analysis.funnel,
"after_compression": whole, not cut). Complete Chain Recall = complete chains / questions with a chain.
"""
from __future__ import annotations

from collections.abc import Iterable

from tmem.analysis.funnel import stage_sets
from tmem.types import UPDATE, Gold, Trace


class UpdateEdges:
    """A scope's gold edges, (child, parent, relation, ...) tuples as Store.gold_edges gives them, with their UPDATE
    edges as maps both ways, built once: gold_chain and the rollback check (tmem.analysis.stale) read them for every
    question and trace of the scope (rebuilding them per call was 0.2 s of the Failures page's first visit on the
    demo batch). Iterates as the tuples; the maps are shared, never changed."""

    def __init__(self, gold_edges: Iterable[tuple] = ()):
        self.edges = tuple(gold_edges)
        self.children: dict[str, set[str]] = {}
        for child, parent, relation, *_ in self.edges:
            if parent and relation == UPDATE:
                self.children.setdefault(parent, set()).add(child)
        self.parents: dict[str, set[str]] = {}
        for parent, kids in self.children.items():
            for child in kids:
                self.parents.setdefault(child, set()).add(parent)

    def __iter__(self):
        return iter(self.edges)

    def __len__(self) -> int:
        return len(self.edges)


def update_edges(gold_edges: Iterable[tuple] | UpdateEdges = ()) -> UpdateEdges:
    """`gold_edges` with their UPDATE maps: as given when already built, else built now."""
    return gold_edges if isinstance(gold_edges, UpdateEdges) else UpdateEdges(gold_edges)


def gold_chain(gold: Gold | None, gold_edges: Iterable[tuple] | UpdateEdges = ()
               ) -> tuple[tuple[str, ...], ...] | None:
    """The question's gold UPDATE chain (module docstring), or None when it has none (`gold_edges`: the scope's,
    best an UpdateEdges built once per scope)."""
    if gold is None or not gold.evidence:
        return None
    graph = update_edges(gold_edges)
    children, parents = graph.children, graph.parents
    units = [set(u) for u in gold.evidence]
    below = [_reach(u, children) for u in units]
    above = [_reach(u, parents) for u in units]
    linked, path = set(), set()
    for i, j in ((i, j) for i in range(len(units)) for j in range(len(units)) if i != j):
        if units[j] & below[i]:
            linked |= {i, j}
            path |= below[i] & above[j]  # the messages between them on an UPDATE path
    if linked:
        inside = set().union(*(units[i] for i in linked))
        return tuple(gold.evidence[i] for i in sorted(linked)) + tuple((m,) for m in sorted(path - inside))
    return tuple(gold.evidence) if gold.superseded and len(gold.evidence) >= 1 else None


def chain_complete(trace: Trace, chain: tuple[tuple[str, ...], ...] | None) -> bool | None:
    """Whether every unit of the chain reached the primary answer's context whole (None: no chain)."""
    if chain is None:
        return None
    held = stage_sets(trace)["after_compression"]
    return all(set(unit) & held for unit in chain)


def _reach(start: set[str], step: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        for nxt in step.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
