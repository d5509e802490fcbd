"""Temporal Memory Structuring: candidate parents (Eq. 4), relation judgement (Eq. 5), the forest (Sec. 4.3).

R'(q) is ordered by time. A possible parent of m_j is earlier (t_i < t_j), has the same topic, and has
O_i = (stage, phase_order, phase_progress) lexicographically <= O_j, where an empty field compares as equal.
The relation role labels each eligible pair UPDATE / EXPAND / NONE with a confidence (`label_pairs`); the
highest-confidence non-NONE candidate becomes the single parent, otherwise m_j roots a new tree. Replies are
validated here: a parent that is not an eligible candidate, or a label outside the allowed set, is dropped and
recorded. `link_parents` uses the role it is given: the run's role is chosen by tmem.models.relation.resolve_relation
(at the structuring stage); every decision keeps its reason.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx

from tmem.config import StructuringConfig
from tmem.models.base import RelationRole
from tmem.models.llm.concurrency import fan_out, role_workers
from tmem.types import (
    EXPAND,
    NONE,
    RELATED,
    ROOT,
    UPDATE,
    Edge,
    Message,
    ParentDecision,
    Question,
    RelationChoice,
    StageError,
    Usage,
)


def stage_order(message: Message) -> tuple:
    """O_i = (stage, phase_order, phase_progress)."""
    return (message.stage, message.phase_order, message.phase_progress)


def order_precedes(earlier: tuple, later: tuple) -> bool:
    """Lexicographic O_i <= O_j in which an empty (None) component compares as equal to anything."""
    for a, b in zip(earlier, later):
        if a is None or b is None or a == b:
            continue
        return a < b
    return True


def is_eligible_parent(parent: Message, child: Message, config: StructuringConfig) -> bool:
    if parent.timestamp >= child.timestamp:
        return False
    if config.use_topic and parent.topic != child.topic:
        return False
    return not config.use_phase or order_precedes(stage_order(parent), stage_order(child))


def candidate_parents(child: Message, earlier: Sequence[Message], config: StructuringConfig) -> list[Message]:
    """P_j (Eq. 4), most recent last; capped to the most recent `max_candidates` when that is set."""
    eligible = [p for p in earlier if is_eligible_parent(p, child, config)]
    return eligible[-config.max_candidates:] if config.max_candidates else eligible


@dataclass(frozen=True)
class StructuringResult:
    decisions: tuple[ParentDecision, ...]
    edges: tuple[Edge, ...]
    usage: Usage
    errors: tuple[StageError, ...]


def choose_parent(child: Message, candidates: Sequence[Message], choices: Sequence[RelationChoice],
                  typed: bool) -> tuple[ParentDecision, list[StageError]]:
    """The highest-confidence valid non-NONE choice wins (ties: the later candidate); else the child is a root."""
    position = {m.id: i for i, m in enumerate(candidates)}
    valid, errors = [], []
    for c in choices:
        if c.parent_id not in position:
            errors.append(StageError("structuring", f"child {child.id}: dropped parent {c.parent_id!r}, "
                                     "not an eligible earlier candidate", "ignored"))
        elif c.relation not in (UPDATE, EXPAND, NONE):
            errors.append(StageError("structuring", f"child {child.id}: dropped unknown relation "
                                     f"{c.relation!r}", "ignored"))
        elif c.relation != NONE:
            valid.append(c)
    ids = tuple(m.id for m in candidates)
    if not valid:
        why = next((c.reason for c in choices if c.relation == NONE and c.reason), "")
        root_confidence = max((c.confidence for c in choices if c.relation == NONE), default=0.0)
        return ParentDecision(child.id, ids, tuple(choices), None, ROOT, root_confidence,
                              "no direct parent" + (f": {why}" if why else "")), errors
    best = max(valid, key=lambda c: (c.confidence, position[c.parent_id]))
    relation = best.relation if typed else RELATED
    return ParentDecision(child.id, ids, tuple(choices), best.parent_id, relation, best.confidence,
                          best.reason), errors


def follow_update_tips(decisions: Sequence[ParentDecision], candidates: dict[str, Sequence[str]]
                       ) -> list[ParentDecision]:
    """Each UPDATE re-pointed at the tip of its parent's chain (`structuring.update_tip`): when an earlier child
    already UPDATEs the same parent, the later revision replaces that newer state, not the first statement. Walks
    decisions in child order (time order), so a tip is final before a later child reads it; a tip outside the
    child's own candidates (`candidates`: child id -> eligible parent ids) is not taken."""
    updated_by: dict[str, str] = {}  # parent id -> its latest UPDATE child so far
    out = []
    for d in decisions:
        if d.relation == UPDATE and d.parent_id is not None:
            tip, seen = d.parent_id, set()
            while tip in updated_by and tip not in seen and updated_by[tip] in candidates.get(d.child_id, ()):
                seen.add(tip)
                tip = updated_by[tip]
            if tip != d.parent_id:
                d = ParentDecision(**{**d.__dict__, "parent_id": tip,
                                      "note": f"{d.note}; chain tip: {d.parent_id} was updated by {tip}"})
            updated_by[d.parent_id] = d.child_id
        out.append(d)
    return out


def _prefetch_vectors(role, scope, messages: Sequence[Message]) -> None:
    """Read (or embed) the evidence's vectors in one batch before the per-child calls, which then hit the
    scope's row cache: one store read per question instead of one per child."""
    embedder = getattr(role, "embedder", None)
    if embedder is None or not hasattr(scope, "vectors_at"):
        return
    positions = [scope.position[m.id] for m in messages if m.id in scope.position]
    try:
        scope.vectors_at(embedder, positions)
    except Exception:  # noqa: BLE001 - the role then says it had no vectors, in every reason
        return


def link_parents(question: Question, evidence: Sequence[Message], role: RelationRole, scope,
                 config: StructuringConfig, progress=None) -> StructuringResult:
    ordered = sorted(evidence, key=lambda m: (m.timestamp, m.id))
    _prefetch_vectors(role, scope, ordered)
    decisions, edges, errors = [], [], []
    usage = Usage(source="offline" if role.offline else "none")
    eligible = [candidate_parents(child, ordered[:j], config) for j, child in enumerate(ordered)]
    asked = [j for j, candidates in enumerate(eligible) if candidates]  # App. K: one call per child, all at once
    replies = dict(zip(asked, fan_out(lambda j: role.label_pairs(question, ordered[j], eligible[j], scope), asked,
                                      role_workers(role), progress)))  # taken in child order below
    for j, child in enumerate(ordered):
        candidates = eligible[j]
        if not candidates:
            decisions.append(ParentDecision(child.id, (), (), None, ROOT, 1.0, "no eligible earlier candidate"))
            continue
        result = replies[j]
        usage = usage + result.usage
        decision, invalid = choose_parent(child, candidates, result.choices, config.typed)
        errors += list(result.errors) + invalid
        if result.errors and decision.parent_id is None:
            decision = ParentDecision(**{**decision.__dict__, "note": "relation role failed: root as fallback"})
        decisions.append(decision)
        if decision.parent_id is not None:
            edges.append(Edge(decision.parent_id, child.id, decision.relation, decision.confidence))
    if config.update_tip:
        decisions = follow_update_tips(decisions, {c.id: [p.id for p in eligible[j]] for j, c in enumerate(ordered)})
        edges = [Edge(d.parent_id, d.child_id, d.relation, d.confidence) for d in decisions if d.parent_id]
    return StructuringResult(tuple(decisions), tuple(edges), usage, tuple(errors))


def build_forest(messages: Sequence[Message], edges: Sequence[Edge]) -> nx.DiGraph:
    """The evidence forest F_q as a directed graph parent -> child (every node has at most one parent)."""
    graph = nx.DiGraph()
    for m in messages:
        graph.add_node(m.id, timestamp=m.timestamp)
    for e in edges:
        graph.add_edge(e.parent_id, e.child_id, relation=e.relation, confidence=e.confidence)
    return graph
