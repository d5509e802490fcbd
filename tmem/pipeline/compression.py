"""Budgeted span compression inside Temporal Memory Structuring (paper Sec. 4.3, Eq. 6-7, App. F.2).

Each node's text is split into spans (sentences and clauses). A span s of node v with parent p scores
    G_q(s|p) = sum_{u in U(s) & U(q)} w(u) + sum_{u in U(s) - U(p)} w(u),   w(u) = log((N+1)/(df(u)+1)) + 1
and g_q(s|p) = G_q(s|p) / l(s) with l(s) its token length. Spans holding query entities, dates or times, numbers,
or (on an UPDATE edge) state-change wording are protected. A query entity is a name-like word of the question: one
written with a capital inside the question (not its first word), or holding a digit, underscore or inner hyphen, or
quoted; the question's other content words still raise a span's gain (Eq. 6) but do not protect it — otherwise any
span sharing a common word with the question would be kept and the budget could rarely be met. While the
serialized forest exceeds the budget B, unprotected spans are omitted in ascending g_q, from leaves upward (node
height 0, then 1, ...). No node or edge is ever removed; every node keeps its metadata, its relation and at least
one span. Omitted runs of spans are shown as a single ellipsis.

Nodes can still be dropped by the cut at B that follows (`budget_cut`): when what compression may not omit (the
protected spans and one span per node) exceeds B, the serialized forest is cut at B tokens like the variants
without compression and every flat list; each message whose line the cut shortened or removed is a `Cut` in the
trace, and the evidence verdict (tmem.analysis.funnel) counts only messages whose whole line reached the answer.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tmem.pipeline.linearize import serialize_forest
from tmem.text import STATE_CHANGE_CUES, content_units
from tmem.types import UPDATE, Cut, ForestNode, Span

OMISSION = "…"
_SPAN_BREAK = re.compile(r"(?<=[.!?;])\s+|\n+")
_DATE_OR_TIME = re.compile(
    r"\b(\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|\d{1,2}/\d{1,2}(/\d{2,4})?|(mon|tues|wednes|thurs|fri|satur|sun)day|"
    r"jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|june?|july?|aug(ust)?|sep(tember)?|oct(ober)?|"
    r"nov(ember)?|dec(ember)?|today|tomorrow|yesterday|tonight|next week|last week)\b"
    r"|\bmay\s+\d|\d\s+may\b", re.IGNORECASE)  # "may" alone is mostly the verb
_NUMBER = re.compile(r"\d")


def split_spans(text: str) -> list[str]:
    """Sentences (and clauses after ';'), keeping every character of the text in some span."""
    spans = [s for s in _SPAN_BREAK.split(text) if s and s.strip()]
    return spans or [text]


_WORD = re.compile(r"[\"“]([^\"”]+)[\"”]|(\w[\w\-]*)")  # a double-quoted phrase, or a word


def query_entities(question: str) -> set[str]:
    """The question's name-like content units: capitalized inside the question, with a digit, an underscore or an
    inner hyphen, or in double quotes (Caroline, Msg_12, v2, PII-vault, "blue plan")."""
    entities: list[str] = []
    for i, match in enumerate(_WORD.finditer(question)):
        quoted, word = match.groups()
        if quoted:
            entities.append(quoted)
        elif (i > 0 and word[0].isupper()) or any(c.isdigit() or c == "_" for c in word) or "-" in word.strip("-"):
            entities.append(word)
    return content_units(" ".join(entities))


def protection(span: str, entity_units: set[str], on_update_edge: bool) -> str | None:
    """Why a span may not be omitted, or None."""
    if content_units(span) & entity_units:
        return "query entity"
    if _DATE_OR_TIME.search(span):
        return "date/time"
    if _NUMBER.search(span):
        return "number"
    if on_update_edge and STATE_CHANGE_CUES.search(span):
        return "state change"
    return None


def span_gain(span: str, query_units: set[str], parent_units: set[str], idf: Callable[[str], float]) -> float:
    """G_q(s|p) (Eq. 6)."""
    units = content_units(span)
    return sum(idf(u) for u in units & query_units) + sum(idf(u) for u in units - parent_units)


@dataclass(frozen=True)
class CompressionResult:
    spans: tuple[Span, ...]
    texts: dict[str, str]
    tokens_before: int
    tokens_after: int
    budget_met: bool


def node_heights(nodes: Sequence[ForestNode]) -> dict[int, int]:
    """Height of each node (leaf = 0) by forest index."""
    height = {n.index: 0 for n in nodes}
    for n in sorted(nodes, key=lambda n: -n.depth):
        if n.parent_index:
            height[n.parent_index] = max(height[n.parent_index], height[n.index] + 1)
    return height


def retained_text(spans: Sequence[Span]) -> str:
    parts: list[str] = []
    for s in spans:
        if s.kept:
            parts.append(s.text.strip())
        elif not parts or parts[-1] != OMISSION:
            parts.append(OMISSION)
    return " ".join(parts)


def compress_forest(nodes: Sequence[ForestNode], query: str, idf: Callable[[str], float],
                    count: Callable[[str], int], render: Callable[[Mapping[str, str]], str],
                    budget: int) -> CompressionResult:
    """Omit the lowest-g_q unprotected spans, leaves first, until `count(render(texts)) <= budget`."""
    query_units, entity_units = content_units(query), query_entities(query)
    by_index = {n.index: n for n in nodes}
    spans: dict[str, list[Span]] = {}
    for n in nodes:
        parent_units = content_units(by_index[n.parent_index].text) if n.parent_index else set()
        rows = []
        for i, text in enumerate(split_spans(n.text)):
            gain = span_gain(text, query_units, parent_units, idf)
            tokens = max(1, count(text))
            rows.append(Span(n.message_id, i, text, tokens, round(gain, 4), round(gain / tokens, 4),
                             protection(text, entity_units, n.relation == UPDATE), True))
        spans[n.message_id] = rows
    texts = {n.message_id: n.text for n in nodes}
    before = count(render(texts))
    current = before
    heights = node_heights(nodes)
    for level in sorted(set(heights.values())):
        if current <= budget:
            break
        level_nodes = [n for n in nodes if heights[n.index] == level]
        optional = sorted(((s, n) for n in level_nodes for s in spans[n.message_id] if s.protected is None),
                          key=lambda sn: (sn[0].density, -sn[1].index, -sn[0].index))
        for span, node in optional:
            rows = spans[node.message_id]
            if sum(r.kept for r in rows) <= 1:
                continue  # every node keeps at least one span
            rows[span.index] = Span(**{**span.__dict__, "kept": False})
            texts[node.message_id] = retained_text(rows)
            current -= span.tokens
            if current <= budget:
                current = count(render(texts))
                if current <= budget:
                    break
    after = count(render(texts)) if current != before else before
    return CompressionResult(tuple(s for n in nodes for s in spans[n.message_id]), texts, before, after,
                             after <= budget)


def truncate_to_budget(text: str, count: Callable[[str], int], budget: int) -> str:
    """The w/o-compression ablation: cut the serialized context at B tokens (binary search on characters)."""
    if count(text) <= budget:
        return text
    count_prefix = prefix_counter(text, count)
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_prefix(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


_LINE_START = re.compile(r"\n(?=[^\s/])")


def prefix_counter(text: str, count: Callable[[str], int]) -> Callable[[int], int]:
    """n -> count(text[:n]). A counter whose counts add up at line starts (`count.adds_at_line_starts`,
    tmem.models.llm.tokens) counts each whole line before n once, and from the last line start before n only the
    rest: the same numbers without counting the context again for every probe of the binary search (a context of
    thousands of tokens is cut after about 15 probes; 600 cuts were 7.6 s of `figures --check`)."""
    if not getattr(count, "adds_at_line_starts", False):
        return lambda n: count(text[:n])
    starts = [0, *(m.end() for m in _LINE_START.finditer(text))]
    before = [0]  # before[i] = count(text[:starts[i]]), summed line by line as far as a probe needed

    def count_prefix(n: int) -> int:
        i = bisect_left(starts, n) - 1  # the last line start before n
        if i < 0:
            return count(text[:n])
        while len(before) <= i:
            j = len(before)
            before.append(before[-1] + count(text[starts[j - 1]:starts[j]]))
        return before[i] + count(text[starts[i]:n])
    return count_prefix


def budget_cut(lines: Sequence[tuple[str | None, str]], count: Callable[[str], int], budget: int, context: str,
               reason: str) -> tuple[str, tuple[Cut, ...]]:
    """The serialized passages (tmem.pipeline.linearize.forest_lines / flat_lines) cut at B tokens, and a Cut for
    each message whose line the cut shortened or removed (none when the text fits)."""
    text = "\n".join(line for _, line in lines)
    kept = truncate_to_budget(text, count, budget)
    return kept, cuts_at(lines, len(kept), context, reason)


def cuts_at(lines: Sequence[tuple[str | None, str]], kept_chars: int, context: str, reason: str) -> tuple[Cut, ...]:
    """The messages of `lines` not whole within the first `kept_chars` characters of their joined text."""
    cuts, start = [], 0
    for message_id, line in lines:
        end = start + len(line)
        if message_id is not None and end > kept_chars:
            cuts.append(Cut(message_id, context, max(0, kept_chars - start), len(line), reason))
        start = end + 1  # the newline
    return tuple(cuts)


def whatif_budget(nodes: Sequence[ForestNode], query: str, by_id: Mapping, idf: Callable[[str], float],
                  count: Callable[[str], int], budget: int) -> CompressionResult:
    """Compression alone, re-run over a stored forest with another budget B (the explorer's what-if): the same
    spans, g_q and protections as the pipeline's compression stage, over the forest as the answer model sees it
    (`by_id`: its messages, masked as for the answer); nothing after compression is re-run."""
    return compress_forest(nodes, query, idf, count, lambda texts: serialize_forest(nodes, by_id, texts), budget)
