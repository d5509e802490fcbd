"""What the pipeline's stages (tmem.pipeline.stages) hand each other: one typed result per stage, the `StageOutput` that
carries it with the stage's trace and record extras, and `Earlier`, the results a question has so far, which the
next stage reads and from which `Earlier.trace_fields` folds the Trace's fields. A record stores a result as its
non-empty Trace fields in JSON form (`StageOutput.to_record`), and `Earlier.from_records` reads them back.
"""
from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tmem.jsonable import from_jsonable, to_jsonable
from tmem.types import (
    Anchor,
    Answer,
    Cluster,
    Cut,
    Edge,
    ForestNode,
    Memory,
    ParentDecision,
    Selection,
    Span,
    StageTrace,
    Trace,
    Verdict,
    Window,
)

_TRACE_HINTS = typing.get_type_hints(Trace)


# What each stage adds to the Trace, by name; a field left None is one this branch of the stage does not produce
# (e.g. spans when compression only truncates), so the Trace keeps its default or an earlier stage's value.
@dataclass(frozen=True)
class Seeds:
    anchors: tuple[Anchor, ...]
    evidence_ids: tuple[str, ...]
    query: str


@dataclass(frozen=True)
class Discovered:
    clusters: tuple[Cluster, ...]
    windows: tuple[Window, ...]
    selections: tuple[Selection, ...]
    evidence_ids: tuple[str, ...]


@dataclass(frozen=True)
class Structured:
    decisions: tuple[ParentDecision, ...]
    edges: tuple[Edge, ...]
    nodes: tuple[ForestNode, ...]


@dataclass(frozen=True)
class Compressed:
    tokens_before_compression: int
    tokens_after_compression: int
    context: str
    spans: tuple[Span, ...] | None = None  # compress mode only
    budget_met: bool | None = None  # compress mode only
    cuts: tuple[Cut, ...] = ()  # the forest's lines the cut at B shortened or removed


@dataclass(frozen=True)
class Answered:
    flat_context: str
    answers: tuple[Answer, ...]
    cuts: tuple[Cut, ...] = ()  # the forest's cuts (from compression) and the flat list's
    context: str | None = None  # without structuring the flat context is the context
    tokens_before_compression: int | None = None
    tokens_after_compression: int | None = None


@dataclass(frozen=True)
class Judged:
    verdicts: tuple[Verdict, ...]


@dataclass(frozen=True)
class Recalled:
    """A memory system's context for the question (tmem.baselines): its items, the source messages they trace to
    (as anchors, in the system's order, and as evidence), the context cut at B and what the cut removed."""

    memories: tuple[Memory, ...]
    anchors: tuple[Anchor, ...]
    evidence_ids: tuple[str, ...]
    context: str
    flat_context: str
    tokens_before_compression: int
    tokens_after_compression: int
    cuts: tuple[Cut, ...] = ()


StageResult = Seeds | Discovered | Structured | Compressed | Answered | Judged | Recalled
RESULT_TYPES: dict[str, type] = {"seed_retrieval": Seeds, "discovery": Discovered, "structuring": Structured,
                                 "compression": Compressed, "answer": Answered, "judge": Judged, "memory": Recalled}
R = TypeVar("R")


def trace_fields_of(result: StageResult) -> dict[str, Any]:
    """The Trace fields a result sets (its fields that are not None)."""
    return {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if getattr(result, f.name) is not None}


@dataclass
class StageOutput:
    result: StageResult
    trace: StageTrace
    selected_ids: tuple[str, ...] = ()
    prompt_hashes: dict[str, str] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def fields(self) -> dict[str, Any]:
        """The Trace fields the stage produced (what a record stores)."""
        return trace_fields_of(self.result)

    @property
    def failed(self) -> bool:
        """A role failed and a fallback was used (notes about ignored invalid output do not count)."""
        return any(e.fallback != "ignored" for e in self.trace.errors)

    def to_record(self) -> dict:
        return {"fields": to_jsonable(self.fields), "stage": to_jsonable(self.trace), "extras": self.extras}


def decode_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """Trace fields from their JSON form (`StageOutput.to_record()["fields"]`)."""
    return {k: from_jsonable(_TRACE_HINTS[k], v) for k, v in data.items()}


def decode_result(stage: str, data: Mapping[str, Any]) -> StageResult:
    """A stage's typed result from its record form (`StageOutput.to_record()["fields"]`)."""
    return RESULT_TYPES[stage](**decode_fields(data))


def decode_stage(data: Mapping[str, Any]) -> StageTrace:
    return from_jsonable(StageTrace, data)


@dataclass(frozen=True)
class Earlier:
    """The results of the stages one question has been through, in plan order: what the next stage reads."""

    results: tuple[StageResult, ...] = ()

    @classmethod
    def of(cls, *done: StageOutput | StageResult) -> Earlier:
        return cls(tuple(d.result if isinstance(d, StageOutput) else d for d in done))

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> Earlier:
        """From a question's batch records (tmem.evaluation.batch.records), in plan order."""
        return cls(tuple(decode_result(r["stage"], r["outputs"]["fields"]) for r in records))

    def then(self, done: StageOutput | StageResult) -> Earlier:
        return Earlier(self.results + Earlier.of(done).results)

    def latest(self, kind: type[R]) -> R | None:
        return next((r for r in reversed(self.results) if isinstance(r, kind)), None)

    @property
    def seeds(self) -> Seeds:
        seeds = self.latest(Seeds)
        if seeds is None:
            raise ValueError("no seed retrieval result: it is every method's first stage")
        return seeds

    @property
    def evidence_ids(self) -> tuple[str, ...]:
        """The evidence so far: discovery's when it ran, else the seeds."""
        return (self.latest(Discovered) or self.seeds).evidence_ids

    @property
    def nodes(self) -> tuple[ForestNode, ...]:
        structured = self.latest(Structured)
        return structured.nodes if structured else ()

    @property
    def edges(self) -> tuple[Edge, ...]:
        structured = self.latest(Structured)
        return structured.edges if structured else ()

    @property
    def spans(self) -> tuple[Span, ...]:
        compressed = self.latest(Compressed)
        return (compressed.spans or ()) if compressed else ()

    @property
    def context(self) -> str:
        """The compressed forest's context ("" before compression)."""
        compressed = self.latest(Compressed)
        return compressed.context if compressed else ""

    @property
    def answers(self) -> tuple[Answer, ...]:
        answered = self.latest(Answered)
        return answered.answers if answered else ()

    def trace_fields(self) -> dict[str, Any]:
        """The Trace's stage fields: each result's non-empty fields, a later stage's over an earlier one's."""
        fields: dict[str, Any] = {}
        for result in self.results:
            fields.update(trace_fields_of(result))
        return fields
