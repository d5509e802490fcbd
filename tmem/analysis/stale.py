"""Stale answers and revisions without their rollback: the failures T-Mem's temporal structure is meant to prevent
(paper Sec. 5.6 Exp-5, App. G). Pure functions over a stored Trace, its Gold and, where known, the scope's gold
UPDATE edges; the batch summary, the report and the app read them, nothing is recomputed by a model.

- STALE, "stale — states the superseded state": a wrong answer that states a state the conversation replaced.
  1. by the gold: the question's `superseded` state, judged with the offline lexical judge's rules as if it were
     the gold (containment, F1, and its negation rules: "instead of X" or "not X" does not state X), while the
     answer says none of the words the current gold adds to the superseded state;
  2. by the forest: for an UPDATE edge p -> c of the trace's own forest, the answer is drawn from the replaced
     message p (more than half of its stems are p's, and more are p's than c's), shares at least MIN_STALE_UNITS
     stems that only p has, and none that only c has. Sharing a few topic words is not enough: the answer must
     restate p. This one is as good as the forest: a wrong UPDATE edge gives a wrong finding; the detail names
     the edge.
  A correct answer is never stale. With an offline stand-in the answer is the extractive stand-in's, so the
  finding says which backend answered.
- ROLLBACK_MISSED, "revision without rollback" (Exp-5): the answer context after compression holds an earlier
  state of the question's decision but no later state that replaced it. The decision's states are the gold
  evidence units; one unit replaces another when the scope's gold UPDATE edges lead from one to the other
  (GroupMemBench-layout corpora and the case studies have them); without gold edges, for a question whose gold
  names a `superseded` state, its units in time order (the last is the current state). A question with neither
  is not a state-change question and gets no finding.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from tmem.analysis.funnel import stage_sets
from tmem.limits import MAX_GOLD_UNITS
from tmem.models.lexical_judge import lexical_verdict, stems
from tmem.types import UPDATE, Gold, Trace

STALE = "stale — states the superseded state"
ROLLBACK_MISSED = "revision without rollback"
CATEGORIES = (STALE, ROLLBACK_MISSED)
MIN_STALE_UNITS = 2  # a single shared word ("prompt") is topic, not state
# Gold UPDATE edges followed from a question's units, in all: a decision's chain is a few edges per unit, and
# the walk from each unit is repeated per unit (1,000 units over a chain of 100,000 edges would take minutes).
MAX_EDGE_STEPS = 1_000_000
EXPLAIN = {
    STALE: "the answer is wrong and states a state the conversation replaced: the gold's superseded state, or the "
           "replaced side of an UPDATE edge of the forest (the detail says which)",
    ROLLBACK_MISSED: "the answer context holds an earlier state of the decision but not the later message that "
                     "replaced it (paper Exp-5: such partial chains favour obsolete answers)",
}


@dataclass(frozen=True)
class Finding:
    category: str
    detail: str
    messages: tuple[str, ...] = ()  # the replaced state's and, where known, its successor's message ids
    source: str = ""  # "gold superseded", "forest UPDATE", "gold UPDATE edges", "gold evidence order"


def stale_answer(trace: Trace, gold: Gold | None, presentation: str | None = None) -> Finding | None:
    """STALE for the trace's (primary, or `presentation`) answer, or None."""
    answer = trace.answer(presentation) if presentation else (trace.answers[0] if trace.answers else None)
    verdict = trace.verdict(answer.presentation) if answer else None
    if answer is None or verdict is None or verdict.correct:
        return None
    who = f" ({answer.backend}, an offline stand-in)" if answer.offline else ""
    if gold and gold.superseded and gold.answer:
        current_only = stems(gold.answer) - stems(gold.superseded)
        if lexical_verdict(gold.superseded, answer.text)[0] and not current_only & stems(answer.text):
            return Finding(STALE, f"the answer{who} states the superseded state {gold.superseded!r}", (),
                           "gold superseded")
    said = stems(answer.text)
    text = {n.message_id: n.text for n in trace.nodes}
    for e in trace.edges:
        if e.relation != UPDATE or e.parent_id not in text or e.child_id not in text:
            continue
        old, new = stems(text[e.parent_id]), stems(text[e.child_id])
        shared = said & (old - new)
        drawn = len(said & old) > len(said) / 2 and len(said & old) > len(said & new)
        if drawn and len(shared) >= MIN_STALE_UNITS and not said & (new - old):
            return Finding(STALE, f"the answer{who} repeats {e.parent_id} ({', '.join(sorted(shared)[:5])}), "
                           f"which the forest's UPDATE edge replaces with {e.child_id}",
                           (e.parent_id, e.child_id), "forest UPDATE")
    return None


def revision_without_rollback(trace: Trace, gold: Gold | None, times: Mapping[str, datetime],
                              gold_edges: Iterable[tuple] = ()) -> Finding | None:
    """ROLLBACK_MISSED or None. `times`: timestamps of the gold evidence messages; `gold_edges`: the scope's
    (child, parent, relation) gold edges (Store.gold_edges), may be empty. A question with more than
    limits.MAX_GOLD_UNITS units (the importers refuse more) is not a decision's states, and gold edges that take
    more than MAX_EDGE_STEPS steps to follow from its units are not a decision's chain: neither is checked."""
    if gold is None or not 2 <= len(gold.evidence) <= MAX_GOLD_UNITS:
        return None
    present = stage_sets(trace)["after_compression"]
    held = [bool(set(unit) & present) for unit in gold.evidence]
    try:
        later = _Replacements(gold, times, gold_edges, held)
        for i, unit in enumerate(gold.evidence):
            if not held[i] or not later.exists(i) or later.any_held(i):
                continue
            source = "gold UPDATE edges" if later.by_edges else "gold evidence order"
            held_id, nxt = sorted(set(unit) & present)[0], sorted(gold.evidence[later.earliest(i)])[0]
            return Finding(ROLLBACK_MISSED, f"the context holds the earlier state {held_id} but not {nxt}, which "
                           f"replaced it ({source})", (held_id, nxt), source)
    except _TooLarge:
        return None
    return None


class _TooLarge(Exception):
    """The gold edges took more than MAX_EDGE_STEPS steps to follow."""


class _Replacements:
    """Which gold units replace which: along a chain of gold UPDATE edges when any edge leads from one unit to
    another, else by time order when the gold names a superseded state (every unit then needs a time), else none.
    Nothing per pair of units is kept (a set of later units per unit took 2 GB for 10,000 units): by time order,
    a unit's replacements are the units after its position; by edges, one unit's are found when asked."""

    def __init__(self, gold: Gold, times: Mapping[str, datetime], gold_edges: Iterable[tuple], held: list[bool]):
        self.units, self.times, self.held = gold.evidence, times, held
        self.children = _updates(gold_edges)
        self.steps = [MAX_EDGE_STEPS]  # what is left of the bound on edges followed, over all units
        self._last: tuple[int, list[int]] = (-1, [])
        self.owners: dict[str, list[int]] = {}
        for j, unit in enumerate(self.units):
            for mid in dict.fromkeys(unit):
                self.owners.setdefault(mid, []).append(j)
        self.by_edges = bool(self.children) and any(self._by_edges(i) for i in range(len(self.units)))
        self.order: list[int] = []
        if not self.by_edges and gold.superseded and all(any(i in times for i in u) for u in self.units):
            self.order = sorted(range(len(self.units)), key=lambda i: _start(self.units[i], times))
        self.position = {i: p for p, i in enumerate(self.order)}
        self.held_after = [False] * (len(self.order) + 1)  # [p]: whether a unit at position p or later is held
        for p in range(len(self.order) - 1, -1, -1):
            self.held_after[p] = self.held_after[p + 1] or held[self.order[p]]

    def _by_edges(self, i: int) -> list[int]:
        if self._last[0] != i:  # asked up to three times in a row for the same unit
            reached = _descendants(set(self.units[i]), self.children, self.steps)
            self._last = (i, sorted({j for mid in reached for j in self.owners.get(mid, ()) if j != i}))
        return self._last[1]

    def exists(self, i: int) -> bool:
        if self.by_edges:
            return bool(self._by_edges(i))
        return i in self.position and self.position[i] < len(self.order) - 1

    def any_held(self, i: int) -> bool:
        if self.by_edges:
            return any(self.held[j] for j in self._by_edges(i))
        return self.held_after[self.position[i] + 1]

    def earliest(self, i: int) -> int:
        """The replacement that starts first (ties: the lowest unit index)."""
        if self.by_edges:
            return min(self._by_edges(i), key=lambda j: _start(self.units[j], self.times))
        return self.order[self.position[i] + 1]


def _updates(gold_edges: Iterable[tuple]) -> dict[str, set[str]]:
    children: dict[str, set[str]] = {}
    for child, parent, relation, *_ in gold_edges:
        if parent and relation == UPDATE:
            children.setdefault(parent, set()).add(child)
    return children


def _descendants(start: set[str], children: Mapping[str, set[str]], steps: list[int]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        steps[0] -= 1
        if steps[0] < 0:
            raise _TooLarge
        for c in children.get(todo.pop(), ()):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def _start(unit: tuple[str, ...], times: Mapping[str, datetime]) -> datetime:
    return min(times[i] for i in unit if i in times)


def findings(trace: Trace, gold: Gold | None, times: Mapping[str, datetime],
             gold_edges: Iterable[tuple] = ()) -> tuple[Finding, ...]:
    """Both checks, in the order of CATEGORIES."""
    edges = list(gold_edges)
    return tuple(f for f in (stale_answer(trace, gold), revision_without_rollback(trace, gold, times, edges)) if f)
