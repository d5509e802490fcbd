"""Compressed spans (paper Sec. 4.3, Eq. 6-7) as escaped HTML: each forest node's text in linearization order,
indented by depth, omitted spans struck through and muted, protected spans underlined with the reason, and the
token counts before and after compression. `omitted_gold` lists gold evidence messages that lost text, so the app
can warn that compression removed part of the answer's evidence.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tmem.types import Gold, Span, Trace
from tmem.viz.evidence import statuses
from tmem.viz.forest import BORDER, EDGE_STYLE, OTHER_EDGE
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
    st = statuses(trace, gold)
    spans = spans_by_message(trace)
    blocks = []
    for n in trace.nodes:
        own = spans.get(n.message_id, [])
        if changed_only and not any(not s.kept for s in own):
            continue
        kept = sum(s.tokens for s in own if s.kept)
        total = sum(s.tokens for s in own)
        body = " ".join(_span_html(s) for s in own) if own else esc(n.text)
        colour = (EDGE_STYLE.get(n.relation) or OTHER_EDGE)["color"] if n.parent_index else "#495057"
        border = BORDER["gold"] if n.message_id in st.gold else "#dee2e6"
        tags = ", ".join(st.of(n.message_id))
        tokens = f" · {kept}/{total} tokens kept" if own else ""
        blocks.append(
            f'<div style="margin:4px 0 4px {n.depth * 22}px;padding:4px 8px;border-left:4px solid {colour};'
            f'border:1px solid {border};border-left-width:4px;border-radius:4px">'
            f'<div style="font-size:0.8em;color:#495057"><b>[{n.index}]</b> {esc(n.relation)} · tree {n.tree} · '
            f"{n.timestamp:%Y-%m-%d %H:%M} · {esc(n.author or '?')} · <code>{esc(n.message_id)}</code>"
            f"{' · ' + esc(tags) if tags else ''}{tokens}</div>"
            f'<div style="font-size:0.92em;line-height:1.45">{body}</div></div>')
    if not blocks:
        return '<div style="color:#868e96">No node lost text to compression.</div>'
    return '<div class="tmem-spans">' + "".join(blocks) + "</div>"
