"""The explorer's services: which question to open, the configuration a view runs with, the model roles, a stored
trace or a fresh run of one question, corpus imports, and per-question results rebuilt from stored traces.

This is the only module the pages use to reach the store and the pipeline, so pages hold no SQL and no algorithm.
Traces are cached by (corpus, scope, question, variant, config hash, roles label): a stored trace is always
loaded rather than re-run.
"""
from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tmem.config import TMemConfig, config_hash, field_help, variant_config
from tmem.pipeline import run_question
from tmem.scope import load_scope
from tmem.store import DEMO_CORPUS, Store
from tmem.types import Gold, Question, Trace
from tmem.viz.results import TraceRef


@dataclasses.dataclass
class ExplorerContext:
    """What app.py's shared sidebar selected, handed to every page."""

    store: Store
    corpus: str | None
    scope: str | None
    variant: str
    overrides: dict[str, Any]
    config: TMemConfig
    roles: Any
    curated: tuple[str, str] | None = None

    @property
    def offline(self) -> bool:
        return all_offline(self.roles)

    @property
    def sidebar_trace(self) -> TraceRef:
        """The stored trace the sidebar selects for a question: its variant, configuration hash and backend."""
        return TraceRef(self.variant, config_hash(self.config), self.roles.label)


# ------------------------------------------------------------------------------------------ which question
def curated_question(store: Store, corpus: str) -> tuple[str, str] | None:
    """(scope, question id) to open first: the demo's curated question, else the first knowledge_update question,
    else the first question."""
    if corpus == DEMO_CORPUS:
        try:
            from tmem.demo import CURATED_QUESTION
        except ImportError:
            CURATED_QUESTION = None
        if CURATED_QUESTION and store.questions(corpus, CURATED_QUESTION[0]):
            return tuple(CURATED_QUESTION)
    questions = store.questions(corpus)
    pick = next((q for q in questions if q.type == "knowledge_update"), questions[0] if questions else None)
    return (pick.scope, pick.id) if pick else None


def adhoc_question(scope: str, text: str, user: str | None) -> Question:
    """A typed-in question; its id is a hash of scope, text and user, so its trace can be stored and reopened."""
    digest = hashlib.sha256(f"{scope}\n{text}\n{user or ''}".encode()).hexdigest()[:10]
    return Question(f"adhoc-{digest}", scope, text.strip(), user or None, None)


# ---------------------------------------------------------------------------------------- configuration
def _parse_value(default: Any, raw: str) -> Any:
    if isinstance(default, bool):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(default, tuple):
        return tuple(v for v in raw.split("|") if v)
    return type(default)(raw)


def parse_overrides(text: str | None) -> dict[str, Any]:
    """"retrieval.k=12,retrieval.metadata_fields=channel|topic" -> {"retrieval.k": 12, ...}; unknown keys and bad
    values are dropped."""
    known = field_help()
    out: dict[str, Any] = {}
    for part in (text or "").split(","):
        key, _, raw = part.partition("=")
        if key.strip() in known:
            try:
                out[key.strip()] = _parse_value(known[key.strip()][0], raw.strip())
            except ValueError:
                continue
    return out


def format_overrides(overrides: Mapping[str, Any]) -> str:
    fmt = lambda v: "|".join(v) if isinstance(v, tuple) else str(v).lower() if isinstance(v, bool) else str(v)
    return ",".join(f"{k}={fmt(v)}" for k, v in sorted(overrides.items()))


def resolve_config(variant: str, overrides: Mapping[str, Any] | None = None) -> TMemConfig:
    """The variant's preset of the paper defaults, with the Settings page's overrides applied on top."""
    config = variant_config(variant)
    for key, value in (overrides or {}).items():
        section, name = key.split(".", 1)
        config = config.with_(section, **{name: value})
    return config


def config_values(config: TMemConfig) -> dict[str, Any]:
    """{"section.field": value} of every parameter in `config`: what the Settings form shows."""
    return {key: value for key, (value, _help) in field_help(config).items()}


def overrides_against_preset(variant: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The values that differ from the variant's preset: what the Settings form keeps as overrides (and `cfg=`).
    Diffing against the preset rather than the paper defaults lets a preset be set back to a default value (e.g.
    discovery on for `flat`) and keeps a preset's own values out of the overrides."""
    preset = config_values(variant_config(variant))
    return {key: value for key, value in values.items() if key in preset and value != preset[key]}


PARAM_CHOICES = {"compression.mode": ("compress", "truncate"), "answer.presentation": ("forest", "flat")}


def config_rows(config: TMemConfig) -> pd.DataFrame:
    """Every parameter with the value in `config`, the paper default and the help text."""
    defaults = field_help()
    rows = [{"parameter": key, "value": str(getattr(getattr(config, key.split(".")[0]), key.split(".")[1])),
             "paper default": str(default), "help": help_} for key, (default, help_) in defaults.items()]
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------ roles
def build_roles(backend_overrides: Mapping[str, Any] | None = None, store: Store | None = None):
    """Model roles from tmem.models' settings (env, tmem.toml, then these overrides); offline stand-ins when
    the backend factory is not available. API keys are read from the environment variable a setting names."""
    try:
        from tmem.models.factory import build_roles as factory_roles
        from tmem.models.settings import BackendSettings
    except ImportError:
        from tmem.models.offline import offline_roles

        return offline_roles()
    settings = BackendSettings.from_sources(overrides=dict(backend_overrides or {}))
    return factory_roles(settings, store=store)


def role_rows(roles) -> pd.DataFrame:
    """Role, backend, offline? — for the banner on every page and the Settings page."""
    offline = {name: getattr(getattr(roles, name), "offline", False)
               for name in ("evidence_utility", "relation", "answer", "judge")}
    offline["embedder"] = getattr(roles.embedder, "offline", True)
    offline["token_counter"] = not getattr(roles.tokens, "exact", True)
    return pd.DataFrame([{"role": k, "backend": v, "offline": offline.get(k, False)}
                         for k, v in roles.describe().items()])


def all_offline(roles) -> bool:
    return all(getattr(getattr(roles, n), "offline", False) for n in ("evidence_utility", "relation", "answer",
                                                                      "judge"))


# ----------------------------------------------------------------------------------------------- traces
def find_trace(store: Store, corpus: str, question: Question, variant: str, config: TMemConfig,
               roles) -> Trace | None:
    return store.load_trace(corpus, question.scope, question.id, variant, config_hash(config), roles.label)


def run_and_store(store: Store, corpus: str, question: Question, variant: str, config: TMemConfig, roles,
                  gold: Gold | None = None, progress: Callable[[str, float], None] | None = None) -> Trace:
    """Run the pipeline for one question and store the trace under the roles' label. Message vectors are kept in
    the store (computed once per scope and embedder); their progress is reported as stage "embedding"."""
    report = (lambda done, total: progress("embedding", done / max(total, 1))) if progress else None
    scope = load_scope(store, corpus, question.scope, report)
    trace = run_question(question, scope, config, roles, corpus=corpus, variant=variant, gold=gold,
                         progress=progress)
    store.save_trace(trace, roles.label)
    return trace


STAGE_WEIGHTS = {"seed_retrieval": (0.0, 0.05), "embedding": (0.05, 0.3), "discovery": (0.05, 0.35),
                 "structuring": (0.35, 0.75), "compression": (0.75, 0.8), "answer": (0.8, 0.95), "judge": (0.95, 1.0)}


def overall_progress(stage: str, fraction: float) -> float:
    """Map a stage's own progress onto one 0..1 bar."""
    lo, hi = STAGE_WEIGHTS.get(stage, (0.0, 1.0))
    return min(1.0, lo + (hi - lo) * max(0.0, min(1.0, fraction)))


def stage_text(stage: str, fraction: float) -> str:
    """Progress-bar text for one pipeline stage."""
    if stage == "embedding":
        return f"Embedding the scope's messages (once per scope and embedder): {fraction:.0%}"
    return f"{stage.replace('_', ' ').capitalize()}: {fraction:.0%}"


def trace_summary(trace: Trace) -> pd.DataFrame:
    """Stage, seconds, counts, backend, offline, errors — one row per stage."""
    return pd.DataFrame([{"stage": s.name, "seconds": round(s.seconds, 3),
                          "counts": ", ".join(f"{k}={v:g}" for k, v in s.counts.items()), "backend": s.backend,
                          "offline": s.offline, "tokens in/out": f"{s.usage.prompt_tokens}/{s.usage.completion_tokens}",
                          "errors": "; ".join(f"{e.message} -> {e.fallback}" for e in s.errors)}
                         for s in trace.stages])


# ------------------------------------------------------------------------------------------------ imports
def import_formats() -> dict[str, tuple[str, list[str]]]:
    """{format: (what to upload for it, the file extensions the uploader offers)}, jsonl first (docs/corpora.md)."""
    from tmem.corpora.cli import FORMATS
    from tmem.corpora.upload import UPLOAD_HINTS, UPLOAD_TYPES

    return {fmt: (UPLOAD_HINTS[fmt], UPLOAD_TYPES[fmt]) for fmt in sorted(FORMATS, key=lambda f: (f != "jsonl", f))}


def import_corpus(store: Store, name: str, fmt: str, path: str | Path | None = None,
                  uploads: Sequence[tuple[str, bytes]] | None = None) -> list[str]:
    """Import a server file/folder (`path`) or uploaded `(file name, content)` pairs (`uploads`: one .zip of the
    format's layout, or its plain files; staged in a temporary folder that is always deleted) with the named
    importer, replacing corpus `name` in one transaction (a bad file leaves the database unchanged); returns the
    importer's notes (repairs, skipped records, derived values)."""
    from tmem.corpora import cli, upload

    if uploads:
        _, imported = upload.import_upload(store, fmt, uploads, name)
    elif path:
        _, imported = cli.import_corpus(store, fmt, path, name)
    else:
        raise ValueError("give a path or uploaded files")
    return list(imported.notes)
