"""Validators run before a batch run reports anything (paper App. D.3): official question counts, unique question
keys, one successful record per question and stage, temporal order and single parents in every forest, and no gold
answer or gold evidence id in any retrieval or answer prompt.

Leakage is checked on what the stages actually used, rebuilt from the records. An answer prompt is made of fixed
templates (their hashes are in every record and in the run manifest), the asking user, the question and the
evidence passages, so: the question the stages saw must be the stored question (which carries no gold by
construction) and neither it nor the seed query may contain a gold answer or gold evidence id; every answer prompt,
re-rendered from the stored question and the recorded context, must hash to the recorded prompt hash; and every
passage must be a stored message's text or its retained spans. A question whose own text contains its answer
(a benchmark's choice question, say) is not a leak and is reported as a note.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tmem.linearize import BEGIN, END
from tmem.prompts import answer_prompt
from tmem.types import Gold, Message, Question, Trace

ERROR, WARNING, NOTE = "error", "warning", "note"

# Official question counts of the benchmarks (paper App. A; LoCoMo's locomo10.json).
OFFICIAL_QUESTIONS = {"groupmembench": 745, "evermembench": 2400, "locomo": 1986}
_OMISSION = "…"
_BODY = re.compile(r'text=("(?:[^"\\]|\\.)*")\s*$')


@dataclass(frozen=True)
class Finding:
    level: str  # "error", "warning" or "note"
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.level.upper():7} [{self.check}] {self.message}"


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.level == ERROR for f in findings)


# ------------------------------------------------------------------------------------------ question counts
def check_question_counts(corpus_format: str, stored: int, selected: int, filtered: bool) -> list[Finding]:
    """The corpus holds the benchmark's official number of questions and the run covers all of them (unless
    --limit / --types asked for a subset)."""
    out = []
    official = OFFICIAL_QUESTIONS.get(corpus_format)
    if official is not None and stored != official:
        out.append(Finding(WARNING, "question counts", f"{corpus_format} has {official} official questions; this "
                           f"corpus holds {stored} (a subset import?)"))
    elif official is not None:
        out.append(Finding(NOTE, "question counts", f"{stored} questions = the official {corpus_format} count"))
    if selected != stored and not filtered:
        out.append(Finding(ERROR, "question counts", f"the run covers {selected} of the corpus's {stored} questions"))
    elif filtered:
        out.append(Finding(NOTE, "question counts", f"subset run: {selected} of {stored} questions (--limit/--types)"))
    return out


# -------------------------------------------------------------------------------------------- record keys
def check_unique_keys(keys: Sequence[tuple[str, str, str]]) -> list[Finding]:
    """Each (scope, question type, question id) names one question."""
    seen: dict[tuple[str, str], str] = {}
    dups = []
    for scope, qtype, qid in keys:
        if (scope, qid) in seen:
            dups.append(f"{scope}/{qid} ({seen[(scope, qid)]} and {qtype})")
        seen[(scope, qid)] = qtype
    return [Finding(ERROR, "unique keys", f"duplicate question key {d}") for d in dups]


def check_records(variant: str, stage: str, counts: Mapping[tuple, int], ok: set, expected: Iterable[tuple],
                  torn: Sequence[tuple[int, str]]) -> list[Finding]:
    """Every expected key has a successful latest record; records per key and unreadable lines are reported."""
    out = []
    missing = [k for k in expected if k not in ok]
    if missing:
        out.append(Finding(ERROR, "records", f"{variant}/{stage}: {len(missing)} question(s) without a successful "
                           f"record, e.g. {'/'.join(missing[0])}"))
    retried = sum(1 for n in counts.values() if n > 1)
    if retried:
        out.append(Finding(NOTE, "records", f"{variant}/{stage}: {retried} question(s) have earlier failed or "
                           "superseded records (history kept; the latest record counts)"))
    for line, why in torn:
        out.append(Finding(WARNING, "records", f"{variant}/{stage}: line {line} ignored: {why}"))
    return out


# ------------------------------------------------------------------------------------------------ forests
def check_forest(trace: Trace, messages: Mapping[str, Message]) -> list[Finding]:
    """Single parents, parents strictly earlier than children, no cycle, nodes in Eq. 8 order (roots by time,
    preorder), every node a piece of evidence."""
    where = f"{trace.variant} {trace.question.scope}/{trace.question.id}"
    out = []
    parents: dict[str, str] = {}
    for e in trace.edges:
        if e.child_id in parents:
            out.append(Finding(ERROR, "forest", f"{where}: {e.child_id} has two parents"))
        parents[e.child_id] = e.parent_id
        p, c = messages.get(e.parent_id), messages.get(e.child_id)
        if p is None or c is None:
            out.append(Finding(ERROR, "forest", f"{where}: edge {e.parent_id}->{e.child_id} names an unknown message"))
        elif not p.timestamp < c.timestamp:
            out.append(Finding(ERROR, "forest", f"{where}: parent {p.id} ({p.timestamp}) is not earlier than child "
                               f"{c.id} ({c.timestamp})"))
    for child in parents:
        seen, node = {child}, child
        while node in parents:
            node = parents[node]
            if node in seen:
                out.append(Finding(ERROR, "forest", f"{where}: cycle through {child}"))
                break
            seen.add(node)
    if trace.nodes:
        ids = [n.message_id for n in trace.nodes]
        if len(set(ids)) != len(ids) or set(ids) != set(trace.evidence_ids):
            out.append(Finding(ERROR, "forest", f"{where}: forest nodes differ from the evidence set"))
        index_of = {n.message_id: n.index for n in trace.nodes}
        for n in trace.nodes:
            expected = index_of.get(parents.get(n.message_id, ""), 0)
            if n.parent_index != expected or (n.parent_index and n.parent_index >= n.index):
                out.append(Finding(ERROR, "forest", f"{where}: node {n.index} is not in preorder under its parent"))
                break
        roots = [n for n in trace.nodes if n.parent_index == 0]
        if [n.timestamp for n in roots] != sorted(n.timestamp for n in roots):
            out.append(Finding(ERROR, "forest", f"{where}: trees are not ordered by root time"))
    return out


# ------------------------------------------------------------------------------------------------ leakage
def _normal(text: str) -> str:
    return " ".join(text.casefold().split())


def _gold_strings(gold: Gold | None) -> tuple[str, list[str]]:
    if gold is None:
        return "", []
    answer = _normal(gold.answer or "")
    return (answer if len(answer) >= 4 else ""), sorted(gold.evidence_ids)


def _contains_id(text: str, mid: str) -> bool:
    return re.search(rf"(?<![\w:]){re.escape(mid)}(?![\w:])", text) is not None


def _leaks(text: str, answer: str, ids: Sequence[str], question: Question) -> list[str]:
    """Gold strings in `text` that the question itself does not already contain."""
    q = _normal(f"{question.asking_user or ''} {question.text}")
    found = []
    if answer and answer in _normal(text) and answer not in q:
        found.append("the gold answer")
    found += [f"gold evidence id {i}" for i in ids if _contains_id(text, i) and not _contains_id(question.text, i)]
    return found


def _passage_bodies(context: str) -> list[str]:
    bodies = []
    inside = False
    for line in context.split("\n"):
        if line == BEGIN:
            inside = True
        elif line == END:
            inside = False
        elif inside:
            match = _BODY.search(line)
            if match:
                bodies.append(json.loads(match.group(1)))
    return bodies


def _derived(body: str, texts: Sequence[str]) -> bool:
    """A passage body is a stored message text, or its retained spans joined by the omission mark."""
    pieces = [" ".join(p.split()) for p in body.split(_OMISSION) if p.strip()]
    return any(all(p in t for p in pieces) for t in texts) if pieces else True


def check_leakage(trace: Trace, stored: Question, gold: Gold | None, evidence: Mapping[str, Message],
                  query: str | None = None) -> list[Finding]:
    """No gold answer or gold evidence id reached a retrieval or answer prompt of this trace.

    `stored` is the question as stored (gold-free by construction), `evidence` the stored messages of the trace's
    evidence set, `query` the recorded seed query."""
    where = f"{trace.variant} {stored.scope}/{stored.id}"
    out = []
    answer, ids = _gold_strings(gold)
    q = trace.question
    if (q.text, q.asking_user) != (stored.text, stored.asking_user):
        out.append(Finding(ERROR, "leakage", f"{where}: the question the stages saw differs from the stored question"))
    for what in _leaks(f"{q.asking_user or ''} {q.text}", answer, ids, stored):
        out.append(Finding(ERROR, "leakage", f"{where}: {what} in the question the stages saw"))
    if query is not None:
        for what in _leaks(query, answer, ids, stored):
            out.append(Finding(ERROR, "leakage", f"{where}: {what} in the seed-retrieval query"))
    texts = [" ".join(m.text.split()) for m in evidence.values()]
    for a in trace.answers:
        passages = trace.context if a.presentation == "forest" else trace.flat_context
        prompt = answer_prompt(a.presentation, stored.asking_user, stored.text, passages)
        if prompt.hash != a.prompt_hash:
            out.append(Finding(ERROR, "leakage", f"{where}: the {a.presentation} answer prompt does not rebuild from "
                               "the question and the recorded context"))
        foreign = [b for b in _passage_bodies(passages) if not _derived(b, texts)]
        if foreign:
            out.append(Finding(ERROR, "leakage", f"{where}: {len(foreign)} {a.presentation} passage(s) are not "
                               f"stored messages, e.g. {foreign[0][:60]!r}"))
    if answer and answer in _normal(stored.text):
        out.append(Finding(NOTE, "leakage", f"{where}: the stored question itself contains its gold answer "
                           "(benchmark wording, not a leak)"))
    return out
