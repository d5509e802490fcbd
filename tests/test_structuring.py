"""Temporal Memory Structuring: candidate-parent constraints (Eq. 4), single parent (Eq. 5), fallbacks."""
from dataclasses import dataclass
from datetime import datetime, timedelta

from tmem.config import StructuringConfig
from tmem.models.base import RelationResult
from tmem.pipeline.structuring import (
    build_forest,
    candidate_parents,
    choose_parent,
    is_eligible_parent,
    link_parents,
    order_precedes,
)
from tmem.types import EXPAND, NONE, RELATED, ROOT, UPDATE, Message, Question, RelationChoice, StageError

T0 = datetime(2025, 1, 1)
Q = Question("q", "s", "what changed?", "u")


def msg(mid, hours, topic="A", stage=1, order=1, progress=0.5):
    return Message(mid, "s", mid, T0 + timedelta(hours=hours), topic=topic, stage=stage, phase_order=order,
                   phase_progress=progress)


def test_lexicographic_order_with_empty_fields_equal():
    assert order_precedes((1, 1, 0.5), (1, 2, 0.1))
    assert not order_precedes((2, 1, 0.1), (1, 9, 0.9))
    assert order_precedes((1, 1, 0.5), (1, 1, 0.5))
    assert not order_precedes((1, 2, 0.1), (1, 1, 0.9))
    assert order_precedes((None, None, None), (1, 1, 0.1))
    assert not order_precedes((1, None, 0.9), (1, 3, 0.1))  # phase_order empty: progress decides


def test_each_ordering_constraint_forbids_a_parent():
    child = msg("c", 10, stage=2, order=2, progress=0.5)
    config = StructuringConfig()
    assert is_eligible_parent(msg("ok", 5, stage=2, order=1, progress=0.9), child, config)
    assert not is_eligible_parent(msg("later", 11), child, config)
    assert not is_eligible_parent(msg("same-time", 10), child, config)
    assert not is_eligible_parent(msg("other-topic", 5, topic="B"), child, config)
    assert not is_eligible_parent(msg("later-stage", 5, stage=3), child, config)
    assert not is_eligible_parent(msg("later-phase", 5, stage=2, order=3), child, config)
    assert not is_eligible_parent(msg("more-progress", 5, stage=2, order=2, progress=0.8), child, config)
    relaxed = StructuringConfig(use_topic=False, use_phase=False)
    assert is_eligible_parent(msg("other-topic", 5, topic="B", stage=3), child, relaxed)


def test_candidates_are_capped_to_the_most_recent():
    earlier = [msg(f"p{i}", i) for i in range(5)]
    assert [m.id for m in candidate_parents(msg("c", 9), earlier, StructuringConfig(max_candidates=2))] == ["p3", "p4"]


def test_highest_confidence_wins_ties_go_to_the_later_candidate():
    child, cands = msg("c", 9), [msg("p1", 1), msg("p2", 2), msg("p3", 3)]
    choices = (RelationChoice("p1", EXPAND, 0.7), RelationChoice("p2", UPDATE, 0.7), RelationChoice("p3", NONE, 0.99))
    decision, errors = choose_parent(child, cands, choices, typed=True)
    assert (decision.parent_id, decision.relation, decision.confidence) == ("p2", UPDATE, 0.7) and not errors
    untyped, _ = choose_parent(child, cands, choices, typed=False)
    assert untyped.relation == RELATED
    none, _ = choose_parent(child, cands, (RelationChoice("p3", NONE, 0.9),), typed=True)
    assert none.parent_id is None and none.relation == ROOT


def test_invalid_parent_and_label_are_dropped():
    child, cands = msg("c", 9), [msg("p1", 1)]
    decision, errors = choose_parent(child, cands, (RelationChoice("ghost", UPDATE, 0.9),
                                                    RelationChoice("p1", "MERGE", 0.8)), typed=True)
    assert decision.parent_id is None and len(errors) == 2


@dataclass(frozen=True)
class _Role:
    """Proposes every message in the scope as an UPDATE parent, including forbidden ones; fails on 'boom'."""

    scope_messages: tuple
    backend: str = "test:greedy"
    offline: bool = False

    def label_pairs(self, question, child, candidates, scope):
        if child.id == "boom":
            return RelationResult(errors=(StageError("structuring", "timeout", "root"),))
        return RelationResult(choices=tuple(RelationChoice(m.id, UPDATE, 0.5 + 0.01 * i)
                                            for i, m in enumerate(self.scope_messages) if m.id != child.id))


def test_link_parents_builds_a_single_parent_forward_forest():
    messages = [msg("a", 1), msg("b", 2), msg("x", 3, topic="B"), msg("c", 4), msg("boom", 5)]
    result = link_parents(Q, messages, _Role(tuple(messages)), None, StructuringConfig())
    parents = {d.child_id: d.parent_id for d in result.decisions}
    # boom's role call failed: it roots a new tree and the error is recorded
    assert parents == {"a": None, "b": "a", "x": None, "c": "b", "boom": None}
    assert any("timeout" in e.message for e in result.errors)
    assert "relation role failed" in next(d.note for d in result.decisions if d.child_id == "boom")
    graph = build_forest(messages, result.edges)
    assert all(graph.in_degree(n) <= 1 for n in graph.nodes)
    times = {m.id: m.timestamp for m in messages}
    assert all(times[e.parent_id] < times[e.child_id] for e in result.edges)
    dropped = [e for e in result.errors if "not an eligible" in e.message]
    assert dropped  # later and cross-topic proposals were rejected by the gates
