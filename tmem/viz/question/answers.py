"""The answer cards of the Question view and the failure context of a result row: verdicts that say "error" when a
model role failed, the error callout (what failed, after how many attempts, which fallback the pipeline used, what
to do), readable failure details, and the funnel stages a variant did not run ("off").

One rule decides "error" everywhere: a trace whose stages recorded a role failure with a fallback (notes about
ignored invalid output do not count) — the same rule the batch runner uses for a row's status
(tmem.pipeline.stages.StageOutput.failed), so the Question view's grey badge and the Failures view's "error" count
agree. Pure functions; the text they return is plain (pages escape it for Markdown with `tmem.viz.safe.md`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from tmem.analysis import verdicts as vd
from tmem.analysis.funnel import SYSTEM_LACKS, lacks, stage_sets
from tmem.analysis.results import failure_line, role_failures
from tmem.types import UPDATE, Gold, Trace

# funnel stage -> the pipeline stage that must have run for its count to mean anything
FUNNEL_NEEDS = {"windows": "discovery", "forest": "structuring"}  # every variant has an answer context


@dataclass(frozen=True)
class AnswerCard:
    presentation: str
    text: str | None  # None: the variant gives no answer of this presentation
    verdict: str | None  # "correct", "wrong", "error" (a role failed), None (not judged)
    offline: bool
    caption: str
    errors: tuple[str, ...]  # one line per failed role that touched this answer


def answer_cards(trace: Trace) -> list[AnswerCard]:
    """The forest and flat answer cards of one trace."""
    failed = role_failures(trace)
    cards = []
    for presentation in ("forest", "flat"):
        answer, verdict = trace.answer(presentation), trace.verdict(presentation)
        if answer is None:
            cards.append(AnswerCard(presentation, None, None, False, f"No {presentation} answer in this variant.", ()))
            continue
        label = "error" if failed else (None if verdict is None else "correct" if verdict.correct else "wrong")
        # one line per distinct failure: the forest and the flat answer each record the same endpoint failure
        mine = tuple(dict.fromkeys(failure_line(e) for e in failed if e.stage in ("answer", "judge"))) or \
            tuple(dict.fromkeys(failure_line(e) for e in failed))
        caption = f"{answer.backend} · {answer.context_tokens} tokens of context" + (
            f" · {update_chain_reason(answer.reason, trace)}" if answer.reason else "")
        cards.append(AnswerCard(presentation, answer.text, label, answer.offline, caption, mine))
    return cards


_CHAIN = re.compile(r"followed UPDATE chain ((?:[^\s;>]+ -> )+[^\s;]+)")


def update_chain_reason(reason: str, trace: Trace) -> str:
    """An answerer's reason with its "followed UPDATE chain a -> b -> c" checked against the forest: told with arrows
    when every step is an UPDATE edge of the trace, flagged when one is not (a reason must name only real edges)."""
    found = _CHAIN.search(reason or "")
    if not found:
        return reason
    ids = found.group(1).split(" -> ")
    nodes = {n.message_id: n for n in trace.nodes}
    by_index = {n.index: n for n in trace.nodes}
    real = all(b in nodes and nodes[b].relation == UPDATE and a == getattr(by_index.get(nodes[b].parent_index),
                                                                         "message_id", None)
               for a, b in zip(ids, ids[1:]))
    told = "followed UPDATE chain " + " → ".join(ids) + ("" if real else " (not an UPDATE chain of this forest)")
    return reason[:found.start()] + told + reason[found.end():]


def advice(trace: Trace) -> str:
    """What to do about the failed roles of a trace (empty when none failed)."""
    stages = {e.stage for e in role_failures(trace)}
    if not stages:
        return ""
    if stages & {"answer", "judge", "evidence_utility", "relation"}:
        return ("Check the role's endpoint on the Settings page (base URL, model, the API-key variable; "
                "*Test endpoint* if available), then press **Re-run**. The verdict is shown as *error*: a fallback "
                "answered, not the model.")
    return "A stage fell back to a simpler rule (see the message); the verdict is shown as *error*."


_LIST = re.compile(r"\[((?:'[^'\[\]]*'|\"[^\"\[\]]*\"|\d+)(?:, (?:'[^'\[\]]*'|\"[^\"\[\]]*\"|\d+))*)\]")
_QUOTED = re.compile(r"'([^'\s][^']*)'")


def readable(detail: object) -> str:
    """A failure detail without Python syntax: "unit ['m1', 'm2']" -> "unit m1 / m2", "topic 'x'" -> "topic “x”";
    "—" for nothing."""
    if detail is None or (isinstance(detail, float) and detail != detail) or str(detail).strip() in ("", "None"):
        return "—"
    text = _LIST.sub(lambda m: " / ".join(p.strip("'\"") for p in m.group(1).split(", ")), str(detail))
    return _QUOTED.sub(lambda m: f"“{m.group(1)}”", text)


def stages_off(trace: Trace) -> frozenset[str]:
    """Funnel stages whose pipeline stage this variant did not run (shown as "off", not as a count); a memory
    system's (tmem.analysis.funnel.lacks) are `stages_not_part` instead."""
    return frozenset(f for f, needed in FUNNEL_NEEDS.items()
                     if trace.stage(needed) is None and not lacks(trace, f))


def stages_not_part(trace: Trace) -> frozenset[str]:
    """Funnel stages that are not part of the memory system a baseline's trace ran (its windows, selection, forest)."""
    return frozenset(f for f in SYSTEM_LACKS if lacks(trace, f))


PIPELINE = ("seed_retrieval", "discovery", "structuring", "compression", "answer", "judge")


def stage_rows(summary: pd.DataFrame, trace: Trace) -> pd.DataFrame:
    """The per-stage summary (tmem.viz.run_settings.trace_summary) with a row "off" for each pipeline stage this
    variant did not run, in pipeline order; "—" in empty cells."""
    ran = set(summary["stage"]) if len(summary) else set()
    off = pd.DataFrame([{"stage": name, "seconds": "off", "counts": "off (not in this variant)"}
                        for name in PIPELINE if name not in ran and trace.stage(name) is None])
    rows = pd.concat([summary.astype(object), off], ignore_index=True) if len(off) else summary.astype(object)
    order = {name: i for i, name in enumerate(PIPELINE)}
    rows = rows.sort_values("stage", key=lambda s: s.map(lambda n: order.get(n, len(order))), kind="stable")
    # one type per column for Arrow: text where "off" or "—" stands among numbers
    return rows.reset_index(drop=True).map(lambda v: "—" if v is None or v == "" or v != v else str(v))


def lost_unit(trace: Trace, gold: Gold | None) -> tuple[str, ...]:
    """The message ids of the first gold evidence unit that did not reach the answer model intact (the unit a
    failure lost), or () when every unit arrived."""
    if gold is None:
        return ()
    arrived = stage_sets(trace)["after_compression"]
    return next((tuple(unit) for unit in gold.evidence if not set(unit) & arrived), ())


def evidence_line(trace: Trace, gold: Gold | None) -> tuple[str, str]:
    """The verdict line above the answer cards as (head, rest), plain text (tmem.analysis.verdicts): offline the
    evidence leads and the stand-in's verdict is secondary; with a real answer model the judged answer leads and the
    evidence stands beside it."""
    offline = bool(trace.answers) and all(a.offline for a in trace.answers)
    if gold is None or not gold.evidence:
        return ("Not scored on evidence", "an abstention question, or no gold evidence: " + (
            "the stand-in's verdict below is all there is, and it is secondary." if offline else
            "the judged answer below is the verdict."))
    held = stage_sets(trace)["after_compression"]
    units = sum(bool(set(u) & held) for u in gold.evidence)
    missing = vd.missing_units(gold.evidence, held)
    rest = (f"the answer context (after compression and the cut at B) held {units} of {len(gold.evidence)} gold unit(s)"
            + (f"; missing {missing}" if missing else ""))
    return (f"Evidence {vd.evidence_verdict(len(gold.evidence), units)}", rest + (
        ". Offline stand-ins answered: this is the primary verdict; the answers' verdicts below are secondary "
        "(a plumbing figure)." if offline else ". A real model answered: its judged answers below lead."))
