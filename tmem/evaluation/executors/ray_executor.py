"""The Ray executor (`--executor ray`): tasks run as Ray tasks on a local Ray (the default: `ray.init` with this
machine's CPUs, or `num_cpus`) or on a cluster (`--address auto` on a node of a running cluster, or
`ray://head:10001` through Ray Client). Ray is an optional requirement (requirements-scale.txt), imported when an
executor starts; without it the command stops with one line saying how to install it.

Scopes travel through Ray's object store: the driver reads each scope once from its database into a `ScopeData`
and `ray.put`s it; every task of that scope gets the reference as an argument (Ray resolves it on the worker, the
driver's database file is never opened there). The backend settings travel the same way and each worker builds its
roles from them (no response cache: it is in the database; an API key is read from the worker's own environment,
never shipped). Joining a cluster ships the `tmem` package itself (`runtime_env={"py_modules": [...]}`); the
nodes need the packages of requirements.txt. At most `max_in_flight` tasks are submitted at once (default: twice
the cluster's CPUs), so a sweep of thousands of tasks does not flood the scheduler; results come back in
completion order to the caller's thread, the one writer.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tmem.evaluation.executors.common import ExecutorUnavailable, ScopeData, remote_env, scope_data
from tmem.models.llm.concurrency import Outcome
from tmem.models.settings import BackendSettings
from tmem.store import Store

TMEM_PACKAGE = Path(__file__).resolve().parents[2]  # tmem/, shipped to a remote cluster's workers
INSTALL_HINT = ("--executor ray needs Ray, an optional requirement: `.venv/bin/pip install -r "
                "requirements-scale.txt` (ray 2.60.0), or leave out --executor to run locally")


def import_ray():
    try:
        import ray
    except ImportError:
        raise ExecutorUnavailable(INSTALL_HINT) from None
    return ray


def call_task(fn: Callable[[Any, Any], Any], task: Any, data: ScopeData, settings: BackendSettings):
    """Runs on a worker: (result, None, seconds), or (None, the exception, seconds) — a task's failure is data,
    returned to the driver like a result."""
    start = time.perf_counter()
    try:
        return fn(task, remote_env(data, settings)), None, time.perf_counter() - start
    except Exception as exc:  # noqa: BLE001 - recorded by the caller per task, never dropped
        return None, exc, time.perf_counter() - start


class RayExecutor:
    name = "ray"

    def __init__(self, store: Store, settings: BackendSettings, *, address: str | None = None,
                 num_cpus: int | None = None, max_in_flight: int | None = None):
        self.ray = ray = import_ray()
        self.store, self.started = store, False
        if not ray.is_initialized():  # a caller (a test, a notebook) may have started Ray already: use it
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                       "logging_level": logging.WARNING}
            try:
                if address:
                    options["runtime_env"] = {"py_modules": [str(TMEM_PACKAGE)]}
                    ray.init(address=address, **options)
                else:
                    ray.init(address="local", num_cpus=num_cpus, **options)
            except Exception as exc:  # noqa: BLE001 - an unreachable cluster, a bad address: one line, no traceback
                detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ExecutorUnavailable(f"Ray could not start or join {address or 'a local Ray'}: {detail}") from None
            self.started = True
        self.cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.max_in_flight = max_in_flight or 2 * self.cpus
        self.describe = f"ray ({address or 'local'}, {self.cpus} CPUs)"
        self._settings = ray.put(settings)
        self._scopes: dict[tuple[str, str, str], Any] = {}
        self._remote = ray.remote(call_task)

    def scope_ref(self, corpus: str, name: str):
        """The object-store reference of a scope, put once per run of this executor."""
        key = (corpus, name, str(self.store.corpus_info(corpus)["imported_at"]))
        if key not in self._scopes:
            ids = [q.id for q in self.store.questions(corpus, name)]
            self._scopes[key] = self.ray.put(scope_data(self.store, corpus, name, ids))
        return self._scopes[key]

    def run(self, fn: Callable[[Any, Any], Any], tasks: Sequence[Any], on_result=None, progress=None) -> list:
        ray, tasks = self.ray, list(tasks)
        results: list[Outcome | None] = [None] * len(tasks)
        pending: dict[Any, int] = {}
        todo = iter(range(len(tasks)))

        def submit(i: int) -> None:
            task = tasks[i]
            pending[self._remote.remote(fn, task, self.scope_ref(task.corpus, task.scope), self._settings)] = i

        for i in todo:
            submit(i)
            if len(pending) >= self.max_in_flight:
                break
        done = 0
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    i = pending.pop(ref)
                    try:
                        value, error, seconds = ray.get(ref)
                    except Exception as exc:  # noqa: BLE001 - a worker died, a result failed to unpickle
                        value, error, seconds = None, exc, 0.0
                    results[i] = outcome = Outcome(i, tasks[i], value, error, seconds)
                    done += 1
                    if on_result:
                        on_result(outcome)
                    if progress:
                        progress(done, len(tasks))
                    nxt = next(todo, None)
                    if nxt is not None:
                        submit(nxt)
        finally:
            for ref in pending:  # Ctrl-C or a failing writer: cancel what has not finished
                ray.cancel(ref)
        return [r for r in results if r is not None]

    def close(self) -> None:
        if self.started and self.ray.is_initialized():
            self.ray.shutdown()
        self.started = False

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
