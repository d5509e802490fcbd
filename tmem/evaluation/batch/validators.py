"""Validators run before a batch run reports anything (paper App. D.3): official question counts, unique question
keys, a usable record per question and stage, temporal order and single parents in every forest, and no gold
answer or gold evidence id in any retrieval or answer prompt.

Leakage is checked on what the stages actually used, rebuilt from the records. An answer prompt is made of fixed
templates (their hashes are in every record and in the run manifest), the asking user, the question and the
evidence passages, so: the question the stages saw must be the stored question (which carries no gold by
construction) and neither it nor the seed query may contain a gold answer or gold evidence id; every answer prompt,
re-rendered from the stored question and the recorded context, must hash to the recorded prompt hash. A forged
context with a matching hash passes that, so the recorded passages are also split against their own rendering:
re-rendered from the trace's nodes (or evidence order) and the stored messages with empty bodies, every recorded
line must be an expected line whose body is that message's stored text or its retained spans. Whatever is not
(extra lines, fields, text around the passages) is reported and searched for the gold answer; the whole prompt is
searched for gold evidence ids, which a rendered prompt never carries (passages are numbered). A question whose own
text contains its answer (a benchmark's choice question, say) is not a leak and is reported as a note.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tmem.baselines import SYSTEMS
from tmem.baselines.stage import memory_lines
from tmem.pipeline.linearize import END, order_flat, serialize_flat, serialize_forest
from tmem.pipeline.masking import METADATA, mask
from tmem.prompts import answer_prompt
from tmem.types import Gold, Message, Question, Trace

ERROR, WARNING, NOTE = "error", "warning", "note"

# Official question counts of the benchmarks (paper App. A; LoCoMo's locomo10.json).
OFFICIAL_QUESTIONS = {"groupmembench": 745, "evermembench": 2400, "locomo": 1986}
_OMISSION = "…"
_BODY = re.compile(r'text=("(?:[^"\\]|\\.)*")\s*$')
_EMPTY_BODY = 'text=""'
_DECODER = json.JSONDecoder()
_SHORT_ANSWER = 4  # shorter gold answers are matched as whole words only


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
                  torn: Sequence[tuple[int, str]], reasons: Mapping[tuple, str] | None = None) -> list[Finding]:
    """Every expected key has a usable latest record (`ok`: one the run can build on); the reason the first
    missing one has none (`reasons`), records per key and unreadable lines are reported."""
    out = []
    missing = [k for k in expected if k not in ok]
    if missing:
        why = (reasons or {}).get(missing[0])
        out.append(Finding(ERROR, "records", f"{variant}/{stage}: {len(missing)} question(s) incomplete: no usable "
                           "record for this configuration, backend and prompt templates (rerun the same command to "
                           f"complete them), e.g. {'/'.join(missing[0])}" + (f": {why}" if why else "")))
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
    return _normal(gold.answer or ""), sorted(gold.evidence_ids)


def _has_answer(text: str, answer: str) -> bool:
    """The normalized gold `answer` occurs in `text`: as a substring, or, under 4 characters, as a whole word
    (a short answer such as "no" or "3" is part of too many words and numbers to be matched inside them)."""
    if not answer:
        return False
    text = _normal(text)
    if len(answer) >= _SHORT_ANSWER:
        return answer in text
    return re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", text) is not None


def _contains_id(text: str, mid: str) -> bool:
    return re.search(rf"(?<![\w:]){re.escape(mid)}(?![\w:])", text) is not None


def _numeric_id(mid: str) -> bool:
    """An id without letters ("17", "3.2") cannot be told from the passage numbers, depths and times of a
    rendered prompt, so it is looked for only outside them."""
    return re.search(r"[^\W\d_]", mid) is None


def _leaks(text: str, answer: str, ids: Sequence[str], question: Question) -> list[str]:
    """Gold strings in `text` that the question itself does not already contain."""
    q = f"{question.asking_user or ''} {question.text}"
    found = []
    if _has_answer(text, answer) and not _has_answer(q, answer):
        found.append("the gold answer")
    found += [f"gold evidence id {i}" for i in ids if _contains_id(text, i) and not _contains_id(question.text, i)]
    return found


@dataclass
class _Passages:
    """A recorded context split against the rendering of the recorded evidence."""

    bodies: list[tuple[str, str | None]]  # (message body, id of the message it must come from; None: any)
    outside: list[str]  # text that is neither the expected rendering nor a message body
    foreign: list[str]  # lines that are not lines of the expected rendering
    skipped: int  # expected lines missing before the last line that matched (deleted or reordered)


def _expected_lines(trace: Trace, presentation: str, evidence: Mapping[str, Message]) -> list[tuple[str, str | None]]:
    """The passages the stages render from the recorded evidence, with every body empty: (line, message id of a
    passage line or None for BEGIN / TREE k / END)."""
    # without metadata expansion the stages render the passages with that metadata hidden (tmem/pipeline/masking.py)
    fields = trace.config.get("retrieval", {}).get("metadata_fields", METADATA) if trace.config else METADATA
    hidden = [f for f in METADATA if f not in fields]
    evidence = {m.id: m for m in mask(list(evidence.values()), hidden)} if hidden else evidence
    if presentation == "forest":
        ids = [n.message_id for n in trace.nodes]
        rendered = serialize_forest(trace.nodes, evidence, dict.fromkeys(ids, ""))
    else:
        rule = (trace.config or {}).get("answer", {}).get("flat_order", "rank")
        flat = order_flat([evidence[i] for i in trace.evidence_ids], rule)
        ids = [m.id for m in flat]
        rendered = serialize_flat(flat, dict.fromkeys(ids, ""))
    order = iter(ids)
    return [(line, next(order) if line.endswith(_EMPTY_BODY) else None) for line in rendered.split("\n")]


def _json_string(text: str, partial: bool) -> str | None:
    """The JSON string literal that is all of `text`; on a line cut at the token budget, its readable prefix."""
    candidates = [text] + ([text + '"', re.sub(r"\\(u[0-9a-fA-F]{0,3})?$", "", text) + '"'] if partial else [])
    for candidate in candidates:
        try:
            value, end = _DECODER.raw_decode(candidate)
        except ValueError:
            continue
        if end == len(candidate) and isinstance(value, str):
            return value
    return None


def _fit(line: str, expected: str, partial: bool) -> tuple[bool, str | None]:
    """Whether `line` renders the `expected` line (whose body is empty), and the body it carries."""
    if not expected.endswith(_EMPTY_BODY):  # BEGIN, TREE k, END
        return line == expected or (partial and expected.startswith(line)), None
    head = expected[:-len('""')]
    if not line.startswith(head):
        return partial and head.startswith(line), None
    body = _json_string(line[len(head):], partial)
    return body is not None, body


def _split_passages(passages: str, expected: Sequence[tuple[str, str | None]]) -> _Passages:
    """Walk the recorded lines along the expected ones; a line that renders none of the expected lines still to
    come is foreign. A context cut at the token budget (no END line) may end inside its last line."""
    lines = passages.split("\n")
    truncated = not passages.endswith(END)
    out = _Passages([], [], [], 0)
    j = 0
    for n, line in enumerate(lines):
        match = _next_fit(line, expected, j, partial=truncated and n == len(lines) - 1)
        if match is not None:
            k, body = match
            out.skipped += k - j
            j = k + 1
            if body is not None:
                out.bodies.append((body, expected[k][1]))
            continue
        out.foreign.append(line)
        found = _BODY.search(line)  # a body on a foreign line is still checked as a body, against every message
        out.outside.append(line[:found.start()] if found else line)
        if found:
            out.bodies.append((json.loads(found.group(1)), None))
    return out


def _next_fit(line: str, expected: Sequence[tuple[str, str | None]], start: int,
              partial: bool) -> tuple[int, str | None] | None:
    """(index, body) of the first expected line from `start` on that `line` renders, or None."""
    for k in range(start, len(expected)):
        fits, body = _fit(line, expected[k][0], partial)
        if fits:
            return k, body
    return None


def _derived(body: str, texts: Sequence[str]) -> bool:
    """A passage body is a stored message text, or its retained spans joined by the omission mark."""
    pieces = [" ".join(p.split()) for p in body.split(_OMISSION) if p.strip()]
    return any(all(p in t for p in pieces) for t in texts) if pieces else True


def _check_answer_prompt(where: str, trace: Trace, presentation: str, prompt_text: str, passages: str,
                         evidence: Mapping[str, Message], answer: str, ids: Sequence[str],
                         stored: Question) -> list[Finding]:
    """The passages of one answer prompt are the rendering of the recorded evidence around stored message bodies;
    no gold answer outside those bodies and no gold evidence id anywhere in the prompt."""
    out = []
    shown = [n.message_id for n in trace.nodes] if presentation == "forest" else list(trace.evidence_ids)
    unknown = [i for i in shown if i not in evidence]
    texts = {i: " ".join(m.text.split()) for i, m in evidence.items()}
    if unknown:
        out.append(Finding(ERROR, "leakage", f"{where}: {presentation} passages name {len(unknown)} message(s) "
                           f"that are not stored, e.g. {unknown[0]}; they cannot be checked"))
        split = _Passages([], [passages], [], 0)
    else:
        split = _split_passages(passages, _expected_lines(trace, presentation, evidence))
    if split.foreign or split.skipped:
        example = f", e.g. {split.foreign[0][:80]!r}" if split.foreign else ""
        out.append(Finding(ERROR, "leakage", f"{where}: the {presentation} passages are not the rendering of the "
                           f"recorded evidence ({len(split.foreign)} foreign line(s), {split.skipped} line(s) "
                           f"missing or out of order{example})"))
    foreign = [b for b, mid in split.bodies if not _derived(b, [texts[mid]] if mid else list(texts.values()))]
    if foreign:
        out.append(Finding(ERROR, "leakage", f"{where}: {len(foreign)} {presentation} passage(s) are not stored "
                           f"messages, e.g. {foreign[0][:60]!r}"))
    outside = "\n".join(split.outside + foreign)
    if _has_answer(outside, answer):
        out.append(Finding(ERROR, "leakage", f"{where}: the gold answer outside the message bodies of the "
                           f"{presentation} answer prompt"))
    for i in ids:
        if not _contains_id(stored.text, i) and _contains_id(outside if _numeric_id(i) else prompt_text, i):
            out.append(Finding(ERROR, "leakage", f"{where}: gold evidence id {i} in the {presentation} answer "
                               "prompt"))
    return out


def _check_memory_context(where: str, trace: Trace, stored: Question, ids: Sequence[str]) -> list[Finding]:
    """A memory system's answer prompt rebuilds from the question and the recorded context, that context is the
    rendering of the recorded items (cut at B), and no gold evidence id is in it. Its derived items may state the
    answer: the system wrote them from the messages, which never carry gold. The oracle bound reads gold by design."""
    out = []
    full = "\n".join(line for _, line in memory_lines(trace.memories))
    if not full.startswith(trace.flat_context):
        out.append(Finding(ERROR, "leakage", f"{where}: the context is not the rendering of the recorded memories"))
    for a in trace.answers:
        prompt = answer_prompt(a.presentation, stored.asking_user, stored.text, trace.flat_context)
        if prompt.hash != a.prompt_hash:
            out.append(Finding(ERROR, "leakage", f"{where}: the answer prompt does not rebuild from the question "
                               "and the recorded context"))
    if trace.variant in SYSTEMS and SYSTEMS[trace.variant].uses_gold:
        return out + [Finding(NOTE, "leakage", f"{where}: an oracle bound: its context is the gold evidence")]
    for i in ids:
        if not _contains_id(stored.text, i) and _contains_id(trace.flat_context, i) and not _numeric_id(i):
            out.append(Finding(ERROR, "leakage", f"{where}: gold evidence id {i} in the memory context"))
    return out


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
    if trace.stage("memory") is not None:  # a memory system's context (tmem.baselines)
        return out + _check_memory_context(where, trace, stored, ids)
    for a in trace.answers:
        passages = trace.context if a.presentation == "forest" else trace.flat_context
        typed = (trace.config.get("structuring") or {}).get("typed", True)  # untyped forests use their own wording
        prompt = answer_prompt(a.presentation, stored.asking_user, stored.text, passages, typed)
        if prompt.hash != a.prompt_hash:
            out.append(Finding(ERROR, "leakage", f"{where}: the {a.presentation} answer prompt does not rebuild from "
                               "the question and the recorded context"))
        out += _check_answer_prompt(where, trace, a.presentation, f"{prompt.system}\n\n{prompt.user}", passages,
                                    evidence, answer, ids, stored)
    if _has_answer(stored.text, answer):
        out.append(Finding(NOTE, "leakage", f"{where}: the stored question itself contains its gold answer "
                           "(benchmark wording, not a leak)"))
    return out
