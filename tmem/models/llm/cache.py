"""Response cache for model calls, kept in DuckDB (paper App. D.2: cached stages so that a transient failure or a
re-run repeats no model call).

A cached reply is keyed by (base URL, model, role, prompt hash, request parameters): the same question asked again
with the same prompts and decoding settings on the same server costs nothing and works offline, while another
server behind the same model name (llama.cpp answers to any name, e.g. `local`) is a miss. The URL enters the key
without credentials or query string; the API key never enters it and is never stored. Modes: "on" (read and
write), "off" (neither), "replay" (read only; a miss raises `ReplayMissError` instead of calling the server).
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any

from tmem.prompts import text_hash


class ReplayMissError(KeyError):
    """Replay-only mode found no cached reply for a call; nothing was sent to any server."""


@dataclass(frozen=True)
class CachedReply:
    text: str
    prompt_tokens: int
    completion_tokens: int


def request_key(model: str, role: str, system: str, user: str, params: dict[str, Any],
                base_url: str) -> tuple[str, str, str]:
    """(cache key, prompt hash, canonical parameters JSON) of one chat request to `base_url` (the public URL:
    `tmem.models.llm.openai_backend.public_url`, no credentials)."""
    prompt = text_hash(system + "\n\n" + user)
    blob = json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)
    key = hashlib.sha256(json.dumps([base_url, model, role, prompt, blob]).encode("utf-8")).hexdigest()
    return key, prompt, blob


class ResponseCache:
    """Thread-safe wrapper over the store's `model_responses` table; counts hits and misses."""

    def __init__(self, store, mode: str = "on"):
        if mode not in ("on", "off", "replay"):
            raise ValueError(f"unknown cache mode {mode!r}; use on, off or replay")
        self.store = store
        self.mode = mode
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def get(self, key: str, describe: str) -> CachedReply | None:
        """The cached reply, None on a miss (mode "on"/"off"), or ReplayMissError in replay mode."""
        row = self.store.cached_response(key) if self.mode != "off" and self.store is not None else None
        with self._lock:
            if row is None:
                self.misses += 1
            else:
                self.hits += 1
        if row is None and self.mode == "replay":
            raise ReplayMissError(f"replay-only mode: no cached reply for {describe}; nothing was sent. Run once "
                                  f"with --cache on (TMEM_CACHE=on) to record it.")
        return CachedReply(*row) if row is not None else None

    def put(self, key: str, role: str, model: str, prompt_hash: str, params: str, reply: CachedReply,
            usage_source: str) -> None:
        if self.mode == "on" and self.store is not None:
            self.store.save_response(key, role, model, prompt_hash, params, reply.text, reply.prompt_tokens,
                                     reply.completion_tokens, usage_source)

    def stats(self) -> dict[str, float]:
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "hit_rate": round(self.hit_rate, 4)}


def past_completions(store, role: str, model: str) -> float | None:
    """The mean completion tokens of the replies cached for this role and model (None: none cached yet), what a
    cost estimate expects the next reply to take."""
    row = store.cursor().execute("SELECT avg(completion_tokens), count(*) FROM model_responses WHERE role = ? AND "
                                 "model = ? AND completion_tokens IS NOT NULL", [role, model]).fetchone()
    return float(row[0]) if row and row[1] else None
