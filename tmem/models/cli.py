"""`python -m tmem backends`: which backend and model each role uses, resolved from flags, environment and
tmem.toml, and where each value came from. Prints the name of the key variable and whether it is set, never a key.
`--check` asks each configured server for its model list (one short request each)."""
from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping

from tmem.models.settings import ROLES, BackendSettings, add_backend_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_backend_arguments(parser)
    parser.add_argument("--json", action="store_true", help="Print the resolved settings as JSON.")
    parser.add_argument("--check", action="store_true", help="Contact each configured server (GET /models).")


def describe(settings: BackendSettings, env: Mapping[str, str]) -> list[dict[str, str]]:
    """One row per role plus the embedder and cache: what a user needs to see, without secrets."""
    from tmem.models.openai_backend import public_url

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
        prefixes = (f"roles.{name}.",) if r.backend == "offline" else ("llm.", f"roles.{name}.")
        row["from"] = ", ".join(sorted({v for k, v in origins.items() if k.startswith(prefixes)}))
        rows.append(row)
    e = settings.embedder
    rows.append({"role": "embedder", "backend": e.kind, "model": e.model or embedder_label(e.kind),
                 **({"url": public_url(e.base_url), "key": f"${e.api_key_env}"} if e.kind == "openai" else {})})
    rows.append({"role": "cache", "backend": settings.cache_mode, "model": settings.cache_db or "the corpus store",
                 "concurrency": f"{settings.max_in_flight} in flight, "
                                f"{settings.requests_per_minute or 'no'} requests/minute limit"})
    return rows


def embedder_label(kind: str) -> str:
    from tmem.models.embedders import minilm_files

    if kind in ("auto", "minilm"):
        return "all-MiniLM-L6-v2 int8 (packaged)" if minilm_files() else "lexical fallback (MiniLM not installed)"
    return "lexical fallback" if kind == "lexical" else kind


def check(settings: BackendSettings, env: Mapping[str, str]) -> list[str]:
    from tmem.models.openai_backend import Endpoint

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


def main(args: argparse.Namespace) -> int:
    env = os.environ
    settings = settings_from_args(args, env)
    rows = describe(settings, env)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            rest = "  ".join(f"{k}={v}" for k, v in row.items() if k not in ("role", "backend", "model") and v)
            print(f"{row['role']:<17} {row['backend']:<8} {row['model']}" + (f"\n{'':<26}{rest}" if rest else ""))
    if args.check:
        for line in check(settings, env):
            print(line)
    return 0
