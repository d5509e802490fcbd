""""Test endpoint" (the Settings page): one short round trip to an OpenAI-compatible server before a run depends on
it — its model list (GET /models) and a one-token chat reply from the configured model — with the latency of each
and the model name the server says answered. No retries (a test should fail fast), the key read from the variable
the settings name and scrubbed from every message; nothing is cached or stored.

What a failure shows is its HTTP status (or the kind of connection failure) and its latency, never the body: with
browser-typed endpoints allowed, the URL may be an internal service, and its 403 page (ADMIN_TOKEN=...) would be
read through the app (a server-side request forgery that reads). The model name that answered is shown only when it
looks like one."""
from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

_MODEL_NAME = re.compile(r"[\w.:/@+-]{1,100}")  # gpt-4o-mini, Qwen/Qwen2.5-7B-Instruct, models/gemini-1.5:latest


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
    from tmem.models.llm.openai_backend import Endpoint  # the openai client loads only when a test is asked for

    env = os.environ if env is None else env
    endpoint = Endpoint(base_url, api_key_env, timeout, env=env)
    models_s = listed = model_listed = None
    problems: list[str] = []
    start = time.perf_counter()
    try:
        names = [m.id for m in endpoint.client.models.list()]
        models_s, listed, model_listed = time.perf_counter() - start, len(names), model in names
    except Exception as exc:  # noqa: BLE001 - reported to the user; some servers have no /models
        problems.append(f"GET /models failed ({failure(exc)}, {_ms(start)})")
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
                     "; ".join(problems + [f"chat call failed{key}: {failure(exc)} after {_ms(start)}"]))
    named = getattr(reply, "model", None)
    answered_by = named if isinstance(named, str) and _MODEL_NAME.fullmatch(named) else model
    note = "" if model_listed in (None, True) else f"; {model!r} is not in the server's list of {listed} models"
    return Probe(endpoint.url, True, models_s, chat_s, listed, model_listed, answered_by,
                 f"reachable: {answered_by} answered in {chat_s * 1000:.0f} ms" + note)


def failure(exc: Exception) -> str:
    """What went wrong, without a word of the response body: the HTTP status, or the kind of failure."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        return "no connection (refused, unreachable or closed)"
    if isinstance(exc, (openai.APIResponseValidationError, ValueError)):
        return "not an OpenAI-compatible reply"
    return f"failed ({type(exc).__name__})"


def _ms(start: float) -> str:
    return f"{(time.perf_counter() - start) * 1000:.0f} ms"
