""""Test endpoint" (the Settings page): one short round trip to an OpenAI-compatible server before a run depends on
it — its model list (GET /models) and a one-token chat reply from the configured model — with the latency of each
and the model name the server says answered. No retries (a test should fail fast), the key read from the variable
the settings name and scrubbed from every message; nothing is cached or stored."""
from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    url: str  # public URL (no credentials)
    ok: bool  # the chat call answered
    models_s: float | None  # latency of GET /models (None: it failed)
    chat_s: float | None  # latency of the one-token chat reply (None: it failed)
    listed: int | None  # how many models the server lists
    model_listed: bool | None  # whether the configured model is among them
    answered_by: str | None  # the model name in the reply
    message: str  # one line for the user


def probe_endpoint(base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", timeout: float = 10.0,
                   env: Mapping[str, str] | None = None) -> Probe:
    from tmem.models.llm.openai_backend import Endpoint, redact  # the openai client loads only when a test is asked for

    env = os.environ if env is None else env
    endpoint = Endpoint(base_url, api_key_env, timeout, env=env)
    clean = lambda exc: redact(f"{type(exc).__name__}: {exc}", endpoint.secret).splitlines()[0][:300]  # noqa: E731
    models_s = listed = model_listed = None
    problems: list[str] = []
    start = time.perf_counter()
    try:
        names = [m.id for m in endpoint.client.models.list()]
        models_s, listed, model_listed = time.perf_counter() - start, len(names), model in names
    except Exception as exc:  # noqa: BLE001 - reported to the user; some servers have no /models
        problems.append(f"GET /models failed ({clean(exc)})")
    if not model:
        return Probe(endpoint.url, False, models_s, None, listed, None, None,
                     "; ".join(problems + ["no model name set: nothing to ask"]))
    start = time.perf_counter()
    try:
        reply = endpoint.client.chat.completions.create(model=model, max_tokens=1, temperature=0,
                                                        messages=[{"role": "user", "content": "Reply OK."}])
        chat_s = time.perf_counter() - start
    except Exception as exc:  # noqa: BLE001
        # never the variable's name: a visitor reads this line
        key = "" if endpoint.secret else " (no API key is set for this endpoint)"
        return Probe(endpoint.url, False, models_s, None, listed, model_listed, None,
                     "; ".join(problems + [f"chat call failed{key}: {clean(exc)}"]))
    answered_by = getattr(reply, "model", None) or model
    note = "" if model_listed in (None, True) else f"; {model!r} is not in the server's list of {listed} models"
    return Probe(endpoint.url, True, models_s, chat_s, listed, model_listed, answered_by,
                 f"reachable: {answered_by} answered in {chat_s * 1000:.0f} ms" + note)
