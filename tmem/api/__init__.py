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

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from tmem.analysis.results import APP_RUN
from tmem.api import explorer
from tmem.api.corpora import import_corpus, import_formats
from tmem.api.explorer import ExplorerContext, build_roles, curated_question, open_store
from tmem.api.traces import find_trace, load_trace, result_trace, trace_results
from tmem.config import TMemConfig, apply_overrides, format_overrides, parse_overrides, variant_config
from tmem.demo import DEMO_CORPUS
from tmem.pipeline import stages
from tmem.pipeline.methods import get_method, method_for, methods
from tmem.pipeline.run import open_scope, run_and_store
from tmem.pipeline.scope import Scope
from tmem.store import Store, default_db_path
from tmem.types import Gold, Question, TraceRef


# ------------------------------------------------------------------------------------------- database, scope
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


__all__ = ["APP_RUN", "DEMO_CORPUS", "ExplorerContext", "TraceRef", "explorer", "load_trace", "result_trace",
           "trace_results", "adhoc_question", "build_roles", "curated_question",
           "default_db_path", "default_scope", "find_trace", "format_overrides", "get_method", "import_corpus",
           "import_formats", "method_for", "method_names", "open_scope", "open_store", "parse_overrides",
           "resolve_config", "run_and_store", "seed_preview", "stage_plan", "stored_question", "url_overrides"]
