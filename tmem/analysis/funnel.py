"""Where gold evidence survives and where it is lost: the evidence funnel and automatic failure attribution.

Evidence is counted in units (App. A.4): a unit survives a stage when any of its acceptable messages does.
Stages, in pipeline order: anchors (BM25 top-k) -> windows (anchors or ranked candidates of a discovery
window) -> selected (R'(q)) -> forest (nodes) -> in the answer context ("after_compression": the message's whole
text reached the primary answer's context: no span of it omitted by compression, and its line not shortened or
removed by the cut at B that follows compression, replaces it in the variants without compression, and ends
every flat list; the trace's Cut records).
A memory system run as a baseline (tmem.baselines, a "memory" stage) has its own recall in place of the anchors and
none of T-Mem's windows, selection or forest: those stages are "not part of this system" (`lacks`), never lost
evidence, and a unit it did not recall is a `RECALL_MISS`, not an anchor miss.
Pure functions over a stored Trace and its Gold: the explorer and the batch runner read, never recompute.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tmem.pipeline.linearize import END
from tmem.types import UPDATE, Cut, Gold, Message, Trace

FUNNEL_STAGES = ("gold", "anchors", "windows", "selected", "forest", "after_compression")

# Failure categories, in the order the pipeline can lose evidence.
RECALL_MISS = "not recalled by the memory system"
ANCHOR_MISS = "anchor miss"
WINDOW_MISS = "window miss"
SELECTION_MISS = "selection miss"
LINK_ERROR = "link error"
COMPRESSED_AWAY = "compressed away"
CUT_AT_B = "cut at B"
ANSWER_WRONG = "answer wrong despite evidence"
FAILURE_CATEGORIES = (RECALL_MISS, ANCHOR_MISS, WINDOW_MISS, SELECTION_MISS, LINK_ERROR, COMPRESSED_AWAY, CUT_AT_B,
                      ANSWER_WRONG)


NOT_PART = "not part of this system"
SYSTEM_LACKS = ("windows", "selected", "forest")  # funnel stages a memory system has no counterpart of


def memory_system(trace: Trace) -> str | None:
    """The memory system a baseline's trace ran ("adaptation of HippoRAG 2 ..."), None for T-Mem's variants."""
    stage = trace.stage("memory")
    return stage.backend.split(";", 1)[0].strip() if stage is not None else None


def lacks(trace: Trace, stage: str) -> bool:
    """True when `stage` of the funnel is not part of the system the trace ran (a memory system's windows,
    selection and forest): shown as such, never counted as evidence lost there."""
    return stage in SYSTEM_LACKS and trace.stage("memory") is not None


def stage_sets(trace: Trace) -> dict[str, set[str]]:
    """The message ids present after each stage; "after_compression": those whose whole text is in the context of
    the primary answer (module docstring)."""
    anchors = {a.message_id for a in trace.anchors}
    windows = anchors | {c.message_id for w in trace.windows for c in w.candidates}
    selected = set(trace.evidence_ids)
    forest = {n.message_id for n in trace.nodes} if trace.stage("structuring") else selected
    presentation = primary_presentation(trace)
    shown = forest if presentation == "forest" else selected
    omitted = {s.message_id for s in trace.spans if not s.kept}
    if presentation == "flat" and (trace.config.get("answer") or {}).get("flat_budget") == "truncate":
        omitted = set()  # this flat list keeps the spans compression omitted from the forest
    cut = {c.message_id for c in cuts_of(trace) if c.context == presentation}
    return {"anchors": anchors, "windows": windows, "selected": selected, "forest": forest,
            "after_compression": shown - omitted - cut}


def primary_presentation(trace: Trace) -> str:
    """The presentation of the primary answer: "forest" or "flat"."""
    if trace.answers:
        return trace.answers[0].presentation
    return "forest" if trace.stage("structuring") else "flat"


def cuts_of(trace: Trace) -> tuple[Cut, ...]:
    """The cuts at B the trace recorded; for a trace stored before they were recorded, read off its contexts."""
    return trace.cuts if trace.cuts is not None else stored_context_cuts(trace)


_NUMBERED = re.compile(r"\s*\[(\d+)\] ")


def stored_context_cuts(trace: Trace) -> tuple[Cut, ...]:
    """The messages missing whole from a stored context that does not end with its END line (it was cut at B): each
    context line is one message, numbered [i] (a forest node's index, or the position in the flat list)."""
    out: list[Cut] = []
    forest = trace.context if trace.stage("structuring") else ""
    flat_order = list(trace.evidence_ids)
    if (trace.config.get("answer") or {}).get("flat_order") == "chronological" and trace.nodes:
        when = {n.message_id: n.timestamp for n in trace.nodes}
        flat_order.sort(key=lambda i: when.get(i) or min(when.values()))
    by_index = {n.index: n.message_id for n in trace.nodes}
    for context, text, ids in (("forest", forest, by_index),
                               ("flat", trace.flat_context or trace.context, dict(enumerate(flat_order, start=1)))):
        if not text or text.endswith(END):
            continue
        whole = {int(m.group(1)) for line in text.split("\n")[:-1] if (m := _NUMBERED.match(line))}
        out += [Cut(mid, context, -1, -1, "cut at B (read off a context stored before cuts were recorded)")
                for i, mid in ids.items() if i not in whole]
    return tuple(out)


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
    system = memory_system(trace)
    for unit in gold.evidence:
        ids = set(unit)
        if ids & sets["selected"]:
            continue
        if system is not None:
            return Attribution(RECALL_MISS, f"unit {sorted(ids)} is the source of no item {system} recalled "
                               "(windows, selection and a forest are not part of this system)")
        if not ids & sets["windows"]:
            if not trace.stage("discovery") or not any(messages.get(i) and messages[i].topic in anchor_topics
                                                       for i in ids):
                return Attribution(ANCHOR_MISS, f"unit {sorted(ids)} not among the anchors"
                                   + ("" if not trace.stage("discovery") else " and no anchor shares its topic"))
            return Attribution(WINDOW_MISS, f"unit {sorted(ids)} missed by seeds and outside every window")
        return Attribution(SELECTION_MISS, f"unit {sorted(ids)} was a window candidate but was not selected")
    cut = {c.message_id: c for c in cuts_of(trace) if c.context == primary_presentation(trace)}
    for unit in gold.evidence:
        if not set(unit) & sets["after_compression"]:
            if all(i in cut for i in unit if i in sets["forest"] | sets["selected"]):
                return Attribution(CUT_AT_B, f"line of unit {sorted(unit)} shortened or removed by the cut at B: "
                                   + cut[next(i for i in unit if i in cut)].reason)
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
