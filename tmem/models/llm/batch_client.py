"""A provider's batch API (OpenAI's Batch API, also offered by other OpenAI-compatible servers): upload a JSONL file
of chat requests (`/v1/files`, purpose "batch"), create a batch over it (`/v1/batches`, 24 h window), poll it, and
download its output and error files.

Each input line is `{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`, the body being exactly
the request the online client sends (tmem.models.llm.openai_backend.ChatClient._kwargs). Each output line is
`{"custom_id", "response": {"status_code", "body"}, "error"}`. Every text that comes back from the server (the
output and error files, error messages) is scrubbed of the API key before anything reads or stores it, as online
replies are. Transient failures of these small requests are retried with backoff.

An output or error file is streamed to disk line by line (never held whole: a 300 MB file took 1.2 GB), at most
MAX_OUTPUT_BYTES of it and MAX_LINE_BYTES per line; the rest is left unread and its requests count as failed.
Every line is checked for the shape above before anything is taken from it: a line of another shape (choices as a
string, content as a dict, usage as a list, a negative or non-finite token count) is that request's failure, with
the reason, and goes into the follow-up batch like a failed line.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tmem.models.llm.budget_cap import usage_counts
from tmem.models.llm.concurrency import backoff_delays

if TYPE_CHECKING:  # the openai client loads with the first request (BatchClient._call), not with `tmem run`
    from tmem.models.llm.openai_backend import Endpoint

CHAT_URL = "/v1/chat/completions"
MAX_LINES = 50_000  # OpenAI: at most 50,000 requests and 200 MB per batch file
MAX_BYTES = 190_000_000
TERMINAL = ("completed", "failed", "expired", "cancelled")
# What is read of one output or error file: 50,000 replies of the longest output limit (8,192 tokens, ~40 KB as
# JSON) fit in 2 GB; one line is one reply, far below 4 MB.
MAX_OUTPUT_BYTES = 2 * 1024 ** 3
MAX_LINE_BYTES = 4 * 1024 ** 2
MAX_ID_CHARS = 1_000  # a custom_id tmem made: key | stage | config hash | prompt hash, far below this


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
        import openai

        from tmem.models.llm.openai_backend import UNREACHABLE

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
        from tmem.models.llm.openai_backend import redact

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

    def download(self, file_id: str, dest: Path, append: bool = False) -> int:
        """Stream a file into `dest` line by line, the key scrubbed from each line (a server may echo request
        headers), at most MAX_OUTPUT_BYTES; a line over MAX_LINE_BYTES is left out. Written to a temporary file
        first, so a download broken off (and retried) leaves nothing half-written. -> bytes written."""
        tmp = dest.with_name(dest.name + ".part")

        def fetch() -> int:
            written = 0
            with self.endpoint.client.files.with_streaming_response.content(file_id) as response, \
                    tmp.open("wb") as out:
                for line in bounded_lines(response.iter_bytes()):
                    if line is None:
                        continue  # over MAX_LINE_BYTES: not a reply; its request counts as failed
                    data = self.scrub(line.decode("utf-8", "replace")).encode("utf-8") + b"\n"
                    if written + len(data) > MAX_OUTPUT_BYTES:
                        break  # the rest is not read: its requests count as failed
                    out.write(data)
                    written += len(data)
            return written

        written = self._call(fetch)
        if append and dest.exists() and dest.stat().st_size:
            with dest.open("ab") as out, tmp.open("rb") as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            tmp.unlink()
        else:
            os.replace(tmp, dest)
        return written


def bounded_lines(chunks: Iterable[bytes], limit: int | None = None) -> Iterator[bytes | None]:
    """The lines of a byte stream without their line ends, each held at most `limit` bytes (default
    MAX_LINE_BYTES): a longer line is skipped and yields None in its place."""
    limit = MAX_LINE_BYTES if limit is None else limit
    buffer, skipping = bytearray(), False
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if skipping or len(buffer) + end - start > limit:
                yield None
            else:
                buffer += chunk[start:end]
                yield bytes(buffer)
            buffer.clear()
            skipping, start = False, end + 1
        if not skipping:
            buffer += chunk[start:]
            if len(buffer) > limit:
                buffer.clear()
                skipping = True
    if skipping:
        yield None
    elif buffer:
        yield bytes(buffer)


def read_results(path: Path, wanted: Container[str] | None = None) -> dict[str, LineResult]:
    """{custom_id: result} of a downloaded output or error file, read line by line (module docstring); with
    `wanted`, only those custom_ids are kept (the replies a batch of this run asked for)."""
    with path.open("rb") as f:
        lines = (line.decode("utf-8", "replace") for line in bounded_lines(iter(lambda: f.read(1 << 20), b""))
                 if line is not None)
        return {c: r for c, r in parse_results(lines) if wanted is None or c in wanted}


def parse_results(lines: Iterable[str]) -> Iterator[tuple[str, LineResult]]:
    """(custom_id, result) for every line of an output or error file. A line without a readable custom_id is
    skipped (its request then has no reply: failed); any other line of the wrong shape is its request's failure."""
    for raw in lines:
        try:
            line = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        custom_id = line.get("custom_id") if isinstance(line, dict) else None
        if not isinstance(custom_id, str) or not custom_id or len(custom_id) > MAX_ID_CHARS:
            continue
        try:
            yield custom_id, line_result(line)
        except _Malformed as exc:
            yield custom_id, LineResult(None, error=f"malformed batch output line: {exc}"[:300])


class _Malformed(ValueError):
    """A batch output line of another shape than the Batch API's."""


def line_result(line: dict) -> LineResult:
    """One output or error line's result: the reply text and usage, or why the request failed."""
    response, error = line.get("response"), line.get("error")
    if response is not None and not isinstance(response, dict):
        raise _Malformed(f"'response' is {_kind(response)}, not an object")
    response = response or {}
    body, status = response.get("body"), response.get("status_code", 0)
    if error or status != 200 or not isinstance(body, dict):
        message = error.get("message") if isinstance(error, dict) else error
        if not message and isinstance(body, dict) and isinstance(body.get("error"), dict):
            message = body["error"].get("message")
        return LineResult(None, error=f"HTTP {_short(status)}: {_short(message or 'no reply')}"[:300])
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _Malformed(f"'choices' is {_kind(choices)}, not a list of objects")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise _Malformed(f"'message' is {_kind(message)}, not an object")
    text = message.get("content")
    if text is not None and not isinstance(text, str):
        raise _Malformed(f"'content' is {_kind(text)}, not a string")
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise _Malformed(f"'usage' is {_kind(usage)}, not an object")
    try:
        prompt, completion = usage_counts((usage or {}).get("prompt_tokens") or 0,
                                          (usage or {}).get("completion_tokens") or 0)
    except ValueError as exc:
        raise _Malformed(str(exc)) from None
    if not (text or "").strip():
        return LineResult(None, error="empty reply")
    return LineResult(text, prompt, completion)


def _kind(value: object) -> str:
    return "missing" if value is None else f"a {type(value).__name__}"


def _short(value: object) -> str:
    return (value if isinstance(value, str) else repr(value))[:200]
