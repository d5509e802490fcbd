"""Stored traces as the CLI and the app find them: the trace of a question under a variant, configuration and
backend; exactly the trace a `TraceRef` or a result row names; and the result rows of every stored trace of a corpus
(tmem.analysis.results builds each row)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from tmem.analysis import results as result_rows
from tmem.config import TMemConfig, config_hash
from tmem.store import Store
from tmem.types import Question, Trace, TraceRef


def find_trace(store: Store, corpus: str, question: Question, variant: str, config: TMemConfig,
               roles) -> Trace | None:
    """The stored trace of this question under this variant, configuration and backend, if any."""
    return store.load_trace(corpus, question.scope, question.id, variant, config_hash(config), roles.label)


def load_trace(store: Store, corpus: str, scope: str, question_id: str, ref: TraceRef) -> Trace | None:
    """Exactly the stored trace `ref` names for one question, or None when there is none."""
    return store.load_trace(corpus, scope, question_id, ref.variant, ref.config_hash, ref.backend)


def result_trace(store: Store, corpus: str, row: Mapping[str, Any], side: str = "") -> Trace | None:
    """The stored trace behind one result row (`side` picks suffixed columns, e.g. " (baseline)")."""
    ref = TraceRef.from_row(row, side)
    return load_trace(store, corpus, row["scope"], row["question_id"], ref) if ref else None


def trace_results(store: Store, corpus: str) -> pd.DataFrame:
    """Rows shaped like Store.RUN_RESULT_COLUMNS, one per stored trace of a stored question (latest per variant,
    scope, question, configuration and backend), with the failure attributed from the trace
    (tmem.analysis.results.result_row)."""
    questions = {(q.scope, q.id): q for q in store.questions(corpus)}
    rows = []
    for r in store.trace_index(corpus).drop_duplicates(["scope", "question_id", "variant", "config_hash", "backend"],
                                                       keep="last").itertuples():
        q = questions.get((r.scope, r.question_id))
        trace = store.load_trace(corpus, r.scope, r.question_id, r.variant, r.config_hash, r.backend)
        if q is None or trace is None:
            continue
        gold = store.gold(corpus, q.scope, q.id)
        ids = result_rows.blame_ids(trace, gold)
        messages = {m.id: m for m in store.messages_by_ids(corpus, q.scope, ids)} if ids else {}
        rows.append(result_rows.result_row(corpus, q, trace, r.backend, str(r.created_at), gold, messages))
    return result_rows.label_variants(pd.DataFrame(rows, columns=list(Store.RUN_RESULT_COLUMNS)))
