"""The pipeline for one question (paper Fig. 1): seed retrieval -> temporal evidence discovery -> temporal memory
structuring -> compression -> linearization and answer (forest and, for comparison, flat over the same evidence)
-> judge (only when a gold answer is given, which never reaches any earlier stage). Every stage records its timing,
counts, token usage, backend, and errors with the fallback taken. A batch run (tmem.evaluation.batch.run) calls the
same stage functions (tmem.pipeline.stages), stage-wise over many questions.

A stored question runs over a stored scope: `open_scope` sets one up from the database (cached, its vectors and BM25
indexes kept in the store) and `run_and_store` runs the question and saves its trace; tmem.api re-exports both, and
the evaluation runners call them here, below the front door.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

from tmem.config import TMemConfig
from tmem.models.base import Roles
from tmem.models.embedders import VectorStore
from tmem.pipeline.methods import method_for
from tmem.pipeline.scope import Scope
from tmem.pipeline.stages import Context, run_all
from tmem.store import Store
from tmem.types import Gold, Question, Trace

Progress = Callable[[str, float], None]  # (stage name, fraction done)


def run_question(question: Question, scope: Scope, config: TMemConfig, roles: Roles, *, corpus: str,
                 variant: str = "custom", gold: Gold | None = None, progress: Progress | None = None) -> Trace:
    if question.scope != scope.name:
        raise ValueError(f"question {question.id!r} belongs to scope {question.scope!r}, not {scope.name!r}")
    context = Context(method_for(config, variant), roles, gold=(lambda q: gold) if gold is not None else None,
                      progress=progress)
    return run_all(question, scope, context, corpus)


_SCOPES: dict[tuple, Scope] = {}
_SCOPES_LOCK = threading.Lock()


def open_scope(store: Store, corpus: str, name: str,
               embedding_progress: Callable[[int, int], None] | None = None) -> Scope:
    """The scope's messages from the store, cached per (database, corpus, scope, import time); its message vectors
    are persisted in that store (tmem.models.embedders.VectorStore). `embedding_progress(done, total)` hears of a
    first embedding of the scope's messages (it replaces the previous caller's)."""
    info = store.corpus_info(corpus)
    key = (str(store.path), corpus, name, str(info["imported_at"]))
    with _SCOPES_LOCK:
        if key not in _SCOPES:
            messages = store.messages(corpus, name)
            if not messages:
                known = ", ".join(store.scopes(corpus)[:10])
                raise KeyError(f"corpus {corpus!r} has no scope {name!r} (scopes: {known})")
            for stale in [k for k in _SCOPES if k[:3] == key[:3]]:
                del _SCOPES[stale]
            _SCOPES[key] = Scope(corpus, name, messages)
        scope = _SCOPES[key]
        # message vectors and BM25 indexes of a stored scope are kept in the same database: computed once, reused
        VectorStore(store, embedding_progress).install(scope)
        scope.index_store = store
        return scope


def run_and_store(store: Store, corpus: str, question: Question, variant: str, config: TMemConfig, roles: Roles,
                  gold: Gold | None = None, progress: Progress | None = None, *,
                  embedding_progress: Callable[[int, int], None] | None = None, save: bool = True) -> Trace:
    """Run the pipeline for one question and store the trace under the roles' label. Message vectors are kept in
    the store (computed once per scope and embedder); their progress goes to `embedding_progress(done, total)`,
    or else to `progress` as stage "embedding"."""
    if embedding_progress is None and progress is not None:
        embedding_progress = lambda done, total: progress("embedding", done / max(total, 1))  # noqa: E731
    scope = open_scope(store, corpus, question.scope, embedding_progress)
    trace = run_question(question, scope, config, roles, corpus=corpus, variant=variant, gold=gold,
                         progress=progress)
    if save:
        store.save_trace(trace, roles.label)
    return trace
