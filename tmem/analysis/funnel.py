"""Where gold evidence survives and where it is lost: the evidence funnel and automatic failure attribution.

Evidence is counted in units (App. A.4): a unit survives a stage when any of its acceptable messages does.
Stages, in pipeline order: anchors (BM25 top-k) -> windows (anchors or ranked candidates of a discovery
window) -> selected (R'(q)) -> forest (nodes) -> after compression (no span of the message omitted).
Pure functions over a stored Trace and its Gold: the explorer and the batch runner read, never recompute.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tmem.types import UPDATE, Gold, Message, Trace

FUNNEL_STAGES = ("gold", "anchors", "windows", "selected", "forest", "after_compression")

# Failure categories, in the order the pipeline can lose evidence.
ANCHOR_MISS = "anchor miss"
WINDOW_MISS = "window miss"
SELECTION_MISS = "selection miss"
LINK_ERROR = "link error"
COMPRESSED_AWAY = "compressed away"
ANSWER_WRONG = "answer wrong despite evidence"
FAILURE_CATEGORIES = (ANCHOR_MISS, WINDOW_MISS, SELECTION_MISS, LINK_ERROR, COMPRESSED_AWAY, ANSWER_WRONG)


def stage_sets(trace: Trace) -> dict[str, set[str]]:
    """The message ids present after each stage."""
    anchors = {a.message_id for a in trace.anchors}
    windows = anchors | {c.message_id for w in trace.windows for c in w.candidates}
    selected = set(trace.evidence_ids)
    forest = {n.message_id for n in trace.nodes} if trace.stage("structuring") else selected
    omitted = {s.message_id for s in trace.spans if not s.kept}
    return {"anchors": anchors, "windows": windows, "selected": selected, "forest": forest,
            "after_compression": forest - omitted}


def evidence_funnel(trace: Trace, gold: Gold) -> dict[str, int]:
    """Number of gold evidence units surviving each stage, starting with all units ("gold")."""
    sets = stage_sets(trace)
    out = {"gold": len(gold.evidence)}
    for stage in FUNNEL_STAGES[1:]:
        out[stage] = sum(bool(set(unit) & sets[stage]) for unit in gold.evidence)
    return out


@dataclass(frozen=True)
class Attribution:
    category: str | None  # None when the answer is correct or there is nothing to attribute
    detail: str


def attribute_failure(trace: Trace, gold: Gold, messages: Mapping[str, Message],
                      presentation: str | None = None) -> Attribution:
    """The first stage that lost gold evidence for a wrong answer (`messages`: gold messages by id, for topics)."""
    answer = trace.answer(presentation) if presentation else (trace.answers[0] if trace.answers else None)
    verdict = trace.verdict(answer.presentation) if answer else None
    if verdict is None:
        return Attribution(None, "no verdict (no gold answer or no answer)")
    if verdict.correct:
        return Attribution(None, "correct")
    lost = first_loss(trace, gold, messages)
    if lost is not None and lost.category != COMPRESSED_AWAY:
        return lost
    link = _link_problem(trace, gold, messages)  # a wrong link is blamed before compression
    if link:
        return Attribution(LINK_ERROR, link)
    return lost or Attribution(ANSWER_WRONG, "all gold evidence reached the answer model intact")


def first_loss(trace: Trace, gold: Gold, messages: Mapping[str, Message]) -> Attribution | None:
    """The first stage that lost a gold unit, whatever the verdict (None: every unit reached the answer context);
    the evidence verdict of an offline stand-in's answer is attributed with it. A lost link is not a lost unit."""
    sets = stage_sets(trace)
    anchor_topics = {messages[a.message_id].topic for a in trace.anchors if a.message_id in messages}
    for unit in gold.evidence:
        ids = set(unit)
        if ids & sets["selected"]:
            continue
        if not ids & sets["windows"]:
            if not trace.stage("discovery") or not any(messages.get(i) and messages[i].topic in anchor_topics
                                                       for i in ids):
                return Attribution(ANCHOR_MISS, f"unit {sorted(ids)} not among the anchors"
                                   + ("" if not trace.stage("discovery") else " and no anchor shares its topic"))
            return Attribution(WINDOW_MISS, f"unit {sorted(ids)} missed by seeds and outside every window")
        return Attribution(SELECTION_MISS, f"unit {sorted(ids)} was a window candidate but was not selected")
    for unit in gold.evidence:
        if not set(unit) & sets["after_compression"]:
            return Attribution(COMPRESSED_AWAY, f"text of unit {sorted(unit)} partly omitted by compression")
    return None


def _link_problem(trace: Trace, gold: Gold, messages: Mapping[str, Message]) -> str | None:
    """A gold message followed by a non-gold UPDATE (the chain leads past the gold state), or gold messages of
    one topic split across trees."""
    if not trace.nodes:
        return None
    gold_ids = gold.evidence_ids
    for e in trace.edges:
        if e.relation == UPDATE and e.parent_id in gold_ids and e.child_id not in gold_ids:
            return f"gold {e.parent_id} is superseded by non-gold UPDATE {e.child_id}"
    trees_by_topic: dict[str | None, set[int]] = {}
    for n in trace.nodes:
        if n.message_id in gold_ids and n.message_id in messages:
            trees_by_topic.setdefault(messages[n.message_id].topic, set()).add(n.tree)
    for topic, trees in trees_by_topic.items():
        if len(trees) > 1:
            return f"gold evidence of topic {topic!r} split over trees {sorted(trees)}"
    return None
