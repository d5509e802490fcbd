"""The recorded real-model demo: the local model's replies to the demo's curated questions, kept as a small text
file (data/recorded-local.json) and replayed with no server and no model.

A recording holds, per run (question, backend preset, configuration), what came out (answers, verdicts, reply
patterns, tokens and seconds per stage as measured when it was recorded), and for every model request its reply
keyed by the response-cache key (model, URL, role, prompt hash, decoding parameters: `tmem.models.llm.cache`). The
`recorded` presets build the `local` roles over a `RecordedCache`: replay-only, in memory, so the pipeline runs
as it does today and every model call is answered from the recording. When the pipeline changed since (another
forest, another prompt), a request has no recorded reply: `StaleRecording` says so and names the command that
re-records (`make record-demo`); nothing is sent anywhere.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tmem.models.llm.cache import CachedReply, ReplayMissError, ResponseCache
from tmem.models.reply_patterns import trace_patterns

RECORDING = Path(__file__).resolve().parents[3] / "data" / "recorded-local.json"
RECORD_COMMAND = "make record-demo"
FORMAT = 1
# The demo questions recorded: one per question type (the curated knowledge-update question first) with the
# hybrid preset, and the curated question with all four roles local on a smaller anchor set (k = 8) so that the
# relation role's calls stay within minutes on two cores.
HYBRID_QUESTIONS = ("knowledge_update_1", "multi_hop_1", "temporal_1", "user_implicit_1", "term_ambiguity_1",
                    "abstention_1")
ALL_LOCAL_RUNS = (("knowledge_update_1", "retrieval.k=8"),)
SCOPE = "Technology"


class StaleRecording(ReplayMissError):
    """A request the recording has no reply for: the pipeline changed since it was recorded, or the question was
    never recorded."""


@dataclass
class Recording:
    model: str = ""
    title: str = ""
    recorded_at: str = ""
    command: str = RECORD_COMMAND
    code: str = ""  # the commit the recording was made on, when known
    server: dict[str, Any] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    responses: dict[str, dict[str, Any]] = field(default_factory=dict)  # cache key -> reply and its tokens

    @property
    def label(self) -> str:
        return f"recorded: {self.title or self.model}, {self.recorded_at[:10]}"

    def to_json(self) -> str:
        body = {"format": FORMAT, "about": "Replies of a packaged local model to the demo's curated questions, "
                "replayed by the 'recorded' backend presets (docs/backends.md). Regenerate: " + self.command,
                "model": self.model, "title": self.title, "recorded_at": self.recorded_at, "command": self.command,
                "code": self.code, "server": self.server, "runs": self.runs,
                "responses": dict(sorted(self.responses.items()))}
        return json.dumps(body, ensure_ascii=False, indent=1) + "\n"


def load_recording(path: str | Path | None = None) -> Recording:
    """The recording at `path` (default data/recorded-local.json); ValueError naming the file and field when it
    is missing or malformed."""
    path = Path(path or RECORDING)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no recorded demo here; record one with {RECORD_COMMAND}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: field 'format' is {data.get('format') if isinstance(data, dict) else None!r}, "
                         f"expected {FORMAT}; re-record with {RECORD_COMMAND}")
    for name, kind in (("runs", list), ("responses", dict)):
        if not isinstance(data.get(name), kind):
            raise ValueError(f"{path}: field {name!r} must be a {kind.__name__}")
    for key, reply in data["responses"].items():
        if not isinstance(reply, dict) or not isinstance(reply.get("text"), str):
            raise ValueError(f"{path}: responses[{key[:12]}…] has no 'text' string")
    return Recording(**{k: data.get(k, Recording.__dataclass_fields__[k].default) for k in
                        ("model", "title", "recorded_at", "command", "code", "server")},
                     runs=data["runs"], responses=data["responses"])


class RecordedCache(ResponseCache):
    """Replay-only cache over a recording, in memory: writes nothing, sends nothing."""

    def __init__(self, recording: Recording):
        super().__init__(None, "replay")
        self.recording = recording

    def get(self, key: str, describe: str) -> CachedReply | None:
        reply = self.recording.responses.get(key)
        with self._lock:
            self.hits += reply is not None
            self.misses += reply is None
        if reply is None:
            raise StaleRecording(f"the recorded demo ({self.recording.label}) has no reply for {describe}: the "
                                 f"pipeline changed since it was recorded, or this question/configuration was not "
                                 f"recorded (recorded runs: {', '.join(run_names(self.recording))}). Re-record "
                                 f"with: {self.recording.command}")
        return CachedReply(reply["text"], int(reply.get("prompt_tokens", 0)), int(reply.get("completion_tokens", 0)))


def run_names(recording: Recording) -> list[str]:
    return [f"{r['question']} ({r['preset']}{', ' + r['overrides'] if r.get('overrides') else ''})"
            for r in recording.runs]


class CapturingCache(ResponseCache):
    """The store's cache (mode on) that also keeps every reply it serves or stores, for a recording: replies
    already cached by an earlier (interrupted) recording, or held by the previous recording file for the same
    prompt (`previous`, keyed alike), are not asked for again, so a re-recording after a pipeline change asks the
    model only for the prompts that changed."""

    def __init__(self, store, previous: dict[str, dict[str, Any]] | None = None):
        super().__init__(store, "on")
        self.captured: dict[str, dict[str, Any]] = {}
        self._roles: dict[str, str] = {}
        self.previous = dict(previous or {})
        self.reused = 0

    def get(self, key: str, describe: str) -> CachedReply | None:
        hit = super().get(key, describe)
        if hit is None and key in self.previous:
            old = self.previous[key]
            hit = CachedReply(old["text"], int(old.get("prompt_tokens", 0)), int(old.get("completion_tokens", 0)))
            with self._lock:
                self.reused += 1
        if hit is not None:
            self._keep(key, describe.split(" / ", 1)[0], hit)
        return hit

    def put(self, key: str, role: str, model: str, prompt_hash: str, params: str, reply: CachedReply,
            usage_source: str) -> None:
        super().put(key, role, model, prompt_hash, params, reply, usage_source)
        self._keep(key, role, reply)

    def _keep(self, key: str, role: str, reply: CachedReply) -> None:
        with self._lock:
            self.captured[key] = {"role": role, "text": reply.text, "prompt_tokens": reply.prompt_tokens,
                                  "completion_tokens": reply.completion_tokens}


def stage_figures(trace) -> dict[str, dict[str, Any]]:
    """Tokens, calls and seconds of each stage that called a language model (what the recording reports)."""
    out = {}
    for s in trace.stages:
        if s.usage.calls or s.usage.cached_calls:
            out[s.name] = {"backend": s.backend.split(" [", 1)[0], "calls": s.usage.calls + s.usage.cached_calls,
                           "prompt_tokens": s.usage.prompt_tokens, "completion_tokens": s.usage.completion_tokens,
                           "seconds": round(s.seconds, 1)}
    return out


def run_record(trace, preset: str, overrides: str, figures: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"corpus": trace.corpus, "scope": trace.question.scope, "question": trace.question.id,
            "type": trace.question.type, "text": trace.question.text, "preset": preset, "variant": trace.variant,
            "overrides": overrides,
            "answers": {a.presentation: a.text for a in trace.answers},
            "verdicts": {v.presentation: v.correct for v in trace.verdicts},
            "evidence": len(trace.evidence_ids),
            "edges": {k: sum(e.relation == k for e in trace.edges) for k in ("UPDATE", "EXPAND")},
            "patterns": trace_patterns(trace), "stages": figures}


def now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def is_recorded(roles) -> bool:
    """True when the language-model roles of `roles` replay the recording (and at least one does)."""
    backends = [getattr(roles, r).backend for r in ("evidence_utility", "relation", "answer", "judge")
                if not getattr(roles, r).offline]
    return bool(backends) and all(b.startswith("recorded:") for b in backends)
