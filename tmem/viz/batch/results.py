"""Per-question result rows rebuilt from the traces the app stored, shaped like `Store.RUN_RESULT_COLUMNS`, so the
Failures and Compare views work on app runs as on batch runs (`python -m tmem run`); and the stored trace
behind a result row (`TraceRef`), which links and the Question page carry as query parameters."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd

from tmem.analysis.funnel import attribute_failure, evidence_funnel
from tmem.config import VARIANTS, config_hash, variant_config
from tmem.store import Store
from tmem.types import Question, Trace
from tmem.viz.question.answers import failure_line, role_failures

APP_RUN = "(traces run in the app)"


def trace_results(store: Store, corpus: str) -> pd.DataFrame:
    """Rows shaped like Store.RUN_RESULT_COLUMNS, one per stored trace of a stored question (latest per variant,
    scope, question, configuration and backend), with the failure attributed from the trace."""
    index = store.trace_index(corpus)
    questions = {(q.scope, q.id): q for q in store.questions(corpus)}
    rows = []
    for r in index.drop_duplicates(["scope", "question_id", "variant", "config_hash", "backend"], keep="last") \
            .itertuples():
        q = questions.get((r.scope, r.question_id))
        trace = store.load_trace(corpus, r.scope, r.question_id, r.variant, r.config_hash, r.backend)
        if q is None or trace is None:
            continue
        rows.append(_result_row(store, corpus, q, trace, r.backend, str(r.created_at)))
    frame = pd.DataFrame(rows, columns=list(Store.RUN_RESULT_COLUMNS))
    # baselines (embedding, global-control, ...) are not presets: their stored hash is their default
    default = {v: config_hash(variant_config(v)) for v in frame["variant"].unique() if v in VARIANTS}
    frame["variant"] = [v if h == default.get(v) else f"{v}@{h[:6]}" for v, h in zip(frame["variant"],
                                                                                    frame["config_hash"])]
    return frame


def _result_row(store: Store, corpus: str, q: Question, trace: Trace, backend: str, created: str) -> dict:
    gold = store.gold(corpus, q.scope, q.id)
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
        ids = set(gold.evidence_ids) | {a.message_id for a in trace.anchors}
        messages = {m.id: m for m in store.messages_by_ids(corpus, q.scope, ids)}
        blame = attribute_failure(trace, gold, messages)
        row.update(failure=blame.category, failure_detail=blame.detail, units=len(gold.evidence),
                   units_recovered=evidence_funnel(trace, gold)["selected"])
    return row


@dataclass(frozen=True)
class TraceRef:
    """Which stored trace of a question to show, besides the question itself: the stored variant (a preset of
    tmem.config.VARIANTS or a batch baseline such as `embedding`), its configuration hash and the backend label
    (`Store.load_trace`'s key). Result rows carry all three; a row's variant column may be a display label such as
    "full@879bec" (tmem.viz.batch.results.trace_results), so the name is cut at "@". Backend labels name backends,
    models and public endpoint URLs, never keys, so a ref may travel in a URL."""

    variant: str
    config_hash: str
    backend: str

    PARAMS: ClassVar[tuple[str, str, str]] = ("trace_variant", "trace_config", "trace_backend")

    @classmethod
    def from_row(cls, row: Mapping[str, Any], side: str = "") -> TraceRef | None:
        """The ref of one result row (`side` picks suffixed columns of a Compare row, e.g. " (baseline)")."""
        variant = str(row.get("variant" + side) or row.get("variant") or "").split("@")[0]
        config, backend = row.get("config_hash" + side), row.get("backend" + side)
        if not variant or not isinstance(config, str) or not isinstance(backend, str) or not config or not backend:
            return None
        return cls(variant, config, backend)

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> TraceRef | None:
        """The ref named by query parameters, or None unless all three are given."""
        values = [params.get(name) or "" for name in cls.PARAMS]
        return cls(*values) if all(values) else None

    def to_params(self) -> dict[str, str]:
        return dict(zip(self.PARAMS, (self.variant, self.config_hash, self.backend)))

    @property
    def is_preset(self) -> bool:
        """Whether the app's sidebar can select this variant (batch baselines such as `embedding` it cannot)."""
        return self.variant in VARIANTS


def load_trace(store: Store, corpus: str, scope: str, question_id: str, ref: TraceRef) -> Trace | None:
    """Exactly the stored trace `ref` names for one question, or None when there is none."""
    return store.load_trace(corpus, scope, question_id, ref.variant, ref.config_hash, ref.backend)


def result_trace(store: Store, corpus: str, row: Mapping[str, Any], side: str = "") -> Trace | None:
    """The stored trace behind one result row (`side` picks suffixed columns, e.g. " (baseline)")."""
    ref = TraceRef.from_row(row, side)
    return load_trace(store, corpus, row["scope"], row["question_id"], ref) if ref else None


def with_details(store: Store, corpus: str, table: pd.DataFrame, limit: int = 300) -> pd.DataFrame:
    """`table` (result rows) with the question text, the answer of the row's stored trace and the gold answer in
    front; "—" where there is none. Answers are read from stored traces for the first `limit` rows only (each is
    one trace load); later rows say "(not loaded: narrow the filters)"."""
    questions = {(q.scope, q.id): q.text for q in store.questions(corpus)}
    golds: dict[tuple[str, str], str] = {}
    answers = []
    for k, row in enumerate(table.to_dict("records")):
        key = (row["scope"], row["question_id"])
        if key not in golds:
            gold = store.gold(corpus, *key)
            golds[key] = gold.answer if gold and gold.answer else "—"
        if k >= limit:
            answers.append("(not loaded: narrow the filters)")
            continue
        trace = result_trace(store, corpus, row)
        answers.append(trace.answers[0].text or "(empty: the answer role failed)" if trace and trace.answers
                       else "—")
    out = table.copy()
    keys = list(zip(out["scope"], out["question_id"]))
    out.insert(0, "gold answer", [golds[k] for k in keys])
    out.insert(0, "answer", answers)
    out.insert(0, "question", [questions.get(k, "—") for k in keys])
    return out


ROLE_ORDER = ("evidence_utility", "relation", "answer", "judge", "embedder", "token_counter")


def backend_rows(label: str) -> pd.DataFrame:
    """Role and backend rows read back from a stored backend label (the roles' `describe()` values joined by "|",
    tmem.models.base); one row with the whole label when it does not split into the six roles."""
    parts = label.split("|")
    if len(parts) != len(ROLE_ORDER):
        return pd.DataFrame([{"role": "all roles", "backend": label}])
    return pd.DataFrame({"role": ROLE_ORDER, "backend": parts})
