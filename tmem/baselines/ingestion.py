"""Ingestion once per scope (App. B, Table 6): a system's memory of a scope is built once per (scope, system
configuration and prompts, construction model, embedder), stored in the database (tmem.store.memories) with its
construction usage per stage, and read back by every later question, run and process.

Resume: each construction call's reply is in the response cache as soon as it returns, and the memory row is
written only when the memory is complete; an ingestion killed midway (kill -9 included) is started again and replays
the calls it had made from the cache (no tokens sent, counted as cached calls) before it sends the rest.
Under an estimate the memory is built on counted calls and stand-in replies: it lives in this process only and is
never stored as the system's memory.
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tmem.baselines import SYSTEMS
from tmem.baselines.base import Built, System
from tmem.baselines.construction import (
    ConstructionLLM,
    NeedsEndpoint,
    Tools,
    construction_client,
    needs_endpoint_message,
)

_MEMO: dict[tuple, Ingested] = {}
_LOCKS: dict[tuple, threading.Lock] = {}
_GUARD = threading.Lock()


@dataclass(frozen=True)
class Ingested:
    memory: Built
    usage: dict[str, dict]  # stage -> usage (tmem.types.Usage as a dict); "... (embedding)": embedding tokens
    seconds: float
    key: str
    model: str  # the construction model's label ("none" for a system without one)
    estimated: bool = False  # built under an estimate, on counted calls: never a system's result
    reused: bool = False  # read back, not built by this call


def scope_fingerprint(scope) -> str:
    digest = hashlib.sha256()
    for m in scope.messages:
        digest.update(f"{m.id}\x1f{m.timestamp.isoformat()}\x1f{m.text}\x1e".encode())
    return digest.hexdigest()[:16]


def memory_key(system: System, model: str, embedder: str, scope) -> str:
    blob = "|".join([system.key(), model, embedder, scope_fingerprint(scope)])
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def tools_for(system: System, roles, store=None) -> Tools:
    """The construction model and embedder of a run's roles; NeedsEndpoint for a system that needs a model the
    roles do not have, or whose optional package is not installed."""
    client, counting = construction_client(roles)
    if client is None and system.needs_llm:
        raise NeedsEndpoint(needs_endpoint_message(system))
    missing = system.unavailable()
    if missing:
        raise NeedsEndpoint(missing)
    llm = ConstructionLLM(client, system.name, counting) if client is not None and system.needs_llm else None
    return Tools(llm, roles.embedder, roles.tokens, workdir_of(store, system))


def workdir_of(store, system: System) -> Path | None:
    """`systems/<name>/` beside the run's database (a packaged system's working files); None for an in-memory one."""
    path = getattr(store, "path", None)
    return None if path is None or str(path) == ":memory:" else Path(path).resolve().parent / "systems" / system.name


def ingest(system: System, scope, roles, store=None, variant: str = "") -> Ingested:
    """The system's memory of `scope`: stored (or built earlier in this process), else built now and stored."""
    tools = tools_for(system, roles, store)
    model = tools.llm.label if tools.llm else "none"
    key = memory_key(system, model, getattr(roles.embedder, "name", "?"), scope)
    memo_key = (scope.corpus, scope.name, system.name, key, tools.estimating)
    with _GUARD:
        lock = _LOCKS.setdefault(memo_key, threading.Lock())
    with lock:  # questions of one scope in flight together: one ingestion, the others wait for it
        if memo_key in _MEMO:
            return _MEMO[memo_key]
        stored = store.system_memory(scope.corpus, scope.name, system.name, key) if store is not None else None
        if stored is not None:
            data, usage, seconds = stored
            done = Ingested(Built(data.get("data", {}), data.get("counts", {})), usage, seconds, key, model,
                            reused=True)
        else:
            done = _build(system, scope, tools, key, model, variant)
            if store is not None and not done.estimated:
                store.save_system_memory(scope.corpus, scope.name, system.name, key,
                                         {"data": done.memory.data, "counts": done.memory.counts}, done.usage,
                                         done.seconds)
        _MEMO[memo_key] = done
        return done


def _build(system: System, scope, tools: Tools, key: str, model: str, variant: str) -> Ingested:
    ledger = getattr(tools.llm.base, "ledger", None) if tools.llm else None
    before = ledger.current if ledger is not None else None
    if ledger is not None:  # an estimate: the construction calls are the variant's "ingestion" stage, per scope
        ledger.at(variant or system.name, "ingestion", ("ingestion", scope.corpus, scope.name))
    started = time.perf_counter()
    try:
        memory = system.ingest(scope, tools)
    finally:
        if ledger is not None:
            ledger.at(*before)
    return Ingested(memory, tools.usage_record(), time.perf_counter() - started, key, model,
                    estimated=tools.estimating)


def forget(corpus: str | None = None) -> None:
    """Drop this process's memo (tests; a re-imported corpus)."""
    with _GUARD:
        for k in [k for k in _MEMO if corpus is None or k[0] == corpus]:
            del _MEMO[k]


def refusals(methods, roles) -> list[str]:
    """Why each method that is a memory system cannot run with `roles`: it needs a construction model and the roles
    are offline, or its optional package is not installed."""
    client, _ = construction_client(roles)
    out = []
    for m in methods:
        system = SYSTEMS.get(m.system) if m.system else None
        if system is not None and system.needs_llm and client is None:
            out.append(needs_endpoint_message(system))
        elif system is not None and system.unavailable():
            out.append(system.unavailable())
    return out
