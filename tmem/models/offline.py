"""Deterministic offline stand-ins for the four model roles, and a lexical fallback embedder.

They let the whole pipeline run with no network and no key. They are not language models, and every record
they produce says so (`offline = True`, backend names start with "offline:"). Their rules follow the paper's role
definitions: evidence utility keeps the few candidates of a window that best cover the question (KEY) and the
messages they directly reply to or that reply to them (SUPPORT, App. J); the relation role needs a reply link,
a revision or support cue, or strong lexical overlap on the same object (App. K); the answerer extracts the
best-matching message and, on a forest, follows its UPDATE chain to the latest state (App. I); the judge compares
content words with the gold answer.
"""
from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

import numpy as np

from tmem.models.base import AnswerEvidence, AnswerResult, JudgeResult, RelationResult, SelectionResult
from tmem.prompts import Prompt
from tmem.text import STATE_CHANGE_CUES as REVISION_CUES
from tmem.text import content_units, tokenize
from tmem.types import EXPAND, KEY, SUPPORT, UPDATE, Message, Question, RelationChoice, Selection

ABSTENTION = "There is no information available in the conversation to answer this question."

SUPPORT_CUES = re.compile(
    r"\b(yes|yep|agreed?|confirm(ed|s)?|approved?|sounds good|makes sense|because|since|done|will do|on it|"
    r"\+1|lgtm|correct|right|exactly|thanks|noted|to clarify|for context|details?|here is|here's|answer|"
    r"works for|fine by|good call|go ahead|will do)\b",
    re.IGNORECASE)
DATE_QUESTION = re.compile(r"^\s*(when|what (date|day|time)|which (date|day))\b|\bwhat date\b", re.IGNORECASE)


def weighted_overlap(a: set[str], b: set[str], scope) -> float:
    """Share of the smaller side's IDF mass that the two unit sets have in common (0..1)."""
    if not a or not b:
        return 0.0
    shared = sum(scope.idf(u) for u in a & b)
    return shared / min(sum(scope.idf(u) for u in a), sum(scope.idf(u) for u in b))


def query_coverage(query_units: set[str], units: set[str], scope) -> float:
    """Share of the query's IDF mass found in a message (0..1)."""
    total = sum(scope.idf(u) for u in query_units)
    return sum(scope.idf(u) for u in query_units & units) / total if total else 0.0


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
        q_units = content_units(question.text)
        w = self.similarity_weight
        coverage = [query_coverage(q_units, self._units(m, scope) | self._metadata_units(
            " ".join(str(v) for f in self.metadata_fields if (v := getattr(m, f, None)))), scope) for m in messages]
        return np.array([w * float(s) + (1 - w) * c for s, c in zip(similarities, coverage)], dtype=np.float64)

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
        for i, m in enumerate(candidates):
            if m.id in key_ids or m.id in anchor_ids:
                continue
            support = self._support(i, m, units, candidates, keys, linked, scope)
            if support:
                reason, k = support
                score = max(scores[i], scores[k])  # as needed as the claim it supports
                out.append(Selection(m.id, window_id, SUPPORT, f"offline: {reason}; score {score:.2f}",
                                     round(float(score), 4)))
        return SelectionResult(selections=tuple(out))

    def _support(self, i: int, m: Message, units, candidates, keys, linked, scope) -> tuple[str, int] | None:
        """(why, index of the supported candidate) when m is SUPPORT, else None."""
        for k in linked:
            other = candidates[k]
            if m.reply_to == other.id or other.reply_to == m.id:
                return f"direct reply link with {'KEY' if k in keys else 'anchor'} {other.id}", k
        earlier = [k for k in keys if candidates[k].timestamp < m.timestamp]
        cue = self._revision_cue(m.text) if earlier else None
        if cue:
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
class OfflineRelation:
    """App. K's direct-relation gate, approximated with explicit signals only:
    UPDATE: a revision cue in the child about the same object as the parent (IDF-weighted overlap).
    EXPAND: a reply link; or, within one episode (`episode_hours`), the child addresses the parent's author by
    name, or the parent addressed the child's author (the child is the addressee's answer), or the child carries an
    answer/confirmation cue about the same object; or the child continues its author's own message right before it
    (no other candidate between, within `continuation_minutes`, addressing nobody): one thought split over lines.
    Shared vocabulary, topic or chronology alone give NONE (the child roots a new tree)."""

    min_update_overlap: float = 0.12
    min_support_overlap: float = 0.15
    episode_hours: float = 12.0
    continuation_minutes: float = 5.0
    backend: str = "offline:cue-overlap-relation"
    offline: bool = True

    def choose_parent(self, question: Question, child: Message, candidates: Sequence[Message],
                      scope) -> RelationResult:
        child_units = scope.units_of(child)
        revision = REVISION_CUES.search(child.text)
        support = SUPPORT_CUES.search(child.text)
        addressed = _addressed_names(child.text)
        # the child's author's last earlier message: an addressee answers once, later messages continue their own
        spoke_last = max((m.timestamp for m in candidates if m.author and m.author == child.author), default=None)
        latest = max(candidates, key=lambda m: m.timestamp, default=None)
        continues = (latest is not None and latest.author and latest.author == child.author and not addressed
                     and (child.timestamp - latest.timestamp).total_seconds() <= 60 * self.continuation_minutes)
        choices = []
        for parent in candidates:
            overlap = weighted_overlap(child_units, scope.units_of(parent), scope)
            hours = (child.timestamp - parent.timestamp).total_seconds() / 3600
            recency = 0.05 * min(1.0, hours / 24)
            same_episode = hours <= self.episode_hours
            choice = None
            if child.reply_to == parent.id:
                relation = UPDATE if revision and overlap >= self.min_update_overlap else EXPAND
                choice = (relation, 0.9 + 0.05 * overlap, f"reply link; overlap {overlap:.2f}")
            elif revision and overlap >= self.min_update_overlap:
                choice = (UPDATE, 0.5 + 0.4 * overlap, f"revision cue '{revision.group(0)}'; overlap {overlap:.2f}")
            elif same_episode and parent.author and parent.author.casefold() in addressed:
                choice = (EXPAND, 0.6 + 0.2 * overlap, f"addresses {parent.author}; overlap {overlap:.2f}")
            elif same_episode and child.author and child.author.casefold() in _addressed_names(parent.text) \
                    and parent.author != child.author and (spoke_last is None or spoke_last < parent.timestamp):
                choice = (EXPAND, 0.5 + 0.2 * overlap, f"answers {parent.author or 'the parent'}, who addressed "
                                                       f"{child.author}; overlap {overlap:.2f}")
            elif same_episode and support and overlap >= self.min_support_overlap:
                choice = (EXPAND, 0.4 + 0.4 * overlap, f"support cue '{support.group(0)}'; overlap {overlap:.2f}")
            elif continues and parent is latest:
                choice = (EXPAND, 0.35 + 0.2 * overlap, f"continues {parent.author}'s own message; "
                                                        f"overlap {overlap:.2f}")
            if choice:
                relation, confidence, reason = choice
                choices.append(RelationChoice(parent.id, relation, round(confidence - recency, 4),
                                              f"offline: {reason}"))
        return RelationResult(choices=tuple(choices))


def _addressed_names(text: str) -> set[str]:
    """Names the message addresses: '@name' anywhere, or 'name:' / 'name,' at the start (chat convention)."""
    names = {m.casefold() for m in re.findall(r"@([\w.\-]+)", text)}
    head = re.match(r"\s*@?([^\s:,]+)[:,]\s", text)
    if head:
        names.add(head.group(1).casefold())
    return names


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
        q_units = content_units(question.text) - content_units(question.asking_user or "")
        text_of = lambda m: evidence.texts.get(m.id, m.text)  # noqa: E731
        scored = [(query_coverage(q_units, content_units(text_of(m)), scope), -i, m)
                  for i, m in enumerate(evidence.messages)]
        coverage = max(s[0] for s in scored)
        if coverage < self.min_coverage:
            return AnswerResult(text=ABSTENTION, reason=f"offline: best coverage {coverage:.2f} < "
                                                        f"{self.min_coverage}")
        # Among the (near-)best matches, the one whose UPDATE chain reaches the most recent state wins: the
        # question is about the current state unless the evidence holds no update.
        near = [m for c, _, m in sorted(scored, key=lambda s: (-s[0], -s[1])) if c >= coverage - self.tie_margin]
        chains = [self.update_chain(m, evidence) for m in near]
        chain = max(chains, key=lambda c: (len(c) > 1, c[-1].timestamp if len(c) > 1 else 0, -chains.index(c)))
        best, final = chain[0], chain[-1]
        reason = f"offline: best match {best.id} (coverage {coverage:.2f}; {len(near)} near-best)"
        if len(chain) > 1:
            reason += "; followed UPDATE chain " + " -> ".join(m.id for m in chain)
        if DATE_QUESTION.search(question.text) and not _EXPLICIT_DATE.search(text_of(final)):
            return AnswerResult(text=final.timestamp.date().isoformat(), reason=reason + "; answered its date")
        return AnswerResult(text=text_of(final), reason=reason)

    @staticmethod
    def update_chain(best: Message, evidence: AnswerEvidence) -> list[Message]:
        """best, then the latest UPDATE in its tree if that is later: the chain of UPDATE edges leading to it
        from the tree's root shows how the state evolved (App. I: "following UPDATE chains")."""
        by_id = {m.id: m for m in evidence.messages}
        parent_of = {c: p for c, (p, _) in evidence.parents.items()}

        def root_of(mid: str) -> str:
            while mid in parent_of:
                mid = parent_of[mid]
            return mid

        tree = root_of(best.id)
        updates = [by_id[c] for c, (_, rel) in evidence.parents.items()
                   if rel == UPDATE and c in by_id and root_of(c) == tree]
        latest = max(updates, key=lambda m: (m.timestamp, m.id), default=None)
        if latest is None or latest.timestamp <= best.timestamp:
            return [best]
        chain = [latest]
        while chain[-1].id in parent_of and evidence.parents[chain[-1].id][1] == UPDATE:
            chain.append(by_id[parent_of[chain[-1].id]])
        return [best] + [m for m in reversed(chain) if m.id != best.id]


_EXPLICIT_DATE = re.compile(
    r"\b(\d{4}-\d{2}-\d{2}|(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}\b|"
    r"\d{1,2} (jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*)", re.IGNORECASE)
_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


def _dates(text: str) -> set[str]:
    found = set(_DATE.findall(text))
    for fmt in ("%d %B %Y", "%d %B, %Y", "%B %d, %Y", "%B %d %Y"):
        for match in re.finditer(r"\b\d{1,2} [A-Z][a-z]+,? \d{4}\b|\b[A-Z][a-z]+ \d{1,2},? \d{4}\b", text):
            try:
                found.add(datetime.strptime(match.group(0), fmt).date().isoformat())
            except ValueError:
                pass
    return found


def is_abstention(text: str) -> bool:
    return bool(re.search(r"no information|not mentioned|not (stated|available)|cannot be determined|unknown",
                          text, re.IGNORECASE))


@dataclass(frozen=True)
class OfflineJudge:
    """Correct when both abstain, the gold text is contained in the answer, a gold date appears in the answer,
    or content-word F1 >= `min_f1`."""

    min_f1: float = 0.5
    backend: str = "offline:lexical-judge"
    offline: bool = True

    def judge(self, question: Question, gold_answer: str, agent_answer: str, prompt: Prompt) -> JudgeResult:
        gold_tokens, answer_tokens = tokenize(gold_answer), tokenize(agent_answer)
        gold_units, answer_units = content_units(gold_answer), content_units(agent_answer)
        common = len(gold_units & answer_units)
        f1 = 2 * common / (len(gold_units) + len(answer_units)) if common else 0.0
        if is_abstention(gold_answer) or is_abstention(agent_answer):
            correct, why = is_abstention(gold_answer) and is_abstention(agent_answer), "abstention match"
        elif gold_tokens and " ".join(gold_tokens) in " ".join(answer_tokens):
            correct, why = True, "gold contained in answer"
        elif _dates(gold_answer) & _dates(agent_answer):
            correct, why = True, "same date"
        else:
            correct, why = f1 >= self.min_f1, f"content F1 {f1:.2f}"
        verdict = "Final: Correct" if correct else "Final: Incorrect"
        return JudgeResult(correct=correct, raw=f"{verdict} (offline lexical judge: {why})")


class LexicalEmbedder:
    """Hashed bag of words and character trigrams (512 dims), L2-normalised: the fallback when no sentence
    embedder is installed. Announced as such in its name."""

    name = "lexical-hash-512 (lexical fallback)"
    offline = True
    dim = 512

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = [t for t in tokenize(text)]
            grams = [w[i:i + 3] for w in words if len(w) > 3 for i in range(len(w) - 2)]
            for feature, weight in [(w, 1.0) for w in words] + [(g, 0.5) for g in grams]:
                h = zlib.crc32(feature.encode("utf-8"))
                out[row, h % self.dim] += weight if h & 0x80000000 else -weight
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def offline_roles(embedder=None, tokens=None):
    """All four roles offline; the embedder defaults to the lexical fallback unless one is given."""
    from tmem.models.base import Roles
    from tmem.models.tokens import default_token_counter

    return Roles(OfflineEvidenceUtility(), OfflineRelation(), OfflineAnswerer(), OfflineJudge(),
                 embedder or LexicalEmbedder(), tokens or default_token_counter())
