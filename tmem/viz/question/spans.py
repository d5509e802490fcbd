"""Compressed spans (paper Sec. 4.3, Eq. 6-7) as escaped HTML: each forest node's text in linearization order,
indented by depth, omitted spans struck through and muted, protected spans underlined with the reason, and the
token counts before and after compression. `omitted_gold` lists gold evidence messages that lost text, so the app
can warn that compression removed part of the answer's evidence. `span_table` lists every span with its g_q,
tokens, fate and why it was protected; `with_budget` is a stored trace with the spans of compression re-run alone
at another budget B (tmem.pipeline.compression.whatif_budget), for the Spans tab's what-if. `cut_table` lists, beside
the omitted spans, the messages whose line the cut at B shortened or removed (the trace's Cut records: contexts
over B after compression, the variants without compression, every flat list).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import pandas as pd

from tmem.analysis.funnel import cuts_of
from tmem.pipeline.compression import whatif_budget
from tmem.pipeline.masking import hidden_from_answer, mask
from tmem.types import Gold, Span, Trace
from tmem.viz.question.evidence import statuses
from tmem.viz.question.forest import BORDER, EDGE_STYLE, OTHER_EDGE
from tmem.viz.safe import esc


@dataclass(frozen=True)
class TokenSummary:
    before: int
    after: int
    budget_met: bool
    spans: int
    omitted: int
    counter: str


def token_summary(trace: Trace) -> TokenSummary:
    return TokenSummary(trace.tokens_before_compression, trace.tokens_after_compression, trace.budget_met,
                        len(trace.spans), sum(not s.kept for s in trace.spans), trace.token_counter)


def spans_by_message(trace: Trace) -> dict[str, list[Span]]:
    out: dict[str, list[Span]] = defaultdict(list)
    for s in trace.spans:
        out[s.message_id].append(s)
    return {k: sorted(v, key=lambda s: s.index) for k, v in out.items()}


def omitted_gold(trace: Trace, gold: Gold | None) -> list[tuple[str, list[str]]]:
    """[(gold message id, [omitted span texts])] for gold evidence that compression cut."""
    if gold is None:
        return []
    ids = gold.evidence_ids
    return [(mid, [s.text for s in spans if not s.kept])
            for mid, spans in spans_by_message(trace).items() if mid in ids and any(not s.kept for s in spans)]


def _span_html(s: Span) -> str:
    if not s.kept:
        return (f'<del title="omitted: g={s.density:.2f} ({s.tokens} tokens)" '
                f'style="color:#9a9a9a;text-decoration-color:#c92a2a">{esc(s.text)}</del>')
    if s.protected:
        return (f'<span title="protected: {esc(s.protected)}" style="border-bottom:1px dotted #495057">'
                f"{esc(s.text)}</span>")
    return f"<span>{esc(s.text)}</span>"


def span_markup(trace: Trace, gold: Gold | None = None, changed_only: bool = False) -> str:
    """One block per forest node: header (index, relation, time, author, id, statuses), then its spans."""
    marks = statuses(trace, gold)
    spans = spans_by_message(trace)
    cut = {c.message_id: c for c in cuts_of(trace) if c.context == "forest"}
    blocks = []
    for n in trace.nodes:
        own = spans.get(n.message_id, [])
        if changed_only and not any(not s.kept for s in own) and n.message_id not in cut:
            continue
        kept = sum(s.tokens for s in own if s.kept)
        total = sum(s.tokens for s in own)
        body = " ".join(_span_html(s) for s in own) if own else esc(n.text)
        colour = (EDGE_STYLE.get(n.relation) or OTHER_EDGE)["color"] if n.parent_index else "#495057"
        border = BORDER["gold"] if n.message_id in marks.gold else "#dee2e6"
        tags = ", ".join(marks.of(n.message_id) + (["cut at B"] if n.message_id in cut else []))
        if n.message_id in cut:
            border = "#c92a2a"
        tokens = f" · {kept}/{total} tokens kept" if own else ""
        blocks.append(
            f'<div style="margin:4px 0 4px {n.depth * 22}px;padding:4px 8px;border-left:4px solid {colour};'
            f'border:1px solid {border};border-left-width:4px;border-radius:4px">'
            f'<div style="font-size:0.8em;color:#495057"><b>[{n.index}]</b> {esc(n.relation)} · tree {n.tree} · '
            f"{n.timestamp:%Y-%m-%d %H:%M} · {esc(n.author or '?')} · <code>{esc(n.message_id)}</code>"
            f"{' · ' + esc(tags) if tags else ''}{tokens}</div>"
            f'<div style="font-size:0.92em;line-height:1.45">{body}</div></div>')
    if not blocks:
        return '<div style="color:#868e96">No node lost text to compression or to the cut at B.</div>'
    return '<div class="tmem-spans">' + "".join(blocks) + "</div>"


def whatif(trace: Trace, scope, config, count, budget: int) -> Trace:
    """The trace with compression alone re-run at budget B over its forest as the answer model saw it."""
    by_id = {m.id: m for m in mask([scope.by_id[n.message_id] for n in trace.nodes], hidden_from_answer(config))}
    return with_budget(trace, whatif_budget(trace.nodes, trace.question.text, by_id, scope.idf, count, budget))


def with_budget(trace: Trace, result) -> Trace:
    """The trace with the spans and token counts of a what-if compression run (`CompressionResult`); the answers
    stay those of the stored run."""
    return replace(trace, spans=result.spans, tokens_before_compression=result.tokens_before,
                   tokens_after_compression=result.tokens_after, budget_met=result.budget_met)


def span_table(trace: Trace, gold: Gold | None = None, changed_only: bool = False) -> pd.DataFrame:
    """One row per span in linearization order: node, message, span text, tokens, g_q (query gain), g_q per token
    (the order compression omits by), kept or omitted, and why a span was protected."""
    order = {n.message_id: n.index for n in trace.nodes}
    golds = gold.evidence_ids if gold else frozenset()
    lost = {s.message_id for s in trace.spans if not s.kept}
    rows = [{"node": order.get(s.message_id), "message": s.message_id, "gold": "yes" if s.message_id in golds
             else "", "span": s.index + 1, "text": s.text, "tokens": s.tokens, "g_q": round(s.gain, 3),
             "g_q per token": round(s.density, 4), "fate": "kept" if s.kept else "omitted",
             "protected": s.protected or ""}
            for s in sorted(trace.spans, key=lambda s: (order.get(s.message_id, 0), s.index))
            if not changed_only or s.message_id in lost]
    return pd.DataFrame(rows, columns=["node", "message", "gold", "span", "text", "tokens", "g_q", "g_q per token",
                                       "fate", "protected"])


CUT_COLUMNS = ["context", "message", "gold", "kept", "reason"]


def cut_table(trace: Trace, gold: Gold | None = None) -> pd.DataFrame:
    """The messages the cut at B shortened or removed, per answer context, gold first: what the answer model did not
    read whole (the evidence verdict counts none of them)."""
    golds = gold.evidence_ids if gold else frozenset()
    rows = [{"context": c.context, "message": c.message_id, "gold": "yes" if c.message_id in golds else "",
             "kept": "unknown" if c.line_chars < 0 else "nothing" if not c.kept_chars
             else f"{c.kept_chars} of {c.line_chars} characters", "reason": c.reason} for c in cuts_of(trace)]
    frame = pd.DataFrame(rows, columns=CUT_COLUMNS)
    return frame.sort_values(["gold", "context"], ascending=[False, True], kind="stable").reset_index(drop=True)
