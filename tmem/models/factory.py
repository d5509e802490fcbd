"""Build the four model roles and the embedder from `BackendSettings`.

A role without a model is served by its deterministic offline stand-in (`tmem.models.offline`); a role with one
by `tmem.models.llm.roles` over the transport of `tmem.models.llm.openai_backend`, against its OpenAI-compatible
endpoint. Roles on the same endpoint (base URL and key variable; their timeouts may differ) share one thread-safe
client, rate limiter and in-flight bound; everything on one server, the embedder included, shares one circuit
breaker. All LLM roles share one response cache (App. D.2).
"""
from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from tmem.models import offline
from tmem.models.base import Roles
from tmem.models.embedders import QueryCachingEmbedder, VectorStore, make_embedder
from tmem.models.llm.budget_cap import Budget, Prices, Spent
from tmem.models.llm.cache import ResponseCache
from tmem.models.llm.concurrency import FIRST_TRIAL, CircuitBreaker
from tmem.models.llm.tokens import default_token_counter
from tmem.models.local import server as local
from tmem.models.local.pace import server_pace
from tmem.models.local.recorded import RecordedCache, load_recording
from tmem.models.relation import ConfiguredRule
from tmem.models.settings import ROLES, BackendSettings, RoleSettings
from tmem.store import Store

if TYPE_CHECKING:
    from tmem.models.llm.openai_backend import Endpoint

__all__ = ["build_roles", "response_cache", "cache_stats", "vector_store", "BackendSettings"]


def online_role(name: str, client):
    """The LLM role over an endpoint. Its modules (and the openai client: ~1 s) load only when a role uses an
    endpoint, so the offline path and the explorer's first screen never import them."""
    from tmem.models.llm import roles as llm_roles
    return {"evidence_utility": llm_roles.OpenAIEvidenceUtility, "relation": llm_roles.OpenAIRelation,
            "answer": llm_roles.OpenAIAnswerer, "judge": llm_roles.OpenAIJudge}[name](client)


def offline_role(name: str):
    return {"evidence_utility": offline.OfflineEvidenceUtility, "relation": ConfiguredRule,
            "answer": offline.OfflineAnswerer, "judge": offline.OfflineJudge}[name]()


def response_cache(settings: BackendSettings, store=None) -> ResponseCache | None:
    """The cache over `settings.cache_db` if set, else over `store`; None when there is neither (or mode off)."""
    if settings.cache_mode == "off":
        return None
    if settings.cache_db:
        store = Store(settings.cache_db)
    if store is None:
        if settings.cache_mode == "replay":
            raise ValueError("replay-only mode needs a database holding the cache (cache.db / TMEM_CACHE_DB)")
        return None
    return ResponseCache(store, settings.cache_mode)


def build_roles(settings: BackendSettings | None = None, store=None, env: Mapping[str, str] | None = None,
                cache: ResponseCache | None = None, backoff_base: float = 0.5, log=None,
                budget: Budget | None = None) -> Roles:
    """Roles for `settings` (default: from the environment and tmem.toml). `store` holds the response cache and
    the query-vector cache; pass `cache` to share one (and read its hit rate). A role with backend "local" starts
    the packaged model's server first (once per process; `log` gets its progress lines, default stderr) unless
    replay-only mode answers from the cache anyway."""
    settings = settings or BackendSettings.from_sources(env)
    counter = default_token_counter()
    budget = budget or settings_budget(settings)
    llm_roles = [settings.role(r) for r in ROLES if settings.role(r).backend != "offline"]
    if cache is None and llm_roles:
        cache = response_cache(settings, store)
    if any(rs.backend == "recorded" for rs in llm_roles):
        cache = recorded_cache(llm_roles)
    elif any(rs.backend == "local" for rs in llm_roles) and settings.cache_mode != "replay":
        local.ensure_server(settings.local, log or (lambda line: print(line, file=sys.stderr)))
    endpoints: dict[tuple, Endpoint] = {}
    breakers: dict[str, CircuitBreaker] = {}

    def breaker(base_url: str) -> CircuitBreaker:  # reachability belongs to the server, whatever the key
        from tmem.models.llm.openai_backend import public_url  # only once an endpoint is used (see online_role)
        return breakers.setdefault(public_url(base_url),
                                   CircuitBreaker(settings.circuit_failures, settings.circuit_cooldown,
                                                  first_trial=FIRST_TRIAL))

    def endpoint(rs: RoleSettings) -> Endpoint:
        from tmem.models.llm import openai_backend
        key = (rs.base_url.rstrip("/"), rs.api_key_env)  # not the timeout: each request sends its role's own
        if key not in endpoints:
            # the local server has one slot: a second request in flight would only queue there, against its timeout
            in_flight = 1 if rs.backend == "local" else settings.max_in_flight
            endpoints[key] = openai_backend.Endpoint(rs.base_url, rs.api_key_env,
                                                     rs.timeout or settings.local.timeout_cap, in_flight,
                                                     settings.requests_per_minute, env, breaker(rs.base_url),
                                                     settings.tokens_per_minute)
            if rs.backend == "local":  # progress and ETA of a call (tmem.models.local.server.ProgressWatch)
                endpoints[key].client = local.METER.wrap(endpoints[key].client, settings.local.port, counter)
                if settings.cache_mode != "replay":  # timeouts that follow the server (tmem.models.local.pace)
                    endpoints[key].pace = server_pace(settings.local, endpoints[key].client, rs.model,
                                                      settings.local.timeout_floor, settings.local.timeout_cap,
                                                      log or (lambda line: print(line, file=sys.stderr)))
        return endpoints[key]

    roles = {}
    for name in ROLES:
        rs = settings.role(name)
        roles[name] = (offline_role(name) if rs.backend == "offline" else
                       online_role(name, _chat_client(rs, endpoint(rs), counter, cache, backoff_base, budget)))
    e = settings.embedder
    replay = settings.cache_mode == "replay" or (cache is not None and cache.mode == "replay")
    embedder = make_embedder(e.kind, model=e.model, base_url=e.base_url, api_key_env=e.api_key_env,
                             dimensions=e.dimensions, batch_size=e.batch_size, timeout=e.timeout, env=env,
                             replay=replay, breaker=breaker(e.base_url)) \
        if e.kind == "openai" else make_embedder(e.kind, batch_size=e.batch_size, threads=e.threads)
    if store is not None:
        embedder = QueryCachingEmbedder(embedder, store)
    if llm_roles:  # the ranks load while the first model calls are out (compression counts after them); started
        counter.preload()  # last, so that they do not slow the client's import above
    return Roles(**roles, embedder=embedder, tokens=counter)


def _chat_client(settings, endpoint, counter, cache, backoff_base, budget):
    from tmem.models.llm.openai_backend import ChatClient  # only once an endpoint is used (see online_role)
    return ChatClient(settings, endpoint, counter, cache, backoff_base, budget=budget)


def settings_budget(settings: BackendSettings, earlier: Spent | None = None) -> Budget:
    """The spend meter and cap of the settings' prices and limits (`earlier`: spent by earlier passes)."""
    return Budget(Prices(settings.price_input, settings.price_output), settings.max_cost, settings.max_tokens,
                  earlier or Spent())


def roles_budget(roles: Roles) -> Budget | None:
    """The budget the roles' language-model calls share; None when every role is offline."""
    clients = [getattr(getattr(roles, r), "client", None) for r in ROLES]
    return next((c.budget for c in clients if getattr(c, "budget", None) is not None), None)


def recorded_cache(llm_roles: list[RoleSettings]):
    """The recorded demo as a replay-only cache; every language-model role must be a recorded one (a live role
    would be answered from the recording, or fail, without saying why)."""
    live = [rs.role for rs in llm_roles if rs.backend != "recorded"]
    if live:
        raise ValueError(f"the recorded backend replays a recording; roles {', '.join(live)} cannot be live in the "
                         f"same run (set them offline or recorded)")
    return RecordedCache(load_recording())


def cache_stats(roles: Roles) -> dict[str, float] | None:
    """Hits, misses and hit rate of the response cache the roles share; None when no role has one."""
    caches = [getattr(getattr(getattr(roles, r), "client", None), "cache", None) for r in ROLES]
    cache = next((c for c in caches if c is not None), None)
    return cache.stats() if cache is not None else None


def vector_store(store, progress=None) -> VectorStore:
    """A Scope `vector_loader` that keeps message vectors in `store`: `vector_store(store).install(scope)`."""
    return VectorStore(store, progress)
