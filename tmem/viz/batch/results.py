"""Per-question result rows rebuilt from the traces the app stored, shaped like `Store.RUN_RESULT_COLUMNS`, so the
Failures and Compare views work on app runs as on batch runs (`python -m tmem run`); and the stored trace
behind a result row (`TraceRef`), which links and the Question page carry as query parameters. Pure: the front
door (`tmem.api.trace_results`, `tmem.api.load_trace`) reads the store and hands the values in."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd

from tmem.analysis.funnel import attribute_failure, evidence_funnel
from tmem.config import VARIANTS, config_hash, variant_config
from tmem.types import Gold, Message, Question, Trace
from tmem.viz.question.answers import failure_line, role_failures

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


@dataclass(frozen=True)
class TraceRef:
    """Which stored trace of a question to show, besides the question itself: the stored variant (a preset of
    tmem.config.VARIANTS or a batch baseline such as `embedding`), its configuration hash and the backend label
    (`Store.load_trace`'s key). Result rows carry all three; a row's variant column may be a display label such as
    "full@879bec" (tmem.api.trace_results), so the name is cut at "@". Backend labels name backends,
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


ROLE_ORDER = ("evidence_utility", "relation", "answer", "judge", "embedder", "token_counter")


def roles_line(label: str) -> str:
    """A stored backend label as one readable line: "answer: offline:extractive-answerer · judge: …" (the roles'
    labels without their decoding settings), or the label itself when it does not split into the six roles."""
    rows = backend_rows(label)
    if list(rows["role"]) == ["all roles"]:
        return label
    return " · ".join(f"{r.role}: {r.backend.split(' [', 1)[0]}" for r in rows.itertuples())


def backend_rows(label: str) -> pd.DataFrame:
    """Role and backend rows read back from a stored backend label (the roles' `describe()` values joined by "|",
    tmem.models.base); one row with the whole label when it does not split into the six roles."""
    parts = label.split("|")
    if len(parts) != len(ROLE_ORDER):
        return pd.DataFrame([{"role": "all roles", "backend": label}])
    return pd.DataFrame({"role": ROLE_ORDER, "backend": parts})
