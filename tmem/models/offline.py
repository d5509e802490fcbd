"""Deterministic offline stand-ins for the four model roles, and a lexical fallback embedder.

They let the whole pipeline run with no network and no key. They are not language models, and every record
they produce says so (`offline = True`, backend names start with "offline:"). Their rules follow the paper's role
definitions: evidence utility keeps the few candidates of a window that best cover the question (KEY) and the
messages they directly reply to or that reply to them (SUPPORT, App. J); the relation role (tmem.models.relation:
the rule the run's configuration names) looks for the earlier state a message changes or elaborates (App. K); the
answerer extracts the best-matching message and, on a forest, follows its UPDATE chain to the latest state (App. I); the
judge compares content words with the gold answer.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tmem.models.base import AnswerEvidence, AnswerResult, JudgeResult, Roles, SelectionResult
from tmem.models.embedders import LexicalEmbedder  # the fallback embedder of `offline_roles`
from tmem.models.lexical_judge import lexical_verdict
from tmem.models.llm.tokens import default_token_counter
from tmem.models.relation import ConfiguredRule
from tmem.prompts import Prompt
from tmem.text import STATE_CHANGE_CUES as REVISION_CUES
from tmem.text import content_units
from tmem.types import KEY, SUPPORT, UPDATE, Message, Question, Selection

ABSTENTION = "There is no information available in the conversation to answer this question."

# Words that ask for the latest state rather than name what the state is about: "What is the *current* approval
# scope ...?" (32 of the 214 real GroupMemBench Finance questions say "current"). Matching them would prefer a
# message that happens to say "current" (often a challenge of the state) over the state itself.
STATE_INTENT = frozenset({"current", "currently", "latest", "now", "presently"})

DATE_QUESTION = re.compile(r"^\s*(when|what (date|day|time)|which (date|day))\b|\bwhat date\b", re.IGNORECASE)


def weighted_overlap(a: set[str], b: set[str], scope) -> float:
    """Share of the smaller side's IDF mass that the two unit sets have in common (0..1)."""
    if not a or not b:
        return 0.0
    shared = sum(scope.idf(u) for u in a & b)
    return shared / min(sum(scope.idf(u) for u in a), sum(scope.idf(u) for u in b))


class QueryMass:
    """A query's units with their IDF, summed once; `coverage(U(m))` = the share of that IDF mass found in a
    message (0..1), for the many messages one question scores."""

    def __init__(self, query_units: set[str], scope):
        self.units = query_units
        self.idf = {u: scope.idf(u) for u in query_units}
        self.total = sum(self.idf[u] for u in query_units)

    def coverage(self, units: set[str], more: frozenset[str] = frozenset()) -> float:
        """The share for the units of `units` and `more` together (the query is the small side: it is walked, and
        no union of a message's units is built)."""
        if not self.total:
            return 0.0
        return sum(w for u, w in self.idf.items() if u in units or u in more) / self.total


@dataclass(frozen=True)
class OfflineEvidenceUtility:
    """Evidence utility (App. J) without a language model: score every candidate of one topic-time window, keep
    the few best as KEY and their direct conversational support as SUPPORT.

    relevance r(m) = `similarity_weight` * cosine(q, m) + (1 - `similarity_weight`) * coverage(q, m), where coverage
    is the IDF-weighted share of the question's content words found in the message *and its author* (the same
    metadata-expanded representation as seed retrieval, Sec. 4.2: a question about "Caroline" concerns Caroline's
    messages even when they do not repeat her name).
    context score s(m) = r(m) + sum_d `context_weights`[d-1] * max(r of the d-th candidate before / after m, in
    conversation order): answer-bearing messages sit in a locally relevant exchange (a question and its answer,
    a proposal and its confirmation), the in-window counterpart of temporal locality.
    KEY: the `max_key` best non-anchor candidates by s with s >= `min_score` (anchors are in R'(q) anyway and are
    labelled KEY when they score that high). SUPPORT: a candidate with a reply link to an anchor or a KEY message
    (App. J: "necessary bridges"), or a later candidate with a state-change cue about the same object as a KEY
    message ("prefer the newest applicable adopted change"; IDF-weighted overlap >= `min_revision_overlap`); a
    SUPPORT message's score is at least that of the message it supports.
    Deterministic; it reads only the question, the window's candidates and their similarities, and the scope's
    messages and document frequencies."""

    max_key: int = 6
    min_score: float = 0.15
    min_relevance: float = 0.05  # a KEY message needs some relevance of its own, not only its neighbours'
    similarity_weight: float = 0.5
    context_weights: tuple[float, ...] = (0.5, 0.25)
    min_revision_overlap: float = 0.12
    metadata_fields: tuple[str, ...] = ("author",)
    backend: str = "offline:context-utility"
    offline: bool = True

    def relevance(self, question: Question, messages: Sequence[Message], similarities: Sequence[float],
                  scope) -> np.ndarray:
        """r(m) for each message: similarity and IDF-weighted coverage of the question by the author and text."""
        query = QueryMass(content_units(question.text), scope)
        w = self.similarity_weight
        units = self._expanded_units(scope)
        coverage = [query.coverage(units(m)) for m in messages]
        return np.array([w * float(s) + (1 - w) * c for s, c in zip(similarities, coverage)], dtype=np.float64)

    def _expanded_units(self, scope) -> Callable[[Message], frozenset[str]]:
        """m -> its content units with those of its metadata fields, kept per scope message (Scope.kept): a LoCoMo
        recall run scores each message thousands of times (3.3 million relevance terms for 1,536 questions)."""
        def expanded(m: Message) -> frozenset[str]:
            return frozenset(self._units(m, scope)) | self._metadata_of(m)
        if not hasattr(scope, "kept"):
            return expanded
        reading = ("expanded units", self.metadata_fields)
        return lambda m: scope.kept(reading, m, expanded)

    def _metadata_of(self, m: Message) -> frozenset[str]:
        return self._metadata_units(" ".join(str(v) for f in self.metadata_fields if (v := getattr(m, f, None))))

    @staticmethod
    def _units(m: Message, scope) -> set[str]:
        """The message's content units, cached by the scope when it can (Scope.units_of)."""
        return scope.units_of(m) if hasattr(scope, "units_of") else content_units(m.text)

    @staticmethod
    @lru_cache(maxsize=16384)
    def _metadata_units(text: str) -> frozenset[str]:
        return frozenset(content_units(text))

    def context_scores(self, relevance: np.ndarray, messages: Sequence[Message], scope) -> np.ndarray:
        """s(m): relevance plus the weighted relevance of the nearest candidates in conversation order."""
        order = np.array(sorted(range(len(messages)), key=lambda i: scope.position.get(messages[i].id, i)), dtype=int)
        seq = relevance[order]
        scored = seq.copy()
        for d, weight in enumerate(self.context_weights, start=1):
            if weight and len(seq) > d:
                before = np.concatenate([np.zeros(d), seq[:-d]])
                after = np.concatenate([seq[d:], np.zeros(d)])
                scored += weight * np.maximum(before, after)
        out = np.empty_like(scored)
        out[order] = scored
        return out

    def select(self, question: Question, window_id: int, candidates: Sequence[Message],
               similarities: Sequence[float], scope, anchor_ids: frozenset[str] = frozenset()) -> SelectionResult:
        if not candidates:
            return SelectionResult()
        relevance = self.relevance(question, candidates, similarities, scope)
        scores = self.context_scores(relevance, candidates, scope)
        ranked = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
        keys, added = [], 0
        for i in ranked:
            if scores[i] < self.min_score:
                break
            if relevance[i] < self.min_relevance and candidates[i].id not in anchor_ids:
                continue
            if candidates[i].id in anchor_ids:
                keys.append(i)
            elif added < self.max_key:
                keys.append(i)
                added += 1
        out = [Selection(candidates[i].id, window_id, KEY,
                         f"offline: context score {scores[i]:.2f} (relevance {relevance[i]:.2f}, similarity "
                         f"{similarities[i]:.2f}), rank {rank} in the window", round(float(scores[i]), 4))
               for rank, i in enumerate(keys, start=1)]
        key_ids = {candidates[i].id for i in keys}
        units = [self._units(m, scope) for m in candidates]
        linked = [i for i, m in enumerate(candidates) if m.id in key_ids or m.id in anchor_ids]
        # the first linked candidate by id and by the id it replies to: a reply link is two lookups per candidate
        replies = ({candidates[k].id: k for k in reversed(linked)},
                   {candidates[k].reply_to: k for k in reversed(linked)})
        for i, m in enumerate(candidates):
            if m.id in key_ids or m.id in anchor_ids:
                continue
            support = self._support(i, m, units, candidates, keys, replies, scope)
            if support:
                reason, k = support
                score = max(scores[i], scores[k])  # as needed as the claim it supports
                out.append(Selection(m.id, window_id, SUPPORT, f"offline: {reason}; score {score:.2f}",
                                     round(float(score), 4)))
        return SelectionResult(selections=tuple(out))

    def _support(self, i: int, m: Message, units, candidates, keys, replies, scope) -> tuple[str, int] | None:
        """(why, index of the supported candidate) when m is SUPPORT, else None. `replies`: ({id: the first
        KEY or anchor candidate with it}, {id: the first KEY or anchor candidate replying to it})."""
        linked = [k for k in (replies[0].get(m.reply_to), replies[1].get(m.id)) if k is not None]
        if linked:
            k = min(linked)  # the first in candidate order, replying or replied to
            return f"direct reply link with {'KEY' if k in keys else 'anchor'} {candidates[k].id}", k
        cue = self._revision_cue(m.text)
        earlier = [k for k in keys if candidates[k].timestamp < m.timestamp] if cue else None
        if earlier:
            for k in earlier:
                overlap = weighted_overlap(units[i], units[k], scope)
                if overlap >= self.min_revision_overlap:
                    return f"state change '{cue}' of KEY {candidates[k].id} (overlap {overlap:.2f})", k
        return None

    @staticmethod
    @lru_cache(maxsize=65536)
    def _revision_cue(text: str) -> str | None:
        match = REVISION_CUES.search(text)
        return match.group(0) if match else None


@dataclass(frozen=True)
class OfflineAnswerer:
    """Extractive: the message that best covers the question; on a forest, its UPDATE chain is followed to the
    latest state. Date questions get that message's date. Low coverage -> abstention."""

    min_coverage: float = 0.25
    tie_margin: float = 0.1
    backend: str = "offline:extractive-answerer"
    offline: bool = True

    def answer(self, question: Question, prompt: Prompt, evidence: AnswerEvidence, scope) -> AnswerResult:
        if not evidence.messages:
            return AnswerResult(text=ABSTENTION, reason="offline: no evidence")
        q_units = content_units(question.text) - content_units(question.asking_user or "") - STATE_INTENT
        text_of = lambda m: evidence.texts.get(m.id, m.text)  # noqa: E731
        query = QueryMass(q_units, scope)
        scored = [(query.coverage(content_units(text_of(m))), -i, m)
                  for i, m in enumerate(evidence.messages)]
        coverage = max(s[0] for s in scored)
        if coverage < self.min_coverage:
            return AnswerResult(text=ABSTENTION, reason=f"offline: best coverage {coverage:.2f} < "
                                                        f"{self.min_coverage}")
        # Among the (near-)best matches, the one whose UPDATE chain reaches the most recent state wins: the
        # question is about the current state unless the evidence holds no update.
        near = [m for c, _, m in sorted(scored, key=lambda s: (-s[0], -s[1])) if c >= coverage - self.tie_margin]
        chains = [(m, self.update_chain(m, evidence)) for m in near]
        rank = {m.id: i for i, m in enumerate(near)}
        best, chain = max(chains, key=lambda bc: (len(bc[1]) > 1, bc[1][-1].timestamp if len(bc[1]) > 1 else 0,
                                                  -rank[bc[0].id]))
        final = chain[-1]
        reason = f"offline: best match {best.id} (coverage {coverage:.2f}; {len(near)} near-best)"
        if len(chain) > 1:
            reason += "; followed UPDATE chain " + " -> ".join(m.id for m in chain)
        if DATE_QUESTION.search(question.text) and not _EXPLICIT_DATE.search(text_of(final)):
            return AnswerResult(text=final.timestamp.date().isoformat(), reason=reason + "; answered its date")
        return AnswerResult(text=text_of(final), reason=reason)

    @staticmethod
    def update_chain(best: Message, evidence: AnswerEvidence) -> list[Message]:
        """The UPDATE chain through `best` in time order (App. I: "following UPDATE chains"): the states it replaced
        (its UPDATE ancestors), then the states that replaced it, each step the latest UPDATE child of the state
        before. Only edges that exist: an UPDATE elsewhere in the tree (another slot of the same topic) is no
        state of `best`'s, however late."""
        by_id = {m.id: m for m in evidence.messages}
        updates_of: dict[str, list[Message]] = {}
        for child, (parent, relation) in evidence.parents.items():
            if relation == UPDATE and child in by_id:
                updates_of.setdefault(parent, []).append(by_id[child])
        chain, seen = [best], {best.id}
        while (link := evidence.parents.get(chain[0].id)) and link[1] == UPDATE and link[0] in by_id \
                and link[0] not in seen:
            chain.insert(0, by_id[link[0]])
            seen.add(link[0])
        while (later := [m for m in updates_of.get(chain[-1].id, ()) if m.id not in seen]):
            chain.append(max(later, key=lambda m: (m.timestamp, m.id)))
            seen.add(chain[-1].id)
        return chain


_EXPLICIT_DATE = re.compile(
    r"\b(\d{4}-\d{2}-\d{2}|(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}\b|"
    r"\d{1,2} (jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*)", re.IGNORECASE)


@dataclass(frozen=True)
class OfflineJudge:
    """Abstention, yes/no polarity, negation, exact dates and numbers, then whole-token containment of the gold or
    content-word F1 >= `min_f1` (the rules, in order: tmem.models.lexical_judge)."""

    min_f1: float = 0.5
    backend: str = "offline:lexical-judge"
    offline: bool = True

    def judge(self, question: Question, gold_answer: str, agent_answer: str, prompt: Prompt) -> JudgeResult:
        correct, why = lexical_verdict(gold_answer, agent_answer, self.min_f1)
        verdict = "Final: Correct" if correct else "Final: Incorrect"
        return JudgeResult(correct=correct, raw=f"{verdict} (offline lexical judge: {why})")


def offline_roles(embedder=None, tokens=None):
    """All four roles offline; the embedder defaults to the lexical fallback unless one is given."""
    return Roles(OfflineEvidenceUtility(), ConfiguredRule(), OfflineAnswerer(), OfflineJudge(),
                 embedder or LexicalEmbedder(), tokens or default_token_counter())
