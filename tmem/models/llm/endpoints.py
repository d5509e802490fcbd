"""Which model endpoints a browser session may use: the operator's, never one a visitor makes up.

The operator of a server configures endpoints — a base URL, a model and the name of the environment variable the
key comes from — in the server's environment (`TMEM_LLM_*`, per-role `TMEM_<ROLE>_*`) or in the backend TOML file
(the same keys, plus any number of `[endpoints.NAME]` tables). A browser session picks among them. The pairing is
the point: a server variable is only ever sent to the URL the operator paired it with, so a visitor can neither
send `OPENAI_API_KEY` (or `HOME`) to a URL of their own nor learn which variables exist.

Typing a new endpoint in the browser is off unless the operator sets `TMEM_ALLOW_BROWSER_ENDPOINTS=1`; even then
such an endpoint gets only a key typed in that session (held in the session's memory and, for an app batch, in the
child process's environment: never on disk) or none. `check_overrides` is the one gate: the Settings page's
*Test endpoint* and *Apply*, the roles every page builds and the app's batches all go through it.
"""
from __future__ import annotations

import os
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmem.models.settings import EMBEDDER_KINDS, ROLES, BackendSettings, read_endpoint_tables

ALLOW_ENV = "TMEM_ALLOW_BROWSER_ENDPOINTS"
SESSION_KEY_ENV = "TMEM_SESSION_API_KEY"  # exists only in a session's key mapping, or in its batch child's env
# What a browser session may change of the backend settings; everything else (cache, concurrency, the local
# server's port, timeouts) stays the operator's.
BROWSER_KEYS = frozenset({"backend.preset", "embedder.kind",
                          *(f"llm.{f}" for f in ("backend", "model", "base_url", "api_key_env")),
                          *(f"roles.{r}.{f}" for r in ROLES for f in ("backend", "model", "base_url", "api_key_env"))})
FIELDS = ("base_url", "model", "api_key_env")


class EndpointRefused(ValueError):
    """A browser session asked for an endpoint the operator did not configure."""


@dataclass(frozen=True)
class OperatorEndpoint:
    name: str
    base_url: str
    model: str
    api_key_env: str  # "" = no key
    source: str  # "server settings" or the TOML file's table

    @property
    def pairing(self) -> tuple[str, str, str]:
        return _norm(self.base_url), self.model, self.api_key_env

    @property
    def label(self) -> str:
        from tmem.models.llm.openai_backend import public_url

        return f"{self.name}: {self.model} @ {public_url(self.base_url)}"

    def overrides(self, prefix: str = "llm") -> dict[str, str]:
        """The dotted settings that put a role (`roles.answer`) or all roles (`llm`) on this endpoint."""
        return {f"{prefix}.backend": "openai", **{f"{prefix}.{f}": getattr(self, f) for f in FIELDS}}


def _norm(url: str) -> str:
    return url.strip().rstrip("/")


def browser_endpoints_allowed(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(ALLOW_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def operator_endpoints(env: Mapping[str, str] | None = None,
                       file: str | Path | Mapping | None = None) -> tuple[OperatorEndpoint, ...]:
    """The server's own role endpoints (its settings without any browser override), then the TOML file's
    `[endpoints.NAME]` tables; one entry per distinct (URL, model, key variable)."""
    env = os.environ if env is None else env
    server = BackendSettings.from_sources(env, file)
    out: dict[tuple, OperatorEndpoint] = {}
    by_pairing: dict[tuple, list[str]] = {}
    for r in ROLES:
        rs = server.role(r)
        if rs.backend == "openai":
            by_pairing.setdefault((_norm(rs.base_url), rs.model, rs.api_key_env), []).append(r)
    for (url, model, key_env), roles in by_pairing.items():
        name = "server" if len(by_pairing) == 1 else f"server ({', '.join(roles)})"
        out[(url, model, key_env)] = OperatorEndpoint(name, url, model, key_env, "server settings")
    for name, table, where in read_endpoint_tables(file, env):
        ep = OperatorEndpoint(name, table.get("base_url", ""), table["model"], table.get("api_key_env", ""), where)
        out.setdefault(ep.pairing, ep)
    return tuple(out.values())


def check_overrides(overrides: Mapping[str, Any], env: Mapping[str, str] | None = None,
                    file: str | Path | Mapping | None = None) -> BackendSettings:
    """The settings a browser session's overrides give, or EndpointRefused: every language-model role must be on
    an operator endpoint, or (when the operator allows browser endpoints) on one that reads only the session's own
    key; an embeddings endpoint must be the operator's own (the browser cannot change its URL or key)."""
    env = os.environ if env is None else env
    foreign = sorted(k for k, v in overrides.items() if k not in BROWSER_KEYS and v is not None)
    if foreign:
        raise EndpointRefused(f"the browser cannot change {', '.join(foreign)}: these are the operator's settings")
    operator = BackendSettings.from_sources(env, file)
    if overrides.get("embedder.kind") == "openai" and operator.embedder.kind != "openai":
        raise EndpointRefused(_refusal("the embedder", "", "an embeddings model", False))
    settings = BackendSettings.from_sources(env, file, overrides)
    allowed = {ep.pairing for ep in operator_endpoints(env, file)}
    custom = browser_endpoints_allowed(env)
    for r in ROLES:
        rs = settings.role(r)
        if rs.backend != "openai" or (_norm(rs.base_url), rs.model, rs.api_key_env) in allowed:
            continue
        if custom and rs.api_key_env == SESSION_KEY_ENV:
            continue
        raise EndpointRefused(_refusal(f"role {r}", rs.base_url, rs.model, custom))
    return settings


def _refusal(what: str, base_url: str, model: str, custom: bool) -> str:
    from tmem.models.llm.openai_backend import public_url

    where = f"{model or 'no model'} @ {public_url(base_url)}"
    if custom:
        return (f"{what}: {where} is not an endpoint the operator configured, so it may use only a key typed in "
                f"this session")
    return (f"{what}: {where} is not an endpoint the operator configured (typing endpoints in the browser is off; "
            f"the operator configures them: docs/app.md, 'Deploying for others')")


def session_keys(session_key: str | None, env: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """The variables a session's roles read keys from: the server's environment, with the session's own key (or
    none) under SESSION_KEY_ENV, whatever the server's environment holds there."""
    return ChainMap({SESSION_KEY_ENV: session_key or ""}, os.environ if env is None else env)


def embedder_kinds(env: Mapping[str, str] | None = None, file: str | Path | Mapping | None = None) -> list[str]:
    """The embedder kinds a browser may pick: the packaged and lexical ones, and `openai` only when the operator
    configured an embeddings endpoint."""
    operator = BackendSettings.from_sources(os.environ if env is None else env, file)
    return [k for k in EMBEDDER_KINDS if k != "openai" or operator.embedder.kind == "openai"]
