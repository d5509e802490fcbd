"""A provider's batch API (OpenAI's Batch API, also offered by other OpenAI-compatible servers): upload a JSONL file
of chat requests (`/v1/files`, purpose "batch"), create a batch over it (`/v1/batches`, 24 h window), poll it, and
download its output and error files.

Each input line is `{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`, the body being exactly
the request the online client sends (tmem.models.llm.openai_backend.ChatClient._kwargs). Each output line is
`{"custom_id", "response": {"status_code", "body"}, "error"}`. Every text that comes back from the server (the
output and error files, error messages) is scrubbed of the API key before anything reads or stores it, as online
replies are. Transient failures of these small requests are retried with backoff.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import openai

from tmem.models.llm.concurrency import backoff_delays
from tmem.models.llm.openai_backend import UNREACHABLE, Endpoint, redact

CHAT_URL = "/v1/chat/completions"
MAX_LINES = 50_000  # OpenAI: at most 50,000 requests and 200 MB per batch file
MAX_BYTES = 190_000_000
TERMINAL = ("completed", "failed", "expired", "cancelled")


@dataclass(frozen=True)
class BatchStatus:
    id: str
    status: str
    total: int
    completed: int
    failed: int
    output_file_id: str | None
    error_file_id: str | None
    errors: str  # the batch's own errors (a file that failed validation), key scrubbed

    @property
    def done(self) -> bool:
        return self.status in TERMINAL


@dataclass(frozen=True)
class LineResult:
    """One request's outcome from an output or error file: the reply text and usage, or why it failed."""

    text: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None


def request_line(custom_id: str, body: dict) -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": CHAT_URL, "body": body},
                      ensure_ascii=False, separators=(",", ":"))


class BatchClient:
    """The batch endpoints of one server, over its endpoint's client (the key stays in memory)."""

    def __init__(self, endpoint: Endpoint, retries: int = 4, sleep: Callable[[float], None] = time.sleep):
        self.endpoint, self.retries, self.sleep = endpoint, retries, sleep

    def _call(self, fn: Callable, *args, **kwargs):
        delays = backoff_delays(self.retries)
        while True:
            try:
                return fn(*args, **kwargs)
            except (*UNREACHABLE, openai.InternalServerError, openai.RateLimitError) as exc:
                delay = next(delays, None)
                if delay is None:
                    raise RuntimeError(self.scrub(f"{self.endpoint.url}: batch API request failed: "
                                                  f"{type(exc).__name__}: {exc}")[:400]) from None
                self.sleep(delay)

    def scrub(self, text: str) -> str:
        return redact(text or "", self.endpoint.secret)

    def find_file(self, filename: str) -> str | None:
        """The id of an uploaded batch file of that name (a restart after the upload reuses it)."""
        recent = self._call(lambda: self.endpoint.client.files.list(purpose="batch", limit=100, order="desc").data)
        for f in recent:  # the newest page only: a restart looks for the file it uploaded moments before
            if getattr(f, "filename", None) == filename:
                return f.id
        return None

    def upload(self, filename: str, data: bytes) -> str:
        return self._call(self.endpoint.client.files.create, file=(filename, data, "application/jsonl"),
                          purpose="batch").id

    def find_batch(self, tag: str) -> str | None:
        """The id of a batch created with metadata tmem_part = `tag` (a restart after the create reuses it)."""
        for b in self._call(lambda: self.endpoint.client.batches.list(limit=100).data):  # the newest page
            if (getattr(b, "metadata", None) or {}).get("tmem_part") == tag:
                return b.id
        return None

    def create(self, input_file_id: str, tag: str) -> str:
        return self._call(self.endpoint.client.batches.create, input_file_id=input_file_id, endpoint=CHAT_URL,
                          completion_window="24h", metadata={"tmem_part": tag}).id

    def status(self, batch_id: str) -> BatchStatus:
        b = self._call(self.endpoint.client.batches.retrieve, batch_id)
        counts = getattr(b, "request_counts", None)
        errors = "; ".join(f"{getattr(e, 'code', '')}: {getattr(e, 'message', '')}"
                           for e in (getattr(getattr(b, "errors", None), "data", None) or []))
        return BatchStatus(b.id, b.status, getattr(counts, "total", 0) or 0, getattr(counts, "completed", 0) or 0,
                           getattr(counts, "failed", 0) or 0, getattr(b, "output_file_id", None),
                           getattr(b, "error_file_id", None), self.scrub(errors)[:500])

    def content(self, file_id: str) -> str:
        """A file's text with the key scrubbed (a server may echo request headers in its replies)."""
        return self.scrub(self._call(self.endpoint.client.files.content, file_id).text)


def parse_results(text: str) -> Iterator[tuple[str, LineResult]]:
    """(custom_id, result) for every line of an output or error file; unreadable lines are skipped."""
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
            custom_id = str(line["custom_id"])
        except (ValueError, KeyError, TypeError):
            continue
        response, error = line.get("response") or {}, line.get("error")
        body = response.get("body") if isinstance(response, dict) else None
        status = response.get("status_code", 0) if isinstance(response, dict) else 0
        if error or status != 200 or not isinstance(body, dict):
            message = error.get("message") if isinstance(error, dict) else error
            if not message and isinstance(body, dict) and isinstance(body.get("error"), dict):
                message = body["error"].get("message")
            yield custom_id, LineResult(None, error=f"HTTP {status}: {message or 'no reply'}"[:300])
            continue
        choices = body.get("choices") or [{}]
        text_ = ((choices[0] or {}).get("message") or {}).get("content") or ""
        usage = body.get("usage") or {}
        if not text_.strip():
            yield custom_id, LineResult(None, error="empty reply")
            continue
        yield custom_id, LineResult(text_, int(usage.get("prompt_tokens") or 0),
                                    int(usage.get("completion_tokens") or 0))
