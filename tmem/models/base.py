"""Protocols of the four model roles and the embedder, and the records they return.

A role returns its payload together with the usage it spent, the backend that produced it, whether that backend
is an offline stand-in, and any errors (with the fallback taken). Stages never look at which backend they hold.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tmem.prompts import Prompt
from tmem.types import Message, Question, RelationChoice, Selection, StageError, Usage

if TYPE_CHECKING:
    from tmem.pipeline.scope import Scope


@dataclass(frozen=True)
class RoleResult:
    usage: Usage = Usage()
    errors: tuple[StageError, ...] = ()


@dataclass(frozen=True)
class SelectionResult(RoleResult):
    selections: tuple[Selection, ...] = ()


@dataclass(frozen=True)
class RelationResult(RoleResult):
    choices: tuple[RelationChoice, ...] = ()


@dataclass(frozen=True)
class AnswerResult(RoleResult):
    text: str = ""
    reason: str = ""


@dataclass(frozen=True)
class JudgeResult(RoleResult):
    correct: bool = False
    raw: str = ""


@dataclass(frozen=True)
class AnswerEvidence:
    """What the answer role may use besides the prompt: the evidence messages in presentation order, and for
    forest presentation each message's parent and relation (the offline answerer reads UPDATE chains)."""

    messages: tuple[Message, ...]
    parents: dict[str, tuple[str, str]] = field(default_factory=dict)  # child_id -> (parent_id, relation)
    texts: dict[str, str] = field(default_factory=dict)  # message_id -> retained (compressed) text


class Role(Protocol):
    backend: str  # e.g. "offline:lexical-utility" or "openai:gpt-4o-mini@http://..."
    offline: bool  # True for a deterministic stand-in that is not a language model


class EvidenceUtilityRole(Role, Protocol):
    def select(self, question: Question, window_id: int, candidates: Sequence[Message],
               similarities: Sequence[float], scope: Scope,
               anchor_ids: frozenset[str] = frozenset()) -> SelectionResult:
        """Label candidates of one window KEY / SUPPORT / IRRELEVANT (App. J), one call per window.
        Candidates include the window's anchors (`anchor_ids`), so an update can be judged against the state it
        changes; anchors are in R'(q) whatever their label."""


class RelationRole(Role, Protocol):
    def label_pairs(self, question: Question, child: Message, candidates: Sequence[Message],
                    scope: Scope) -> RelationResult:
        """Label each eligible (parent, child) pair UPDATE / EXPAND / NONE with a confidence (Eq. 5, App. K);
        one call per child over all its candidates."""


class AnswerRole(Role, Protocol):
    def answer(self, question: Question, prompt: Prompt, evidence: AnswerEvidence, scope: Scope) -> AnswerResult:
        ...


class JudgeRole(Role, Protocol):
    def judge(self, question: Question, gold_answer: str, agent_answer: str, prompt: Prompt) -> JudgeResult:
        ...


class Embedder(Protocol):
    name: str
    offline: bool

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        """L2-normalised vectors, one row per text; kind is "passage" or "query"."""


class TokenCounter(Protocol):
    name: str
    exact: bool  # False for an approximation (announced in traces and the UI)

    def count(self, text: str) -> int:
        ...


@dataclass(frozen=True)
class Roles:
    evidence_utility: EvidenceUtilityRole
    relation: RelationRole
    answer: AnswerRole
    judge: JudgeRole
    embedder: Embedder
    tokens: TokenCounter

    def describe(self) -> dict[str, str]:
        """Which backend and model each role uses (printed by the CLI, shown on every page)."""
        return {
            "evidence_utility": self.evidence_utility.backend,
            "relation": self.relation.backend,
            "answer": self.answer.backend,
            "judge": self.judge.backend,
            "embedder": self.embedder.name,
            "token_counter": self.tokens.name,
        }

    @property
    def label(self) -> str:
        """A stable short key for caches and stored traces."""
        return "|".join(self.describe().values())
