"""Common representation (paper Sec. 3, App. A.3 Table 4) and the records every stage leaves in a trace.

All records are frozen dataclasses so that a trace can be serialized to JSON and read back losslessly
(`to_json` / `from_json`) and so that the explorer only ever *reads* what the pipeline did.
Metadata that a source does not provide is left empty (None) rather than generated.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from tmem.config import VARIANTS
from tmem.jsonable import from_jsonable, to_jsonable

# Evidence-utility labels (App. J) and relation labels (Sec. 4.3 Eq. 5, App. K).
KEY, SUPPORT, IRRELEVANT = "KEY", "SUPPORT", "IRRELEVANT"
UPDATE, EXPAND, NONE, ROOT, RELATED = "UPDATE", "EXPAND", "NONE", "ROOT", "RELATED"


@dataclass(frozen=True)
class Message:
    """m_i = (x_i, t_i, z_i): text, timestamp and conversation metadata z_i."""

    id: str
    scope: str
    text: str
    timestamp: datetime
    author: str | None = None
    role: str | None = None
    channel: str | None = None
    topic: str | None = None
    phase: str | None = None
    stage: int | None = None
    phase_order: int | None = None
    phase_progress: float | None = None
    reply_to: str | None = None


@dataclass(frozen=True)
class Question:
    """q = (x_q, u). Deliberately carries no gold answer or evidence: those live in `Gold`."""

    id: str
    scope: str
    text: str
    asking_user: str | None = None
    type: str | None = None


@dataclass(frozen=True)
class Gold:
    """Evaluation-only reference: answer, evidence units (each a tuple of acceptable message ids, App. A.4 Eq. 9),
    and, where a decision changed, the superseded earlier state."""

    question_id: str
    answer: str | None = None
    evidence: tuple[tuple[str, ...], ...] = ()
    superseded: str | None = None

    @property
    def evidence_ids(self) -> frozenset[str]:
        return frozenset(mid for unit in self.evidence for mid in unit)


class CorpusError(ValueError):
    """Bad input: the message names the file, the line or record, and the field."""


@dataclass(frozen=True)
class CorpusData:
    """A corpus in the common representation, ready for a transactional load (`tmem.store.Store.replace_corpus`)."""

    messages: Sequence[Message]
    questions: Sequence[Question] = ()
    golds: Sequence[tuple[str, Gold]] = ()  # (scope, gold)
    links: Sequence[tuple] = ()  # (scope, child_id, parent_id[, relation]); parent = child: a gold root


_EPOCH = datetime(1970, 1, 1)


def to_seconds(timestamp: datetime) -> float:
    """Naive timestamps are read as UTC, independent of the machine's time zone."""
    return (timestamp - _EPOCH).total_seconds()


def from_seconds(seconds: float) -> datetime:
    return _EPOCH + timedelta(seconds=seconds)


# ----------------------------------------------------------------------------------------------- stage records
@dataclass(frozen=True)
class Anchor:
    """One of the top-k seed messages R_k(q) of metadata-expanded BM25."""

    message_id: str
    score: float
    rank: int


@dataclass(frozen=True)
class Cluster:
    """A DBSCAN cluster C_j of one topic's anchor timestamps with its seed density rho (Eq. 2)."""

    cluster_id: int
    topic: str | None
    member_ids: tuple[str, ...]
    start: datetime
    end: datetime
    span_hours: float
    density: float
    accepted: bool
    threshold: float | None = None  # the rate rho had to exceed (mu, or App. F.1's mu* against the background)
    background: float | None = None  # the background anchor rate of the cluster's topic or channel
    channel: str | None = None  # locality 'channel': the channel the cluster's window stays inside
    unit: str = "hour"  # the clock of span, density and threshold: "hour" or "message"


@dataclass(frozen=True)
class Candidate:
    """A message inside a window, ranked by embedding similarity to the query."""

    message_id: str
    similarity: float
    rank: int


@dataclass(frozen=True)
class Window:
    """A padded candidate evidence interval of one accepted cluster, with its ranked candidates (top-n)."""

    window_id: int
    cluster_id: int
    topic: str | None
    start: datetime
    end: datetime
    n_messages: int
    candidates: tuple[Candidate, ...]
    channel: str | None = None  # locality 'channel': the window's channel


@dataclass(frozen=True)
class Selection:
    """Evidence-utility verdict on one candidate (App. J)."""

    message_id: str
    window_id: int
    label: str
    reason: str
    score: float = 0.0


@dataclass(frozen=True)
class RelationChoice:
    """The relation role's verdict for one (parent candidate, child) pair (Eq. 5)."""

    parent_id: str
    relation: str
    confidence: float
    reason: str = ""


@dataclass(frozen=True)
class ParentDecision:
    """Everything known about how one child got (or did not get) its single parent."""

    child_id: str
    candidate_ids: tuple[str, ...]
    choices: tuple[RelationChoice, ...]
    parent_id: str | None
    relation: str
    confidence: float
    note: str = ""


@dataclass(frozen=True)
class Edge:
    parent_id: str
    child_id: str
    relation: str
    confidence: float


@dataclass(frozen=True)
class Span:
    """A sentence/clause of a node's text with its compression scores (Eq. 6-7) and fate."""

    message_id: str
    index: int
    text: str
    tokens: int
    gain: float
    density: float
    protected: str | None
    kept: bool


@dataclass(frozen=True)
class Cut:
    """A message whose line the cut at B (tmem.pipeline.compression.budget_cut) shortened or removed from an answer
    context: the text a variant without compression, a flat list, or a forest whose protected spans exceed B loses
    after (or instead of) span compression, whose omissions are the Spans with kept=False."""

    message_id: str
    context: str  # "forest" or "flat": the answer context that lost it
    kept_chars: int  # characters of its line left in the context (0: the whole line is gone)
    line_chars: int  # characters of its line before the cut
    reason: str  # why the context was cut, e.g. "compression.mode = truncate: cut at B = 1500 tokens"


@dataclass(frozen=True)
class ForestNode:
    """One row of the linearized forest L(F_q) (Eq. 8): (i, pi_i, r_i, d_i, t_i, a_i, x_i)."""

    index: int
    parent_index: int
    relation: str
    depth: int
    tree: int
    message_id: str
    timestamp: datetime
    author: str | None
    text: str


@dataclass(frozen=True)
class Usage:
    """Tokens spent by model calls; `source` says where the numbers come from ("server", "counted:<counter>",
    "cache", "offline" for roles that make no model call, "none")."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cached_calls: int = 0
    source: str = "none"

    def __add__(self, other: Usage) -> Usage:
        sources = [s for s in dict.fromkeys(self.source.split("+") + other.source.split("+")) if s != "none"]
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                     self.calls + other.calls, self.cached_calls + other.cached_calls, "+".join(sources) or "none")


@dataclass(frozen=True)
class StageError:
    stage: str
    message: str
    fallback: str = ""


@dataclass(frozen=True)
class StageTrace:
    name: str
    seconds: float
    counts: dict[str, float]
    usage: Usage
    backend: str
    offline: bool
    errors: tuple[StageError, ...] = ()


@dataclass(frozen=True)
class Memory:
    """An item of a memory system's context (tmem.baselines): a message, or a memory it derived, with its sources."""

    rank: int
    text: str
    source_ids: tuple[str, ...]
    kind: str  # the system's own unit: "passage", "note", "fact", "summary", "session turn", ...
    derived: bool  # True: text the system wrote, not a message
    score: float | None = None  # the system's own retrieval score
    in_context: bool = True  # False: the cut at B shortened or removed it
    meta: str = ""  # what the system shows before the text (time, author, channel)


@dataclass(frozen=True)
class Answer:
    presentation: str  # "forest" or "flat"
    text: str
    backend: str
    offline: bool
    prompt_hash: str
    context_tokens: int
    reason: str = ""


@dataclass(frozen=True)
class Verdict:
    presentation: str
    correct: bool
    raw: str
    backend: str
    offline: bool


TRACE_NAME = ("question", "variant", "config_hash", "corpus")  # the fields a Trace cannot be built without


@dataclass(frozen=True)
class Trace:
    """What `run_question` did, stage by stage; serializes to JSON and back losslessly."""

    question: Question
    variant: str
    config_hash: str
    corpus: str
    anchors: tuple[Anchor, ...] = ()
    clusters: tuple[Cluster, ...] = ()
    windows: tuple[Window, ...] = ()
    selections: tuple[Selection, ...] = ()
    evidence_ids: tuple[str, ...] = ()
    decisions: tuple[ParentDecision, ...] = ()
    edges: tuple[Edge, ...] = ()
    nodes: tuple[ForestNode, ...] = ()
    spans: tuple[Span, ...] = ()
    cuts: tuple[Cut, ...] | None = None  # the cuts at B of both answer contexts; None: a trace from before they
    # were recorded (tmem.analysis.funnel then reads them off the stored contexts)
    tokens_before_compression: int = 0
    tokens_after_compression: int = 0
    budget_met: bool = True
    context: str = ""
    flat_context: str = ""
    answers: tuple[Answer, ...] = ()
    verdicts: tuple[Verdict, ...] = ()
    stages: tuple[StageTrace, ...] = ()
    prompt_hashes: dict[str, str] = field(default_factory=dict)
    token_counter: str = ""
    embedder: str = ""
    config: dict[str, Any] = field(default_factory=dict)  # the values behind config_hash (JSON form)
    query: str = ""  # the BM25 query as tokenized for seed retrieval (asking user + question)
    memories: tuple[Memory, ...] = ()  # a baseline's context items (tmem.baselines); empty for T-Mem's variants

    def answer(self, presentation: str) -> Answer | None:
        return next((a for a in self.answers if a.presentation == presentation), None)

    def verdict(self, presentation: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.presentation == presentation), None)

    def stage(self, name: str) -> StageTrace | None:
        return next((s for s in self.stages if s.name == name), None)

    @property
    def errors(self) -> tuple[StageError, ...]:
        return tuple(e for s in self.stages for e in s.errors)

    def to_json(self) -> str:
        return json.dumps(to_jsonable(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, fields: Sequence[str] | None = None) -> Trace:
        """The stored trace; with `fields`, only those (and TRACE_NAME) decoded, every other field at its default
        (empty): for a view or a re-scoring that reads a few fields of many traces (rebuilding every span and node
        of the demo batch's 192 traces was most of a page's first visit), never for one that shows or stores it."""
        data = json.loads(text)
        if fields is not None:
            data = {k: data[k] for k in (*TRACE_NAME, *fields) if k in data}
        return from_jsonable(cls, data)


@dataclass(frozen=True)
class TraceRef:
    """Which stored trace of a question to show, besides the question itself: the stored variant (a preset of
    tmem.config.VARIANTS or a batch baseline such as `embedding`), its configuration hash and the backend label
    (`Store.load_trace`'s key). Result rows carry all three; a row's variant column may be a display label such as
    "full@879bec" (tmem.analysis.results.label_variants), so the name is cut at "@". Backend labels name backends,
    models and public endpoint URLs, never keys, so a ref may travel in a URL."""

    variant: str
    config_hash: str
    backend: str

    PARAMS: ClassVar[tuple[str, str, str]] = ("trace_variant", "trace_config", "trace_backend")

    @classmethod
    def from_row(cls, row: Mapping[str, Any], side: str = "") -> TraceRef | None:
        """The ref of one result row (`side` picks suffixed columns of a Compare row, e.g. " (baseline)")."""
        variant = str(row.get("variant" + side) or row.get("variant") or "").split("@")[0]
        config, backend = row.get("config_hash" + side), row.get("backend" + side)
        if not variant or not isinstance(config, str) or not isinstance(backend, str) or not config or not backend:
            return None
        return cls(variant, config, backend)

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> TraceRef | None:
        """The ref named by query parameters, or None unless all three are given."""
        values = [params.get(name) or "" for name in cls.PARAMS]
        return cls(*values) if all(values) else None

    def to_params(self) -> dict[str, str]:
        return dict(zip(self.PARAMS, (self.variant, self.config_hash, self.backend)))

    @property
    def is_preset(self) -> bool:
        """Whether the app's sidebar can select this variant (batch baselines such as `embedding` it cannot)."""
        return self.variant in VARIANTS
