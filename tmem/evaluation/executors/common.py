"""The contract every executor keeps (tmem.evaluation.executors), the data a remote task receives, and the local
executor.

One contract for both, so the numbers cannot depend on where a task ran:

- a task is a picklable object with `corpus` and `scope` attributes; `fn(task, env)` is a module-level function
  that returns a picklable result. `env` gives the task its scope (`env.scope`), the model roles (`env.roles`), the
  gold of a question for judging and scoring (`env.gold(question)`) and the store when there is one (`env.store`:
  None on Ray).
- locally, `env.scope` is `tmem.pipeline.run.open_scope` over the database (persisted vectors and indexes) and the roles
  are the caller's; on Ray the driver reads each scope once from the database into a `ScopeData` (messages and
  the gold of its questions), puts it in Ray's object store, and a worker builds its `Scope` and its roles
  (from the `BackendSettings`) from that: workers never open the database file, so workers on other machines work.
- results come back to the caller's thread in completion order (`on_result(outcome)`), where the one writer
  stores them; `run` returns every `Outcome` in input order. A task's exception becomes its `Outcome.error`.
"""
from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tmem.models.base import Roles
from tmem.models.factory import build_roles
from tmem.models.llm.concurrency import Outcome, map_with_limit
from tmem.models.settings import ROLES, BackendSettings
from tmem.pipeline.run import open_scope
from tmem.pipeline.scope import Scope
from tmem.store import Store
from tmem.types import Gold, Message, Question

EXECUTORS = ("local", "ray")
OnResult = Callable[[Outcome], None]
Progress = Callable[[int, int], None]


class ExecutorUnavailable(ValueError):
    """An executor cannot run here (Ray not installed, a backend a worker cannot use); the message says why."""


class Task(Protocol):
    corpus: str
    scope: str


@dataclass(frozen=True)
class ScopeData:
    """What a task on another machine gets through the object store: a scope's messages and the gold of its
    questions (read by the judge stage and the recall metric only, as in a local run), keyed like the
    process-wide scope cache so a worker builds each scope once."""

    corpus: str
    name: str
    imported_at: str
    messages: tuple[Message, ...]
    golds: Mapping[str, Gold] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.corpus, self.name, self.imported_at)


def scope_data(store: Store, corpus: str, name: str, question_ids: Sequence[str] = ()) -> ScopeData:
    """The scope as the driver reads it from the database, with the gold of `question_ids`."""
    golds = {qid: g for qid in question_ids if (g := store.gold(corpus, name, qid)) is not None}
    return ScopeData(corpus, name, str(store.corpus_info(corpus)["imported_at"]),
                     tuple(store.messages(corpus, name)), golds)


# ----------------------------------------------------------------------------------------------- envs
@dataclass
class LocalEnv:
    """A task's view in this process: the stored scope, the caller's roles, gold from the store."""

    store: Store
    roles: Roles
    corpus: str
    scope: Scope

    def gold(self, question: Question) -> Gold | None:
        return self.store.gold(self.corpus, question.scope, question.id)


@dataclass
class RemoteEnv:
    """A task's view on a Ray worker: the scope rebuilt from its `ScopeData`, roles built from the settings."""

    roles: Roles
    data: ScopeData
    scope: Scope
    store: None = None

    def gold(self, question: Question) -> Gold | None:
        return self.data.golds.get(question.id)


_WORKER_SCOPES: dict[tuple[str, str, str], Scope] = {}
_WORKER_ROLES: dict[str, Roles] = {}
_WORKER_LOCK = threading.Lock()


def remote_env(data: ScopeData, settings: BackendSettings) -> RemoteEnv:
    """The env of a task on a worker; scope (BM25 index, vectors) and roles are kept per worker process, so the
    tasks after the first on a worker reuse them."""
    with _WORKER_LOCK:
        if data.key not in _WORKER_SCOPES:
            if len(_WORKER_SCOPES) >= 4:  # a worker serves a few scopes at a time; keep its memory bounded
                _WORKER_SCOPES.pop(next(iter(_WORKER_SCOPES)))
            _WORKER_SCOPES[data.key] = Scope(data.corpus, data.name, data.messages)
        key = repr(settings)
        if key not in _WORKER_ROLES:
            _WORKER_ROLES[key] = build_roles(settings)
        return RemoteEnv(_WORKER_ROLES[key], data, _WORKER_SCOPES[data.key])


def worker_settings(settings: BackendSettings) -> BackendSettings:
    """The settings a worker builds its roles from: no response cache (the cache lives in the database, which
    workers do not open); backends that need this machine (a local llama.cpp server, the recorded demo) or the
    cache itself (replay) are refused with the reason."""
    if settings.cache_mode == "replay":
        raise ExecutorUnavailable("--executor ray cannot replay from the response cache: the cache is in the "
                                  "database, which Ray workers do not open (use the local executor)")
    here = sorted({settings.role(r).backend for r in ROLES} & {"local", "recorded"})
    if here:
        raise ExecutorUnavailable(f"--executor ray cannot use the {', '.join(here)} backend (it serves this machine "
                                  "only); use offline roles or an OpenAI-compatible endpoint the workers can reach")
    return dataclasses.replace(settings, cache_mode="off", cache_db="")


# ------------------------------------------------------------------------------------------ executors
class LocalExecutor:
    """Tasks on a thread pool in this process (`jobs` in flight), over the caller's store and roles."""

    name = "local"

    def __init__(self, store: Store, roles: Roles, jobs: int = 1):
        self.store, self.roles, self.jobs = store, roles, max(1, jobs)
        self.describe = f"local ({self.jobs} in flight)"

    def env(self, task: Task) -> LocalEnv:
        return LocalEnv(self.store, self.roles, task.corpus, open_scope(self.store, task.corpus, task.scope))

    def run(self, fn: Callable[[Any, Any], Any], tasks: Sequence[Task], on_result: OnResult | None = None,
            progress: Progress | None = None) -> list[Outcome]:
        return map_with_limit(lambda task: fn(task, self.env(task)), list(tasks), max_in_flight=self.jobs,
                              progress=progress, on_result=on_result)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
