"""Transport to any OpenAI-compatible chat API (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp) for the model roles
of `tmem.models.llm.roles`.

Replies are requested with a JSON schema where the server supports it (degrading to JSON mode, then to text) and
parsed robustly from text otherwise. Transient faults (timeouts, 408/409/429/5xx, empty or malformed replies) are
retried with backoff (App. D.2); a persistent failure raises `CallFailed`, which the roles turn into a
`StageError` with the fallback taken, never a silent drop. An endpoint that cannot be reached at all trips its
circuit breaker (`tmem.models.llm.concurrency.CircuitBreaker`): further calls fail at once for a cool-down instead of
each spending its retries. Responses are cached by (base URL, model, role, prompt hash, parameters); the API key is
read from the environment, kept in memory and scrubbed (with any long fragment of it) from every reply and error
text before anything is cut, recorded or cached.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import openai

from tmem.models.llm.budget_cap import Budget, usage_counts
from tmem.models.llm.cache import CachedReply, ResponseCache, request_key
from tmem.models.llm.concurrency import CircuitBreaker, CircuitOpen, InFlight, RateLimiter, TokenLimiter, backoff_delays
from tmem.models.llm.failures import CallFailed, MalformedReply  # defined apart: the app names them without openai
from tmem.models.llm.tokens import chat_prompt_tokens
from tmem.models.local.pace import CallTimeout, ServerPace
from tmem.models.settings import RoleSettings
from tmem.types import (
    Usage,
)

DEGRADE = {"schema": "object", "object": "text"}
RETRYABLE_STATUS = (408, 409, 429)
UNREACHABLE = (openai.APITimeoutError, openai.APIConnectionError)  # what the circuit breaker counts
RETRY_AFTER_CAP = 60.0  # seconds: a 429's Retry-After is honoured up to a minute (a token window)
CIRCUIT_WAIT = 8.0  # seconds a call may wait in all for an open circuit's trial (the backoff cap)
KEY_FRAGMENT = 8  # a run of this many characters copied from the key is redacted like the whole key
UNSET_TIMEOUT = 120.0  # seconds, for a timeout of 0 ("follow the server") on an endpoint whose speed is not measured
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


def public_url(base_url: str) -> str:
    """The endpoint as shown in labels and traces: no credentials, query or fragment."""
    if not base_url:
        return "api.openai.com"
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}".rstrip("/")


def redact(text: str, secret: str | None) -> str:
    """`text` without the key: the whole key, and every run of at least KEY_FRAGMENT characters copied from it (a
    key cut short by some truncation, here or in a proxy), become [redacted]. Redact before cutting any text."""
    if not secret or not text:
        return text
    text = text.replace(secret, "[redacted]")
    if len(secret) <= KEY_FRAGMENT:
        return text
    grams = {secret[i:i + KEY_FRAGMENT] for i in range(len(secret) - KEY_FRAGMENT + 1)}
    out, start, i = [], 0, 0
    while i <= len(text) - KEY_FRAGMENT:
        if text[i:i + KEY_FRAGMENT] not in grams:
            i += 1
            continue
        end = i + KEY_FRAGMENT
        while end < len(text) and text[i:end + 1] in secret:
            end += 1
        out += [text[start:i], "[redacted]"]
        start = i = end
    return "".join(out) + text[start:]


def strip_thinking(text: str) -> str:
    return _THINK.sub("", text or "").strip()


def parse_json_object(text: str, key: str) -> dict:
    """The first JSON object in `text` that has `key` (code fences, prose and <think> blocks tolerated); a bare
    list is read as {key: list}. Raises MalformedReply."""
    text = strip_thinking(text)
    if not text:
        raise MalformedReply("empty reply")
    decoder = json.JSONDecoder()
    for start in [m.start() for m in re.finditer(r"[\[{]", text)]:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and key in value:
            return value
        if isinstance(value, list) and text[start] == "[":
            return {key: value}
    raise MalformedReply(f"no JSON object with {key!r} in reply: {text[:120]!r}")


class Endpoint:
    """One OpenAI-compatible server: a shared, thread-safe client, a rate limiter, an in-flight bound and a
    circuit breaker. `timeout` is the client's default; each role sends its own per request, or, on a server whose
    speed is measured (`pace`: the local backend's), one from its prompt length. The API key is read from the
    environment here and kept only in memory."""

    def __init__(self, base_url: str, api_key_env: str, timeout: float, max_in_flight: int = 8,
                 requests_per_minute: float = 0.0, env: Mapping[str, str] | None = None,
                 breaker: CircuitBreaker | None = None, tokens_per_minute: float = 0.0):
        env = os.environ if env is None else env
        self.secret = env.get(api_key_env) or None
        self.url = public_url(base_url)
        self.client = openai.OpenAI(api_key=self.secret or "no-key-set", base_url=base_url or None,
                                    timeout=timeout, max_retries=0)
        self.limiter = RateLimiter(requests_per_minute)  # also paused by a 429's Retry-After
        self.tokens = TokenLimiter(tokens_per_minute)
        self.slots = InFlight(max_in_flight)  # counts the most requests in flight, for the summaries
        self.breaker = breaker or CircuitBreaker()
        self.pace: ServerPace | None = None  # set by the factory for the local server (tmem.models.local.pace)


def describe_failure(client, failures: list[str], head: str = "") -> str:
    """A call's failure for the trace: the client's label, what gave up, each distinct failure; the key redacted."""
    attempts = len(failures)
    head = head or f"failed after {attempts} attempt{'s' * (attempts != 1)}"
    detail = "; ".join(dict.fromkeys(failures))
    return redact(f"{client.label}: {head}: {detail}", client.endpoint.secret)[:600]  # redact, then cut


@dataclass
class ChatClient:
    """One role's calls: cache lookup, request, usage accounting, parsing, bounded retries."""

    settings: RoleSettings
    endpoint: Endpoint
    counter: Any  # TokenCounter
    cache: ResponseCache | None = None
    backoff_base: float = 0.5
    sleep: Callable[[float], None] = time.sleep
    budget: Budget | None = None  # the spend meter and cap (tmem.models.llm.budget_cap), shared by the run's roles

    def __post_init__(self):
        self.response_format = self.settings.response_format
        self.token_param = "max_tokens"
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        """Model, endpoint and decoding parameters: a reply depends on all of them, so stored traces and batch
        records made under other settings are never taken for this role's."""
        decoding = " ".join(f"{k}={'unset' if v is None else v}" for k, v in self.settings.decoding.items())
        kind = self.settings.backend if self.settings.backend in ("local", "recorded") else "openai"
        return f"{kind}:{self.settings.model}@{self.endpoint.url} [{decoding}]"

    def params(self, schema: dict | None) -> dict[str, Any]:
        s = self.settings
        out: dict[str, Any] = {"max_tokens": s.max_tokens, "response_format": s.response_format}
        if s.temperature is not None:
            out["temperature"] = s.temperature
        if s.reasoning_effort:
            out["reasoning_effort"] = s.reasoning_effort
        if schema is not None and s.response_format != "text":
            out["schema"] = schema
        return out

    def complete(self, system: str, user: str, parse: Callable[[str], Any], schema: dict | None = None,
                 schema_name: str = "reply") -> tuple[Any, str, Usage]:
        """(parsed value, reply text, usage). Raises CallFailed, or ReplayMissError in replay-only mode."""
        params = self.params(schema)
        key, prompt_hash, blob = request_key(self.settings.model, self.settings.role, system, user, params,
                                             self.endpoint.url)
        hit = self.cache.get(key, f"{self.settings.role} / {self.settings.model}@{self.endpoint.url} / prompt "
                                  f"{prompt_hash}") if self.cache else None
        if hit is not None:
            try:
                return parse(hit.text), hit.text, Usage(hit.prompt_tokens, hit.completion_tokens, 0, 1, "cache")
            except MalformedReply as exc:
                if self.cache.mode == "replay":
                    raise CallFailed(redact(f"{self.label}: cached reply no longer parses ({exc})",
                                            self.endpoint.secret), Usage()) from None
        usage, failures = Usage(), []
        delays = backoff_delays(self.settings.retries, self.backoff_base)
        repair: tuple[str, str] | None = None  # (the malformed reply, why): the next attempt asks for a repair
        circuit_waited = 0.0
        while True:
            retry_after, text = None, None
            try:
                text, spent = self._request(system, user, schema, schema_name, repair)
                usage = usage + spent
                value = parse(text)
                if self.cache:
                    self.cache.put(key, self.settings.role, self.settings.model, prompt_hash, blob,
                                   CachedReply(text, spent.prompt_tokens, spent.completion_tokens), spent.source)
                return value, text, usage
            except _Retryable as exc:
                usage = usage + exc.usage
                failures.append(str(exc))
                retry_after = exc.retry_after
            except MalformedReply as exc:
                failures.append(f"malformed reply: {exc}")
                # Sending the identical request again mostly gets the identical reply (temperature 0): show the
                # model its reply and what is wrong with it instead. The cache keeps the original request's key.
                repair = (text, str(exc)) if text is not None else repair
            except openai.APIStatusError as exc:
                failures.append(_status_text(exc, self.endpoint.secret))
                raise CallFailed(describe_failure(self, failures, "not retryable"), usage) from None
            except CircuitOpen as exc:
                # a server that answered before and dropped a burst of connections: wait for the trial call
                # (bounded, not counted as a retry) instead of failing; one that never answered fails fast
                waited = time.monotonic()
                if self.endpoint.breaker.wait_for_trial(CIRCUIT_WAIT - circuit_waited):
                    circuit_waited += time.monotonic() - waited
                    continue
                raise CallFailed(describe_failure(self, failures + [f"not sent: {exc}"], "fail-fast"), usage) from None
            delay = next(delays, None)
            if delay is None:
                raise CallFailed(describe_failure(self, failures), usage)
            if retry_after:  # the server says when: every call to this endpoint holds back until then
                self.endpoint.limiter.pause(min(retry_after, RETRY_AFTER_CAP))
            if not self.endpoint.breaker.is_open:  # an open circuit refuses the retry at once: no point waiting
                self.sleep(delay)

    def _request(self, system: str, user: str, schema: dict | None, schema_name: str,
                 repair: tuple[str, str] | None = None) -> tuple[str, Usage]:
        """One HTTP request (degrading response_format / max_tokens name when the server rejects them); with
        `repair`, the malformed reply and a repair instruction follow the user message. Under a budget cap the
        request's worst case is reserved first (BudgetExceeded: not sent), and settled with what it spent."""
        while True:
            used = (self.response_format, self.token_param)
            kwargs = self._kwargs(system, user, schema, schema_name)
            if repair is not None:
                kwargs["messages"] += repair_messages(*repair)
            capped = self.budget is not None and self.budget.capped
            # counted only under a token limit, a cap or a paced timeout: the tokenizer costs time on the way to the
            # first call
            paced = self.endpoint.pace is not None and not self.settings.timeout
            prompt = chat_prompt_tokens(self.counter, kwargs["messages"]) \
                if capped or self.endpoint.tokens.capacity or paced else 0
            held = self.budget.reserve(self.settings.role, prompt, self.settings.max_tokens if capped else 0) \
                if self.budget is not None else None
            spent = Usage()
            try:
                response = self._send(kwargs, prompt, used)
                if response is None:
                    continue  # adapted to the server: the same request, reshaped
                text, spent = self._read(response, system, user)
                return text, spent
            except _Retryable as exc:
                spent = exc.usage
                raise
            finally:
                if held is not None:
                    self.budget.settle(held, spent.prompt_tokens, spent.completion_tokens, spent.calls)

    def _send(self, kwargs: dict[str, Any], prompt_tokens: int, used: tuple[str, str]) -> Any:
        """The HTTP request through the endpoint's breaker, limits and slots; None when the server rejected a
        request feature and this client adapted (send again). A timeout says how long it waited and why."""
        endpoint, limit = self.endpoint, request_timeout(self.settings, self.endpoint, prompt_tokens)
        try:
            endpoint.breaker.allow(take_trial=False)  # CircuitOpen at once while the endpoint is down, ...
            endpoint.tokens.acquire(prompt_tokens + self.settings.max_tokens)  # no-op without a token limit
            endpoint.limiter.acquire()
            with endpoint.slots, endpoint.breaker.attempt(UNREACHABLE):  # ... or once it went down meanwhile
                return timed_request(endpoint, self.settings, kwargs, prompt_tokens, limit.seconds)
        except openai.APITimeoutError:
            raise _Retryable(f"APITimeoutError: no reply within {limit.seconds:.0f} s ({limit.why})") from None
        except UNREACHABLE as exc:
            raise _Retryable(redact(f"{type(exc).__name__}: {exc}", endpoint.secret)[:200]) from None
        except (ValueError, openai.APIResponseValidationError) as exc:  # a body that is not JSON
            raise _Retryable(f"unreadable response body ({type(exc).__name__})") from None
        except openai.APIStatusError as exc:
            if exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500:
                raise _Retryable(_status_text(exc, endpoint.secret), retry_after=_retry_after(exc)) from None
            if not self._adapt(exc, used):
                raise
            return None

    def _kwargs(self, system: str, user: str, schema: dict | None, schema_name: str) -> dict[str, Any]:
        s = self.settings
        kwargs: dict[str, Any] = {"model": s.model, self.token_param: s.max_tokens,
                                  "messages": [{"role": "system", "content": system},
                                               {"role": "user", "content": user}]}
        if s.temperature is not None:
            kwargs["temperature"] = s.temperature
        if s.reasoning_effort:
            kwargs["reasoning_effort"] = s.reasoning_effort
        if schema is not None and self.response_format == "schema":
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": schema_name, "schema": schema, "strict": True}}
        elif schema is not None and self.response_format == "object":
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def _adapt(self, exc: openai.APIStatusError, used: tuple[str, str]) -> bool:
        """Adjust to a server that rejects a request feature (400/422); False when nothing is left to try."""
        message = str(exc).lower()
        with self._lock:
            if used != (self.response_format, self.token_param):
                return True  # another thread already adapted
            if "max_completion_tokens" in message and self.token_param == "max_tokens":
                self.token_param = "max_completion_tokens"
                return True
            if ("response_format" in message or "schema" in message or "json" in message) \
                    and self.response_format in DEGRADE:
                self.response_format = DEGRADE[self.response_format]
                return True
        return False

    def _read(self, response: Any, system: str, user: str) -> tuple[str, Usage]:
        if not hasattr(response, "choices"):
            raise _Retryable(f"unexpected response body ({type(response).__name__})")
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "") if choice is not None and choice.message is not None else ""
        text = redact(text, self.endpoint.secret)  # a server echoing the key: never parsed, cached or recorded
        reported = getattr(response, "usage", None)
        counted = lambda: Usage(self.counter.count(system) + self.counter.count(user),  # noqa: E731
                                self.counter.count(text), 1, 0, f"counted:{self.counter.name}")
        usage = None
        if reported is not None and getattr(reported, "prompt_tokens", None) is not None:
            try:  # a negative or non-finite count is a server fault: the reply is not used, what it cost is counted
                usage = Usage(*usage_counts(reported.prompt_tokens, reported.completion_tokens or 0), 1, 0, "server")
            except ValueError as exc:
                raise _Retryable(str(exc), counted()) from None
        usage = usage or counted()
        if not text.strip():
            reason = getattr(choice, "finish_reason", None)
            raise _Retryable(f"empty reply (finish_reason={reason})", usage)
        return text, usage


def request_timeout(settings: RoleSettings, endpoint: Endpoint, prompt_tokens: int) -> CallTimeout:
    """The role's timeout setting, or (0, on a server whose speed is measured) one from the prompt's length."""
    if not settings.timeout and endpoint.pace is not None:
        return endpoint.pace.timeout(prompt_tokens, settings.max_tokens)
    return CallTimeout(settings.timeout or UNSET_TIMEOUT, "the role's timeout setting")


def timed_request(endpoint: Endpoint, settings: RoleSettings, kwargs: dict[str, Any], prompt_tokens: int,
                  seconds: float) -> Any:
    """The chat request with its timeout; on a paced server the pace follows the reply, and a timeout halves it
    (the retry waits twice as long)."""
    pace = endpoint.pace if not settings.timeout else None
    started = time.monotonic()
    try:
        response = endpoint.client.chat.completions.create(**kwargs, timeout=seconds)
    except openai.APITimeoutError:
        if pace is not None:
            pace.timed_out()
        raise
    if pace is not None:
        pace.observe(response, prompt_tokens, settings.max_tokens, time.monotonic() - started)
    return response


REPAIR_INSTRUCTION = ("Your previous reply could not be used: {error}. Reply again to the request above with only "
                      "the JSON object it asks for: no other text, no code fences.")
REPAIR_ECHO_CHARS = 2000  # the malformed reply shown back to the model, cut to bound the prompt


def repair_messages(reply: str, error: str) -> list[dict[str, str]]:
    """The turns that follow the original request on a retry after a malformed reply."""
    return [{"role": "assistant", "content": reply[:REPAIR_ECHO_CHARS]},
            {"role": "user", "content": REPAIR_INSTRUCTION.format(error=error[:300])}]


class _Retryable(Exception):
    def __init__(self, message: str, usage: Usage | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.usage = usage or Usage()
        self.retry_after = retry_after


def _status_text(exc: openai.APIStatusError, secret: str | None) -> str:
    return f"HTTP {exc.status_code}: {redact(str(exc), secret)[:200]}"  # redact, then cut


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """Seconds a 429/503 asks to wait: `retry-after-ms`, else `Retry-After` as seconds or as an HTTP date."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after", "").strip()
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None
