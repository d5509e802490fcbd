"""The library's front door: what the CLI (tmem/commands) and the app (pages/) both call to open a database and a
scope, configure a run, ask a stored or an ad-hoc question, store its trace and find it again.

    from tmem import api
    store = api.open_store()                                   # data/tmem.duckdb (or $TMEM_DB); demo on first use
    question = api.adhoc_question("Technology", "Which database did we pick?", "User_3")
    config = api.resolve_config("full", "retrieval.k=12,discovery.mu=0.5")
    trace = api.run_and_store(store, "demo", question, "full", config, api.build_roles(store=store))

An ad-hoc question's id is a hash of its scope, text and asking user, so the CLI and the app store the same
question under the same id (and a new question never overwrites an earlier one's trace). Overrides use the one
grammar of `tmem.config.parse_overrides`, shared by `--set` and the app's `cfg=` URL parameter.

Beside this module, what the commands and pages need from deeper down: `tmem.api.backends` (settings, endpoints,
presets, the recorded demo, prices), `tmem.api.models` (roles from the CLI's flags and what callers watch while they
run), `tmem.api.corpora` (importing by path), `tmem.api.demo` (the shipped demo), `tmem.api.errors` (the failures
callers catch and explain).
"""
from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tmem.analysis import results as result_rows
from tmem.analysis.results import APP_RUN
from tmem.config import TMemConfig, apply_overrides, config_hash, format_overrides, parse_overrides, variant_config
from tmem.corpora import formats as corpora_formats
from tmem.corpora import upload
from tmem.demo import CURATED_QUESTION, DEMO_CORPUS, ensure_demo
from tmem.models.factory import build_roles as factory_roles
from tmem.models.llm import endpoints
from tmem.pipeline import stages
from tmem.pipeline.methods import get_method, method_for, methods
from tmem.pipeline.run import open_scope, run_and_store
from tmem.pipeline.scope import Scope
from tmem.store import Store, default_db_path
from tmem.types import Gold, Question, Trace, TraceRef
from tmem.viz import run_settings


# ------------------------------------------------------------------------------------------- database, scope
def open_store(path: str | Path | None = None, *, demo: bool = True) -> Store:
    """Open the database (default data/tmem.duckdb, or $TMEM_DB); with `demo`, load the shipped demo corpus on first
    use so the CLI and the app work right away."""
    store = Store(path)
    if demo:
        ensure_demo(store)
    return store


# ------------------------------------------------------------------------------------------------ questions
def seed_preview(question: Question, scope: Scope, config: TMemConfig, variant: str, roles):
    """The BM25 seed stage alone (Sec. 4.2's first step), what the app shows while the whole pipeline runs."""
    return stages.retrieve_seeds(question, scope, stages.Context(method_for(config, variant), roles),
                                 stages.Earlier())


def adhoc_question(scope: str, text: str, user: str | None = None) -> Question:
    """A typed-in question; its id is a hash of scope, text and user, so its trace can be stored and reopened, and
    the CLI and the app give the same question the same id."""
    text, user = text.strip(), (user or "").strip() or None
    digest = hashlib.sha256(f"{scope}\n{text}\n{user or ''}".encode()).hexdigest()[:10]
    return Question(f"adhoc-{digest}", scope, text, user, None)


def default_scope(store: Store, corpus: str, scope: str | None = None) -> str:
    """The scope an ad-hoc question is asked in: the one given, or the corpus's only scope."""
    if scope:
        return scope
    scopes = store.scopes(corpus)
    if len(scopes) != 1:
        raise ValueError(f"corpus {corpus!r} has several scopes; name one ({', '.join(scopes[:8])})")
    return scopes[0]


def stored_question(store: Store, corpus: str, question_id: str, scope: str | None = None) -> tuple[Question, Gold]:
    """A stored question and its gold (which only the judge stage reads)."""
    question = store.question(corpus, question_id, scope)
    return question, store.gold(corpus, question.scope, question.id)


def curated_question(store: Store, corpus: str) -> tuple[str, str] | None:
    """(scope, question id) to open first: the demo's curated question, else the first knowledge_update question,
    else the first question."""
    if corpus == DEMO_CORPUS and store.questions(corpus, CURATED_QUESTION[0]):
        return tuple(CURATED_QUESTION)
    questions = store.questions(corpus)
    pick = next((q for q in questions if q.type == "knowledge_update"), questions[0] if questions else None)
    return (pick.scope, pick.id) if pick else None


# ------------------------------------------------------------------------------------------ configuration
def resolve_config(variant: str, overrides: Mapping[str, Any] | str | Sequence[str] | None = None) -> TMemConfig:
    """The variant's preset of the paper defaults with overrides on top: a {"section.field": value} mapping or text
    in the override grammar (`--set` / `cfg=`)."""
    return apply_overrides(variant_config(variant), overrides)


def url_overrides(text: str | None) -> dict[str, Any]:
    """The overrides of a `cfg=` URL parameter; a link may be old or hand-edited, so unknown names and bad values
    are dropped rather than refused (`--set` refuses them: `parse_overrides`)."""
    return parse_overrides(text, strict=False)


def method_names() -> list[str]:
    """The variants and baselines a batch can run (the config presets, then the baselines)."""
    return list(methods())


def stage_plan(method) -> tuple[str, ...]:
    """The stages `method` (`get_method` by name, `method_for` a configuration) runs, in order."""
    return stages.plan(method)


__all__ = ["APP_RUN", "DEMO_CORPUS", "TraceRef", "adhoc_question", "build_roles", "curated_question",
           "default_db_path", "default_scope", "find_trace", "format_overrides", "get_method", "import_corpus",
           "import_formats", "method_for", "method_names", "open_scope", "open_store", "parse_overrides",
           "resolve_config", "run_and_store", "seed_preview", "stage_plan", "stored_question", "url_overrides"]


def build_roles(backend_overrides: Mapping[str, Any] | None = None, store: Store | None = None, *,
                session_key: str | None = None):
    """Model roles for a browser session: the server's settings (env, tmem.toml) with the session's overrides,
    which may only name the operator's endpoints (tmem.models.llm.endpoints; EndpointRefused otherwise). Keys are read
    from the variable the operator paired with an endpoint, or are the session's own `session_key`; never stored."""
    settings = endpoints.check_overrides(dict(backend_overrides or {}))
    return factory_roles(settings, store=store, env=endpoints.session_keys(session_key))


# ----------------------------------------------------------------------------------------------- traces
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


# -------------------------------------------------------------------------------------- the app's context
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
        return run_settings.all_offline(self.roles)

    @property
    def sidebar_trace(self) -> TraceRef:
        """The stored trace the sidebar selects for a question: its variant, configuration hash and backend."""
        return TraceRef(self.variant, config_hash(self.config), self.roles.label)


# ------------------------------------------------------------------------------------------------ imports
def import_formats() -> dict[str, tuple[str, list[str]]]:
    """{format: (what to upload for it, the file extensions the uploader offers)}, jsonl first (docs/corpora.md)."""
    return {f.name: (f.upload_hint, list(f.upload_types)) for f in corpora_formats.FORMATS}


def import_corpus(store: Store, name: str, fmt: str, path: str | Path | None = None,
                  uploads: Sequence[tuple[str, bytes]] | None = None) -> list[str]:
    """Import a server file/folder (`path`) or uploaded `(file name, content)` pairs (`uploads`: one .zip of the
    format's layout, or its plain files; staged in a temporary folder that is always deleted) with the named
    importer, replacing corpus `name` in one transaction (a bad file leaves the database unchanged); returns the
    importer's notes (repairs, skipped records, derived values)."""
    if uploads:
        _, imported = upload.import_upload(store, fmt, uploads, name)
    elif path:
        _, imported = upload.import_server_path(store, fmt, path, name)  # only inside $TMEM_IMPORT_DIRS
    else:
        raise ValueError("give a path or uploaded files")
    return list(imported.notes)
