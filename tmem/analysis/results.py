"""Per-question result rows rebuilt from the traces the app stored, shaped like `Store.RUN_RESULT_COLUMNS`, so the
Failures and Compare views work on app runs as on batch runs (`python -m tmem run`), with the failure attributed from
the trace; and the one rule that says a role failed (a fallback was used), which the Question view's badges and a
row's status share. Pure: the front door (`tmem.api.trace_results`) reads the store and hands the values in.
"""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from tmem.analysis.funnel import attribute_failure, evidence_funnel
from tmem.config import VARIANTS, config_hash, variant_config
from tmem.types import Gold, Message, Question, StageError, Trace

ROLE_NAMES = {"answer": "answer model", "judge": "judge model", "evidence_utility": "evidence-selection model",
              "relation": "relation model", "discovery": "discovery", "structuring": "structuring",
              "compression": "compression"}


def role_failures(trace: Trace) -> tuple[StageError, ...]:
    """Errors where a role failed and a fallback was used (dropped invalid items are notes, not failures)."""
    return tuple(e for e in trace.errors if e.fallback != "ignored")


def failure_line(error: StageError) -> str:
    """"answer model: <message> · fallback: empty answer" (the message already names backend and attempts)."""
    role = ROLE_NAMES.get(error.stage, error.stage)
    return f"{role}: {error.message}" + (f" · fallback: {error.fallback}" if error.fallback else "")


APP_RUN = "(traces run in the app)"


def result_row(corpus: str, q: Question, trace: Trace, backend: str, created: str, gold: Gold | None,
               messages: Mapping[str, Message]) -> dict:
    """One row shaped like Store.RUN_RESULT_COLUMNS for a stored trace of a stored question, the failure attributed
    from the trace (`messages`: the gold evidence and the anchors, `blame_ids`)."""
    verdict = trace.verdict(trace.answers[0].presentation) if trace.answers else None
    flat = trace.verdict("flat")
    failures = role_failures(trace)  # the batch runner's rule: a role failed and a fallback was used
    row = {"run_id": APP_RUN, "corpus": corpus, "variant": trace.variant, "config_hash": trace.config_hash,
           "backend": backend, "scope": q.scope, "question_id": q.id, "qtype": q.type,
           "status": "error" if failures else "ok", "correct": verdict.correct if verdict else None,
           "correct_flat": flat.correct if flat else None, "failure": None, "failure_detail": None,
           "units": None, "units_recovered": None, "evidence_messages": len(trace.evidence_ids),
           "prompt_tokens": sum(s.usage.prompt_tokens for s in trace.stages),
           "completion_tokens": sum(s.usage.completion_tokens for s in trace.stages),
           "seconds": round(sum(s.seconds for s in trace.stages), 3),
           "error": failure_line(failures[0]) if failures else None, "created_at": created}
    if gold is not None and gold.evidence:
        blame = attribute_failure(trace, gold, messages)
        row.update(failure=blame.category, failure_detail=blame.detail, units=len(gold.evidence),
                   units_recovered=evidence_funnel(trace, gold)["selected"])
    return row


def blame_ids(trace: Trace, gold: Gold | None) -> set[str]:
    """The messages `result_row` needs to attribute a failure: the gold evidence and the trace's anchors."""
    if gold is None or not gold.evidence:
        return set()
    return set(gold.evidence_ids) | {a.message_id for a in trace.anchors}


def label_variants(frame: pd.DataFrame) -> pd.DataFrame:
    """Result rows whose variant is not run under its preset's configuration labelled "variant@hash" (baselines
    such as embedding or global-control are not presets: their stored hash is their default)."""
    default = {v: config_hash(variant_config(v)) for v in frame["variant"].unique() if v in VARIANTS}
    frame["variant"] = [v if h == default.get(v) else f"{v}@{h[:6]}" for v, h in zip(frame["variant"],
                                                                                    frame["config_hash"])]
    return frame
