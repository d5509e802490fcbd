"""Executors: where the tasks of a sweep or a batch run execute. The local executor (the default) runs them in this
process on a thread pool; the Ray executor (ray_executor.py, optional: requirements-scale.txt) runs them on
a local Ray or on a cluster (`--executor ray [--address ...]`). The contract both keep is in
tmem/evaluation/executors/common.py.
"""
from __future__ import annotations

from tmem.evaluation.executors.common import (
    EXECUTORS,
    ExecutorUnavailable,
    LocalEnv,
    LocalExecutor,
    RemoteEnv,
    ScopeData,
    remote_env,
    scope_data,
    worker_settings,
)
from tmem.evaluation.executors.ray_executor import RayExecutor
from tmem.models.base import Roles
from tmem.models.settings import BackendSettings
from tmem.store import Store

__all__ = ["EXECUTORS", "ExecutorUnavailable", "LocalEnv", "LocalExecutor", "RayExecutor", "RemoteEnv", "ScopeData",
           "make_executor", "remote_env", "scope_data", "worker_settings"]


def make_executor(name: str, store: Store, roles: Roles, settings: BackendSettings, *, address: str | None = None,
                  jobs: int = 1, num_cpus: int | None = None):
    """The executor called `name` ("local" or "ray"); Ray is imported when a Ray executor starts, and its absence
    is one clear error. `address`: a Ray cluster to join ("auto", "ray://head:10001"); None starts a local Ray."""
    if name == "local":
        if address:
            raise ValueError("--address joins a Ray cluster: it needs --executor ray")
        return LocalExecutor(store, roles, jobs)
    if name != "ray":
        raise ValueError(f"unknown executor {name!r}; known: {', '.join(EXECUTORS)}")
    return RayExecutor(store, worker_settings(settings), address=address, num_cpus=num_cpus)
