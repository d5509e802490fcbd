"""A question's view as one self-contained HTML report for stakeholders: question, answers side by side with the
gold answer and verdicts (offline answers labelled), the evidence funnel, the anchor timeline and the evidence
forest as static SVG (tmem.viz.report.svg), recovered messages, the compressed spans, the linearized context, stage
timings and backends. Every value is escaped; the page loads nothing and runs no script (its
Content-Security-Policy forbids both).
"""
from __future__ import annotations

from datetime import datetime

import pandas as pd

from tmem.types import Gold, Trace
from tmem.viz.batch.tables import readable_frame
from tmem.viz.question.spans import omitted_gold, span_markup, token_summary
from tmem.viz.question.structuring import stand_in_note
from tmem.viz.report.svg import forest_svg, timeline_svg
from tmem.viz.safe import esc

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#212529;line-height:1.4}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem;border-bottom:1px solid #dee2e6}
table{border-collapse:collapse;font-size:.85rem;width:100%}td,th{border:1px solid #dee2e6;padding:3px 6px;
text-align:left;vertical-align:top}pre{background:#f8f9fa;padding:.75rem;white-space:pre-wrap;font-size:.8rem}
.cols{display:flex;gap:1rem}.cols>div{flex:1;border:1px solid #dee2e6;border-radius:6px;padding:.6rem}
.ok{color:#2b8a3e;font-weight:600}.bad{color:#c92a2a;font-weight:600}.off{background:#fff3bf;padding:0 4px}
.warn{background:#fff5f5;border:1px solid #ffc9c9;padding:.5rem}"""


def table_html(frame: pd.DataFrame, limit: int = 200) -> str:
    """An escaped HTML table (pandas' to_html with escape=True escapes headers and cells), its cells read as the
    explorer's tables read them (yes / no, "—", at most three decimals: tables.readable_frame)."""
    if frame is None or not len(frame):
        return "<p><i>none</i></p>"
    return readable_frame(frame.head(limit)).to_html(index=False, escape=True, border=0, na_rep="")


def _answer_box(trace: Trace, presentation: str) -> str:
    answer, verdict = trace.answer(presentation), trace.verdict(presentation)
    if answer is None:
        return ""
    tag = ' <span class="off">offline stand-in</span>' if answer.offline else ""
    mark = "" if verdict is None else (' <span class="ok">correct</span>' if verdict.correct
                                       else ' <span class="bad">incorrect</span>')
    return (f"<div><b>{esc(presentation)} answer</b>{tag}{mark}<p>{esc(answer.text)}</p>"
            f"<small>{esc(answer.backend)} · {answer.context_tokens} context tokens · {esc(answer.reason)}</small>"
            + (f"<br><small>judge: {esc(verdict.raw)}</small>" if verdict else "") + "</div>")


def question_report(trace: Trace, gold: Gold | None, recovered: pd.DataFrame, funnel: pd.DataFrame | None,
                    stages: pd.DataFrame, backends: pd.DataFrame, messages: pd.DataFrame | None = None,
                    extra: str = "") -> str:
    """The full HTML document (UTF-8); with the scope's `messages`, it includes the anchor timeline. `extra`: HTML
    the caller built and escaped (the run report's navigation and review), placed after the heading."""
    q = trace.question
    tokens = token_summary(trace)
    topics = dict(zip(messages["id"], messages["topic"])) if messages is not None else None
    gold_box = (f"<div><b>gold answer</b><p>{esc(gold.answer)}</p>"
                + (f"<small>superseded: {esc(gold.superseded)}</small>" if gold.superseded else "") + "</div>"
                ) if gold and gold.answer else ""
    cut = omitted_gold(trace, gold)
    warn = "".join(f'<p class="warn">Compression omitted text of gold evidence {esc(mid)}: '
                   f"{esc(' / '.join(parts))}</p>" for mid, parts in cut)
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><meta http-equiv='Content-Security-Policy' "
        f"content=\"{CSP}\"><title>T-Mem report: {esc(q.id)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{esc(q.text)}</h1><p>corpus <b>{esc(trace.corpus)}</b> · scope <b>{esc(q.scope)}</b> · question "
        f"<b>{esc(q.id)}</b> · type {esc(q.type or '—')} · asked by {esc(q.asking_user or '—')} · variant "
        f"<b>{esc(trace.variant)}</b> · config {esc(trace.config_hash)} · generated "
        f"{datetime.now():%Y-%m-%d %H:%M}</p>", extra,
        f"<h2>Answers</h2><div class='cols'>{_answer_box(trace, 'forest')}{_answer_box(trace, 'flat')}"
        f"{gold_box}</div>",
        "<h2>Evidence funnel (gold evidence units surviving each stage)</h2>" + table_html(funnel),
        ("<h2>Anchor timeline</h2><p><small>Lanes by topic; green bands: clusters with density ρ above μ (grey: "
         "below); dashed: padded windows; blue dots: BM25 anchors sized by score; orange diamonds: recovered "
         "messages; green ticks: gold evidence. Hover for details.</small></p>" + timeline_svg(trace, messages, gold)
         ) if messages is not None else "",
        "<h2>Recovered messages (evidence that was not a BM25 anchor)</h2>" + table_html(recovered),
        "<h2>Evidence forest</h2><p><small>Laid out as in the explorer: time left to right, one band per topic, "
        "one-message trees in the strip below; each box shows the message's first words over author and time, ★ "
        "the answer chain. UPDATE edges solid red, EXPAND dashed blue; blue fill: anchor, orange: recovered; thick "
        "green border: gold evidence; dashed border: text compressed. Hover a node for its message; scroll "
        "sideways for later messages.</small></p>"
        + (f"<p class='off'>{esc(note)}</p>" if (note := stand_in_note(trace)) else "")
        + forest_svg(trace, gold, topics),
        f"<h2>Compressed spans</h2><p>{tokens.before} → {tokens.after} tokens "
        f"({esc(tokens.counter)}); {tokens.omitted} of {tokens.spans} spans omitted; budget "
        f"{'met' if tokens.budget_met else 'NOT met'}.</p>{warn}{span_markup(trace, gold)}",
        f"<h2>Linearized context (as the answer model saw it)</h2><pre>{esc(trace.context)}</pre>",
        "<h2>Stages</h2>" + table_html(stages), "<h2>Backends</h2>" + table_html(backends),
        "</body></html>",
    ]
    return "\n".join(parts)
