"""A baseline's context on the Question view (tmem.baselines, App. B): what the memory system recalled for the
question, item by item (a stored message or text the system derived, the messages it came from, its own score,
whether the cut at B left it whole), which gold units those sources hold, and what the system cost: its
construction (paid once per scope, Table 6) and this question's recall calls.

Where an item has no source ids the system derived text the evidence verdict cannot credit: it is said, not
guessed. Pure functions; text is plain (pages escape it, tables are data).
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tmem.analysis.funnel import memory_system
from tmem.types import Gold, Trace
from tmem.viz.question.forest_view import first_words


@dataclass(frozen=True)
class MemorySummary:
    system: str
    items: str  # "12 items: 9 derived, 10 traced to source messages; 11 whole in the context"
    gold: str  # "gold units among the sources of items in the context: 1 of 2" or why it cannot be told
    cost: str  # construction and this question's calls


def memory_summary(trace: Trace, gold: Gold | None) -> MemorySummary | None:
    """None for a trace of T-Mem's own variants (no memory stage)."""
    system = memory_system(trace)
    if system is None:
        return None
    items = trace.memories
    derived = sum(m.derived for m in items)
    sourced = sum(bool(m.source_ids) for m in items)
    whole = sum(m.in_context for m in items)
    counted = f"{len(items)} item{'s' if len(items) != 1 else ''}: {derived} derived by the system, {sourced} traced " \
              f"to source messages; {whole} whole in the answer context"
    return MemorySummary(system, counted, _gold_line(trace, gold), _cost_line(trace))


def _gold_line(trace: Trace, gold: Gold | None) -> str:
    if gold is None or not gold.evidence:
        return "not scored on evidence (no gold evidence units)"
    held = {i for m in trace.memories if m.in_context for i in m.source_ids}
    n = sum(bool(set(u) & held) for u in gold.evidence)
    line = f"gold units among the sources of the items in the context: {n} of {len(gold.evidence)}"
    if any(m.in_context and not m.source_ids for m in trace.memories):
        line += " (items with no source ids are not credited: the system keeps no link to the messages)"
    return line


def _cost_line(trace: Trace) -> str:
    stage = trace.stage("memory")
    c = stage.counts
    built = (f"construction {int(c.get('ingestion_prompt_tokens', 0)):,} prompt + "
             f"{int(c.get('ingestion_completion_tokens', 0)):,} completion tokens over "
             f"{int(c.get('ingestion_calls', 0)):,} calls ({int(c.get('ingestion_cached_calls', 0)):,} from the cache)"
             + (f", {int(c['ingestion_embedding_tokens']):,} embedding tokens" if c.get("ingestion_embedding_tokens")
                else "")
             + (", built by an earlier question (paid once per scope)" if c.get("ingestion_reused") else ""))
    u = stage.usage
    asked = (f"this question's recall: {u.prompt_tokens:,} prompt + {u.completion_tokens:,} completion tokens over "
             f"{u.calls:,} calls" if u.calls else "this question's recall made no model call")
    return f"{built}; {asked}"


def memory_table(trace: Trace, gold: Gold | None) -> pd.DataFrame:
    """One row per recalled item, in the system's order: its first words, whether a source holds gold evidence,
    whether it reached the context whole, its kind ("· derived": text the system wrote), the source message ids and
    the system's score (the text first: at 1,100 px the later columns scroll)."""
    gold_ids = gold.evidence_ids if gold else frozenset()
    rows = [{"rank": m.rank, "text": first_words(m.text, 40, 300),
             "gold": "gold" if set(m.source_ids) & gold_ids else "",
             "in context": "whole" if m.in_context else "cut at B",
             "kind": f"{m.kind} · derived" if m.derived else m.kind,
             "sources": ", ".join(m.source_ids) or "— (no source ids)",
             "score": None if m.score is None else round(float(m.score), 4)} for m in trace.memories]
    return pd.DataFrame(rows, columns=["rank", "text", "gold", "in context", "kind", "sources", "score"])
