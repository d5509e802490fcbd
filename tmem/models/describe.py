"""Which backend and model each role uses, resolved from flags, environment and tmem.toml, and where each value
came from (`describe`: the name of the key variable and whether it is set, never a key), and whether each configured
server answers (`check`: one short request each). The `backends` command (tmem/commands/backends.py) prints them."""
from __future__ import annotations

from collections.abc import Mapping

from tmem.models import embedders
from tmem.models.settings import ROLES, BackendSettings


def describe(settings: BackendSettings, env: Mapping[str, str]) -> list[dict[str, str]]:
    """One row per role plus the embedder and cache: what a user needs to see, without secrets."""
    from tmem.models.llm.openai_backend import public_url

    origins = dict(settings.origins)
    rows = []
    for name in ROLES:
        r = settings.role(name)
        row = {"role": name, "backend": r.backend}
        if r.backend == "offline":
            row["model"] = "deterministic stand-in (tmem.models.offline)"
        else:
            row.update(model=r.model, url=public_url(r.base_url), temperature=str(r.temperature),
                       max_tokens=str(r.max_tokens), response_format=r.response_format,
                       key=f"${r.api_key_env} ({'set' if env.get(r.api_key_env) else 'NOT set'})")
            if r.backend in ("local", "recorded"):  # no key: the packaged model on loopback, or its recording
                row["key"] = "none needed"
                row["server"] = ("replayed from data/recorded-local.json, no server" if r.backend == "recorded"
                                 else f"llama.cpp started by tmem ({settings.local.threads} threads, n_ctx "
                                      f"{settings.local.n_ctx})")
        prefixes = (f"roles.{name}.",) if r.backend == "offline" else ("llm.", f"roles.{name}.")
        row["from"] = ", ".join(sorted({v for k, v in origins.items() if k.startswith(prefixes)}))
        rows.append(row)
    e = settings.embedder
    rows.append({"role": "embedder", "backend": e.kind, "model": e.model or embedder_label(e.kind),
                 **({"url": public_url(e.base_url), "key": f"${e.api_key_env}"} if e.kind == "openai" else {})})
    rows.append({"role": "cache", "backend": settings.cache_mode, "model": settings.cache_db or "the corpus store",
                 "concurrency": concurrency_line(settings)})
    return rows


def concurrency_line(settings: BackendSettings) -> str:
    """The per-endpoint limits as `backends` and the Settings page show them."""
    rate = lambda v: f"{v:g}" if v else "no"  # noqa: E731
    return (f"{settings.max_in_flight} in flight, {rate(settings.requests_per_minute)} requests/minute limit, "
            f"{rate(settings.tokens_per_minute)} tokens/minute limit (prompt + output limit per request), "
            "a 429's Retry-After pauses the endpoint (up to 60 s)")


def embedder_label(kind: str) -> str:
    if kind in ("auto", "minilm"):
        packaged = embedders.minilm_files()
        return "all-MiniLM-L6-v2 int8 (packaged)" if packaged else "lexical fallback (MiniLM not installed)"
    return "lexical fallback" if kind == "lexical" else kind


def check(settings: BackendSettings, env: Mapping[str, str]) -> list[str]:
    from tmem.models.llm.openai_backend import Endpoint

    lines, seen = [], set()
    for name in ROLES:
        r = settings.role(name)
        if r.backend == "offline" or (r.base_url, r.api_key_env) in seen:
            continue
        seen.add((r.base_url, r.api_key_env))
        endpoint = Endpoint(r.base_url, r.api_key_env, min(r.timeout, 10.0), env=env)
        try:
            models = [m.id for m in endpoint.client.models.list()]
            ok = "model found" if r.model in models else f"model {r.model!r} not listed ({len(models)} models)"
            lines.append(f"{endpoint.url}: reachable; {ok}")
        except Exception as exc:  # noqa: BLE001 - reported to the user
            lines.append(f"{endpoint.url}: NOT reachable: {type(exc).__name__}")
    return lines
