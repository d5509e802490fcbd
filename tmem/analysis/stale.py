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
from tmem.models.lexical_judge import lexical_verdict, stems
from tmem.types import UPDATE, Gold, Trace

STALE = "stale — states the superseded state"
ROLLBACK_MISSED = "revision without rollback"
CATEGORIES = (STALE, ROLLBACK_MISSED)
MIN_STALE_UNITS = 2  # a single shared word ("prompt") is topic, not state
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
    (child, parent, relation) gold edges (Store.gold_edges), may be empty."""
    if gold is None or len(gold.evidence) < 2:
        return None
    present = stage_sets(trace)["after_compression"]
    later, edges_used = _replaced_by(gold, times, gold_edges)
    for i, unit in enumerate(gold.evidence):
        if not set(unit) & present or not later[i]:
            continue
        if not any(set(gold.evidence[j]) & present for j in later[i]):
            held = sorted(set(unit) & present)[0]
            nxt = sorted(gold.evidence[min(later[i], key=lambda j: _start(gold.evidence[j], times))])[0]
            source = "gold UPDATE edges" if edges_used else "gold evidence order"
            return Finding(ROLLBACK_MISSED, f"the context holds the earlier state {held} but not {nxt}, which "
                           f"replaced it ({source})", (held, nxt), source)
    return None


def _replaced_by(gold: Gold, times: Mapping[str, datetime],
                 gold_edges: Iterable[tuple]) -> tuple[list[set[int]], bool]:
    """For each gold unit, the indices of the units that replace it (directly or along a chain of gold UPDATE
    edges, else by time order when the gold names a superseded state); and whether gold edges decided."""
    units = [set(u) for u in gold.evidence]
    children = _updates(gold_edges)
    by_edges = [{j for j, other in enumerate(units) if j != i and other & _descendants(unit, children)}
                for i, unit in enumerate(units)] if children else []
    if any(by_edges):
        return by_edges, True
    if not gold.superseded or any(not any(i in times for i in u) for u in units):
        return [set() for _ in units], False
    order = sorted(range(len(units)), key=lambda i: _start(gold.evidence[i], times))
    return [set(order[order.index(i) + 1:]) for i in range(len(units))], False


def _updates(gold_edges: Iterable[tuple]) -> dict[str, set[str]]:
    children: dict[str, set[str]] = {}
    for child, parent, relation, *_ in gold_edges:
        if parent and relation == UPDATE:
            children.setdefault(parent, set()).add(child)
    return children


def _descendants(start: set[str], children: Mapping[str, set[str]]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
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
