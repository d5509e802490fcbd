"""The first screen's evidence card: what the pipeline decided for one question, before any answer is read.

Offline, the answer context is what T-Mem decides (tmem.analysis.verdicts): the card leads with the evidence verdict,
the gold units each stage found (BM25 anchors -> discovery windows -> forest -> answer context, Sec. 4.2-4.3) and
the decisive message, the gold message BM25 missed and discovery recovered (the paper's case for windows), with the
UPDATE edge that ties it to the state it replaced. The answer cards follow it as secondary.

Also here: a stale answer told in plain words (tmem.analysis.stale's finding: the state repeated and what replaced
it), the plain sentence for an answer of a small local model, and how a message is named where its id is long or
machine-made (Slack "random/1747299960.000000", IRC): by author and time, the id kept for a tooltip.
Pure functions; text is plain (pages escape it with tmem.viz.safe.md).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from tmem.analysis import verdicts as vd
from tmem.analysis.funnel import NOT_PART, lacks, memory_system, stage_sets
from tmem.analysis.stale import Finding
from tmem.types import UPDATE, Answer, Gold, Trace
from tmem.viz.question.forest_view import first_words

# (funnel stage, label, the pipeline stage that must have run): what the card counts, in pipeline order; every
# variant gives its answer model a context, compressed or not, so that step is never "off"
STEPS = (("anchors", "BM25 anchors", "seed_retrieval"), ("windows", "discovery windows", "discovery"),
         ("forest", "forest", "structuring"), ("after_compression", "answer context", "answer"))
_READABLE_ID = re.compile(r"[A-Za-z]{1,8}[_-]?\d{1,7}(?:[:_]\d{1,4})?")  # Msg_2100, m04, D1:3: read as they are


@dataclass(frozen=True)
class Decisive:
    """A gold message the answer context holds although BM25 did not rank it among the anchors."""

    message_id: str
    name: str  # the id, or "author · time" for a machine-made id
    text: str  # its first words
    how: str  # how it got in: the window and its rank there, and the UPDATE edge that links it


@dataclass(frozen=True)
class EvidenceCard:
    verdict: str | None  # complete / partial / none; None: not scored (no gold evidence)
    headline: str
    steps: tuple[tuple[str, str], ...]  # (label, "1 of 2" or "off")
    decisive: tuple[Decisive, ...]
    missing: str  # the gold units the answer context lacks ("" when none)
    note: str  # what this verdict is, and how the answers below relate to it


def machine_made(message_id: str) -> bool:
    """An id a reader cannot use as a name: long, or not a word and a number (Slack's channel/timestamp, IRC's)."""
    return not _READABLE_ID.fullmatch(message_id or "")


def message_name(message_id: str, author: str | None, when: datetime | None) -> str:
    """The id where it reads as a name, else "author · Mar 19 14:00" (the id then belongs in a tooltip)."""
    if not machine_made(message_id) or (not author and when is None):
        return message_id
    return " · ".join(p for p in (author, when and f"{when:%b} {when.day} {when:%H:%M}") if p)


def _step(trace: Trace, gold: Gold, sets: Mapping[str, set[str]], stage: str, needs: str) -> str:
    if lacks(trace, stage):
        return NOT_PART
    if stage == "anchors" and memory_system(trace):  # the system's own recall stands where the anchors are
        needs = "memory"
    if trace.stage(needs) is None:
        return "off"
    return f"{sum(bool(set(u) & sets[stage]) for u in gold.evidence)} of {len(gold.evidence)}"


def _how(trace: Trace, mid: str) -> str:
    window = next(((w.window_id, c.rank) for w in trace.windows for c in w.candidates if c.message_id == mid), None)
    got = (f"discovery window {window[0]} recovered it (rank {window[1]} in the window)" if window
           else "it reached the evidence without being an anchor")
    edge = next((e for e in trace.edges if e.relation == UPDATE and mid in (e.parent_id, e.child_id)), None)
    if edge is None:
        return f"BM25 missed it; {got}"
    return f"BM25 missed it; {got}; the forest links it: {edge.parent_id} → UPDATE → {edge.child_id}"


def evidence_card(trace: Trace, gold: Gold | None, offline: bool) -> EvidenceCard:
    """The card of one trace under its gold (`offline`: offline stand-ins answered, so the evidence is the primary
    verdict)."""
    answers = ("The stand-in answers below are secondary: an extractive answerer and a lexical judge, not a "
               "language model." if offline else "A real model answered: its judged answers below are the verdict; "
               "this card says what it was given.")
    if gold is None or not gold.evidence:
        return EvidenceCard(None, "Not scored on evidence: an abstention question, or no gold evidence", (), (), "",
                            answers)
    sets = stage_sets(trace)
    held = sum(bool(set(u) & sets["after_compression"]) for u in gold.evidence)
    verdict = vd.evidence_verdict(len(gold.evidence), held)
    every = {1: "the gold unit", 2: "both gold units"}.get(len(gold.evidence), f"all {len(gold.evidence)} gold units")
    headline = {vd.COMPLETE: f"Evidence complete: {every} reached the answer model",
                vd.PARTIAL: f"Evidence partial: {held} of {len(gold.evidence)} gold units reached the answer model",
                vd.NONE: f"Evidence none: no gold unit of {len(gold.evidence)} reached the answer model"}[verdict]
    system = memory_system(trace)
    steps = tuple(("recalled by " + system if system and stage == "anchors" else label,
                   _step(trace, gold, sets, stage, needs)) for stage, label, needs in STEPS)
    nodes = {n.message_id: n for n in trace.nodes}
    decisive = tuple(Decisive(mid, message_name(mid, nodes[mid].author if mid in nodes else None,
                                                 nodes[mid].timestamp if mid in nodes else None),
                              first_words(nodes[mid].text, 30, 200) if mid in nodes else "", _how(trace, mid))
                     for unit in gold.evidence for mid in unit
                     if mid in sets["after_compression"] and mid not in sets["anchors"])
    return EvidenceCard(verdict, headline, steps, decisive, vd.missing_units(gold.evidence, sets["after_compression"]),
                        ("Offline this is the primary verdict: what "
                         + (system or "T-Mem") + " put in front of the answer model. " if offline else "")
                        + _unsourced(trace) + answers)


def _unsourced(trace: Trace) -> str:
    """What the verdict cannot count: items a memory system derived with no source message ids."""
    n = sum(1 for m in trace.memories if m.in_context and not m.source_ids)
    return (f"{n} item{'s' if n != 1 else ''} in the context {'are' if n != 1 else 'is'} text the system derived with "
            "no source message ids: the verdict cannot credit them with any gold unit. ") if n else ""


def model_size(backend: str) -> str | None:
    """"1.5B" from a backend label naming a model's size (qwen2.5-coder-1.5b-instruct), else None."""
    found = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)b(?![a-z])", backend.lower())
    return f"{found.group(1)}B" if found else None


def small_model_line(answer: Answer, correct: bool | None) -> str | None:
    """For an answer a small local model gave (a recorded run replays one): who answered and how it did, plainly;
    None for offline stand-ins and for models whose size the label does not say."""
    size = model_size(answer.backend)
    if answer.offline or size is None:
        return None
    model = answer.backend.split(" [", 1)[0].split("@", 1)[0].split(":", 1)[-1]
    recorded = " (its recorded replies, replayed)" if answer.backend.startswith("recorded:") else ""
    outcome = {True: "and was right.", False: "and was wrong.", None: "(not judged)."}[correct]
    return f"A {size} model answered{recorded}: {model}, a small local model, {outcome}"


def stale_line(finding: Finding, gold: Gold | None, texts: Mapping[str, str]) -> str:
    """A stale answer in plain words: the state it repeats and what replaced it (`texts`: message id -> text)."""
    if finding.source == "forest UPDATE" and len(finding.messages) == 2:
        old, new = finding.messages
        return (f"Stale answer: it repeats {old} (“{first_words(texts.get(old, ''), 12, 90)}”), which {new} "
                f"replaced (“{first_words(texts.get(new, ''), 12, 90)}”).")
    if gold is not None and gold.superseded:
        return f"Stale answer: it repeats the superseded state “{gold.superseded}”, replaced by “{gold.answer}”."
    return f"Stale answer: {finding.detail}."
