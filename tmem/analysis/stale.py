"""Stale answers and revisions without their rollback: the failures T-Mem's temporal structure is meant to prevent
(paper Sec. 5.6 Exp-5, App. G). Pure functions over a stored Trace, its Gold and, where known, the scope's gold
UPDATE edges; the batch summary, the report and the app read them, nothing is recomputed by a model.

- STALE, "stale — states the superseded state": a wrong answer that states a state the conversation replaced,
  read against the question's REFERENCE CHAIN, the same for every variant so that counts compare across variants
  (flat has no forest of its own; a variant's own wrong UPDATE edges made its own false findings, issue 39):
  the gold chain where the gold has one (tmem.analysis.chains.gold_chain: gold UPDATE edges between its units, or a
  `superseded` state), otherwise the full variant's forest for that question (tmem.evaluation.review finds it:
  from the same run, else the latest stored). Two rules:
  1. gold rule, by the gold's `superseded` state: judged with the offline lexical judge's rules as if it were the
     gold (containment, F1, and its negation rules: "instead of X" or "not X" does not state X), while the answer
     says none of the words the current gold adds to the superseded state;
  2. by an UPDATE edge p -> c of the reference (the forest rule on the full variant's forest; the gold rule on
     gold UPDATE edges). The edge counts only when both sides state a value of the same slot -- both state a state
     and, of one kind of value (a date, a count, a name...), c drops a value of p's and brings another
     (tmem.models.relation.values: typed_values, kind_replaced, replaced_values) -- and a forest edge only at
     MIN_UPDATE_CONFIDENCE or above. The answer must restate p (more than half of its stems are p's, and more are
     p's than c's; at least MIN_STALE_UNITS stems that only p has, none that only c has) and state a value c
     replaced, none that c brought. The detail names the rule, the edge, the slot and the reference.
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

from tmem.analysis.chains import gold_chain, update_edges
from tmem.analysis.funnel import stage_sets
from tmem.limits import MAX_GOLD_UNITS
from tmem.models.lexical_judge import lexical_verdict, stems
from tmem.models.relation.slots import states_a_state
from tmem.models.relation.values import cues, kind_replaced, replaced_values, typed_values, values
from tmem.types import UPDATE, Gold, Trace

STALE = "stale — states the superseded state"
ROLLBACK_MISSED = "revision without rollback"
CATEGORIES = (STALE, ROLLBACK_MISSED)
MIN_STALE_UNITS = 2  # a single shared word ("prompt") is topic, not state
# A forest's UPDATE edge counts from this confidence on. The default (fitted) relation role's confidence is its own
# P(parent) * P(label), calibrated on held-out data (docs/evaluation.md, reliability: the 0.4-0.6 bin right 54-58 %
# of the time, 0.6-0.8 72 %): from 0.5 on, the role itself holds the edge more likely right than wrong. A reasoned
# bound, not tuned on any answers (the demo's included). Gold edges are certain (confidence 1).
MIN_UPDATE_CONFIDENCE = 0.5
REFERENCE_VARIANT = "full"  # whose forest is the reference where the gold has no chain: T-Mem itself
GOLD_CHAIN, FULL_FOREST, NO_REFERENCE = "gold chain", "full variant's forest", "none"
GOLD_RULE, FOREST_RULE = "gold rule", "forest rule"
# Gold UPDATE edges followed from a question's units, in all: a decision's chain is a few edges per unit, and
# the walk from each unit is repeated per unit (1,000 units over a chain of 100,000 edges would take minutes).
MAX_EDGE_STEPS = 1_000_000
EXPLAIN = {
    STALE: "the answer is wrong and states a state the conversation replaced, read against the same reference "
           "chain for every variant — the gold chain where the gold has one, else the full variant's forest: the "
           "gold's superseded state (gold rule), or the replaced value of an UPDATE edge between two statements of "
           "one slot (forest rule; the detail names the rule, the edge, the slot and the reference)",
    ROLLBACK_MISSED: "the answer context holds an earlier state of the decision but not the later message that "
                     "replaced it (paper Exp-5: such partial chains favour obsolete answers)",
}


@dataclass(frozen=True)
class Finding:
    category: str
    detail: str
    messages: tuple[str, ...] = ()  # the replaced state's and, where known, its successor's message ids
    source: str = ""  # "gold superseded", "forest UPDATE", "gold UPDATE", "gold UPDATE edges", "gold evidence order"
    rule: str = ""  # STALE: GOLD_RULE or FOREST_RULE
    reference: str = ""  # STALE: "reference: gold chain" / "reference: full variant's forest" (Reference.describe)


@dataclass(frozen=True)
class SlotChange:
    """Of one kind of value, what an UPDATE's child replaced of its parent's: `old` dropped, `new` brought."""
    kind: str
    old: tuple[str, ...]
    new: tuple[str, ...]


@dataclass(frozen=True)
class Update:
    """An UPDATE edge of a reference chain that counts: both sides state a value of the same slot."""
    parent_id: str
    child_id: str
    confidence: float
    parent_text: str
    child_text: str
    slots: tuple[SlotChange, ...]


@dataclass(frozen=True)
class Reference:
    """The chain every variant's answer to one question is checked against (module docstring)."""
    label: str  # GOLD_CHAIN, FULL_FOREST, NO_REFERENCE or, without a full trace, "<variant>'s own forest"
    origin: str = ""  # where it came from: "gold superseded state", "same run", "latest stored", ...
    updates: tuple[Update, ...] = ()
    dropped: int = 0  # UPDATE edges of the reference that do not count (below the confidence, not one slot)

    def describe(self) -> str:
        return f"reference: {self.label}" + (f" ({self.origin})" if self.origin else "")

    @property
    def texts(self) -> dict[str, str]:
        out = {u.parent_id: u.parent_text for u in self.updates}
        return out | {u.child_id: u.child_text for u in self.updates}


def slot_changes(parent_text: str, child_text: str) -> tuple[SlotChange, ...]:
    """The slots an UPDATE child -> parent changes; () when the two do not state a value of the same slot. The
    child's values it names as replaced ("March 17 instead of March 3") are not values it brings."""
    if not (states_a_state(cues(parent_text)) and states_a_state(cues(child_text))):
        return ()
    named_old = replaced_values(child_text)
    parent = typed_values(parent_text)
    child = frozenset((k, v) for k, v in typed_values(child_text) if v not in named_old)
    if not kind_replaced(child, parent):
        return ()
    out = []
    for kind in sorted({k for k, _ in child} & {k for k, _ in parent}):
        mine, theirs = {v for k, v in child if k == kind}, {v for k, v in parent if k == kind}
        if theirs - mine and mine - theirs:
            out.append(SlotChange(kind, tuple(sorted(theirs - mine)), tuple(sorted(mine - theirs))))
    return tuple(out)


def counted_updates(edges: Iterable[tuple[str, str, float]], texts: Mapping[str, str],
                    min_confidence: float = MIN_UPDATE_CONFIDENCE) -> tuple[tuple[Update, ...], int]:
    """(the UPDATE edges (parent, child, confidence) that count, how many did not): both texts known, confidence
    at least `min_confidence`, both sides a value of the same slot."""
    kept, dropped = [], 0
    for parent, child, confidence in edges:
        slots = slot_changes(texts[parent], texts[child]) if parent in texts and child in texts else ()
        if slots and confidence >= min_confidence:
            kept.append(Update(parent, child, confidence, texts[parent], texts[child], slots))
        else:
            dropped += 1
    return tuple(kept), dropped


def reference_chain(gold: Gold | None, gold_edges: Iterable[tuple] = (), texts: Mapping[str, str] | None = None,
                    forest: Trace | None = None, origin: str = "") -> Reference:
    """The question's reference chain: the gold chain where the gold has one (its UPDATE edges between chain
    messages whose `texts` are given, and its superseded state), else `forest`'s UPDATE edges (the full variant's
    trace of the question; `origin` says which), else none."""
    edges = update_edges(gold_edges)  # the UPDATE maps built once for gold_chain and the rollback check
    chain = gold_chain(gold, edges)
    if chain is not None:
        ids = {m for unit in chain for m in unit}
        pairs = [(p, c, 1.0) for c, p, relation, *_ in edges if relation == UPDATE and p in ids and c in ids]
        updates, dropped = counted_updates(pairs, texts or {}, 0.0)
        how = "gold UPDATE edges" if pairs else "the gold's superseded state"
        return Reference(GOLD_CHAIN, how, updates, dropped)
    if forest is None:
        return Reference(NO_REFERENCE, "no trace of the full variant for this question")
    own = {n.message_id: n.text for n in forest.nodes}
    updates, dropped = counted_updates([(e.parent_id, e.child_id, e.confidence) for e in forest.edges
                                        if e.relation == UPDATE], own)
    label = FULL_FOREST if forest.variant == REFERENCE_VARIANT else f"{forest.variant}'s own forest"
    return Reference(label, origin, updates, dropped)


def stale_answer(trace: Trace, gold: Gold | None, presentation: str | None = None,
                 reference: Reference | None = None) -> Finding | None:
    """STALE for the trace's (primary, or `presentation`) answer, or None. `reference`: the question's reference
    chain (reference_chain; tmem.evaluation.review finds the full variant's trace); without one, the gold's
    superseded state, else the trace's own forest, labelled as such."""
    answer = trace.answer(presentation) if presentation else (trace.answers[0] if trace.answers else None)
    verdict = trace.verdict(answer.presentation) if answer else None
    if answer is None or verdict is None or verdict.correct:
        return None
    reference = reference or reference_chain(gold, forest=trace, origin="this trace")
    who = f" ({answer.backend}, an offline stand-in)" if answer.offline else ""
    where = reference.describe()
    if reference.label == GOLD_CHAIN and gold and gold.superseded and gold.answer:
        current_only = stems(gold.answer) - stems(gold.superseded)
        if lexical_verdict(gold.superseded, answer.text)[0] and not current_only & stems(answer.text):
            return Finding(STALE, f"{GOLD_RULE}: the answer{who} states the superseded state {gold.superseded!r}; "
                           f"{where}", (), "gold superseded", GOLD_RULE, where)
    for u in reference.updates:
        if (why := _restates(answer.text, u)) is not None:
            rule, edge = (GOLD_RULE, "gold") if reference.label == GOLD_CHAIN else (FOREST_RULE, "forest's")
            return Finding(STALE, f"{rule}: the answer{who} repeats {u.parent_id} ({why}), which the {edge} UPDATE "
                           f"edge {u.parent_id} -> {u.child_id} (confidence {u.confidence:.2f}) replaces with "
                           f"{u.child_id}; {where}", (u.parent_id, u.child_id),
                           "gold UPDATE" if rule == GOLD_RULE else "forest UPDATE", rule, where)
    return None


def _restates(answer: str, u: Update) -> str | None:
    """Why the answer restates the replaced side of `u` ("stems ...; its date 3, replaced by 17"), or None: it is
    drawn from the parent, shares MIN_STALE_UNITS stems only the parent has and none only the child has, and states
    a value the child replaced and none the child brought."""
    said, old, new = stems(answer), stems(u.parent_text), stems(u.child_text)
    shared = said & (old - new)
    drawn = len(said & old) > len(said) / 2 and len(said & old) > len(said & new)
    if not drawn or len(shared) < MIN_STALE_UNITS or said & (new - old):
        return None
    stated = values(answer)
    for slot in u.slots:
        if set(slot.old) & stated and not set(slot.new) & stated:
            return (f"{', '.join(sorted(shared)[:5])}; its {slot.kind} {', '.join(sorted(set(slot.old) & stated))}"
                    f", replaced by {', '.join(slot.new)}")
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
        self.children = update_edges(gold_edges).children  # shared: read, never changed
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


def findings(trace: Trace, gold: Gold | None, times: Mapping[str, datetime], gold_edges: Iterable[tuple] = (),
             reference: Reference | None = None) -> tuple[Finding, ...]:
    """Both checks, in the order of CATEGORIES (`reference`: see stale_answer)."""
    edges = update_edges(gold_edges)  # the UPDATE maps built once for gold_chain and the rollback check
    return tuple(f for f in (stale_answer(trace, gold, reference=reference),
                             revision_without_rollback(trace, gold, times, edges)) if f)
