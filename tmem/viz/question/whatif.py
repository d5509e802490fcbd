"""What-if on k, shown: per question a table of its gold units (BM25 rank, the k that raising k alone would need,
in the seeds, found), and for a corpus the share of units BM25 alone reaches as k grows against what the variant
found at its own k -- the paper's Exp-2 argument (tmem.analysis.whatif_k). SVG, for the app and the
report. Pure functions over UnitRank lists (tmem.analysis.whatif_k.units_for_traces computes them).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from tmem.analysis.whatif_k import KCurve, UnitRank

EXPLAIN = ("For each gold evidence unit: its rank in the scope's BM25 ranking for the question's query (the best of "
           "its acceptable messages), i.e. the k at which raising k alone would have found it ('never': no word in "
           "common with the query), whether it was among the run's own k seeds, and whether the variant's evidence "
           "R'(q) holds it. Computed from the stored trace and the scope's BM25 index, no model call.")
TABLE_COLUMNS = ("question", "type", "unit", "messages", "BM25 rank (= k needed)", "in top-k seeds", "found")


def unit_table(units: Sequence[UnitRank]) -> pd.DataFrame:
    """The per-question (or per-run) table in TABLE_COLUMNS, found-beyond-seeds rows first."""
    rows = [{"question": u.question_id, "type": u.qtype or "—", "unit": u.unit + 1,
             "messages": " / ".join(u.message_ids), "BM25 rank (= k needed)": "never" if u.rank is None else u.rank,
             "in top-k seeds": f"yes (k={u.k})" if u.in_seeds else f"no (k={u.k})",
             "found": ("yes, by discovery" if u.found_beyond_seeds and u.discovery else "yes") if u.found else "no",
             "_order": (not u.found_beyond_seeds, u.question_id, u.unit)} for u in units]
    frame = pd.DataFrame(rows, columns=[*TABLE_COLUMNS, "_order"])
    return frame.sort_values("_order").drop(columns="_order").reset_index(drop=True)


def curve_text(curve: KCurve) -> str:
    """One sentence for the chart's caption."""
    if not curve.units:
        return "no gold evidence units"
    match = ("BM25 alone never reaches it in these scopes" if curve.k_to_match is None
             else f"BM25 alone needs k = {curve.k_to_match} to find as many")
    return (f"The variant found {100 * curve.found_share:.1f}% of {curve.units} gold units at k = {curve.k}; "
            f"{match}; {curve.unreachable} unit(s) share no word with the query, so no k finds them.")


def curve_svg(curve: KCurve, width: int = 640, height: int = 240) -> str:
    """The curve as static SVG (the report and Failures' *What-if on k across the run*; no plotly): BM25 alone per k
    (blue line), the variant's own recall (green dashed); a <title> on each point."""
    if not curve.units:
        return "<p><i>no gold evidence units</i></p>"
    left, bottom, top, right = 44, 34, 12, 12
    n = len(curve.ks)
    x = lambda i: left + (width - left - right) * i / max(n - 1, 1)  # noqa: E731
    y = lambda v: top + (height - top - bottom) * (1 - v)  # noqa: E731
    points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(curve.bm25_share) if not math.isnan(v))
    body = [f'<line x1="{left}" x2="{width - right}" y1="{y(0):.0f}" y2="{y(0):.0f}" stroke="#adb5bd"/>',
            f'<polyline points="{points}" fill="none" stroke="#1c7ed6" stroke-width="2"/>',
            f'<line x1="{left}" x2="{width - right}" y1="{y(curve.found_share):.1f}" '
            f'y2="{y(curve.found_share):.1f}" stroke="#2b8a3e" stroke-width="2" stroke-dasharray="6 4">'
            f"<title>variant at k = {curve.k}: {100 * curve.found_share:.1f}%</title></line>"]
    for i, (k, v) in enumerate(zip(curve.ks, curve.bm25_share)):
        body.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="#1c7ed6"><title>k = {k}: '
                    f"{100 * v:.1f}%</title></circle>"
                    f'<text x="{x(i):.1f}" y="{height - bottom + 14}" font-size="10" text-anchor="middle">{k}</text>')
    for v in (0, 0.5, 1):
        body.append(f'<text x="{left - 4}" y="{y(v) + 4:.0f}" font-size="10" text-anchor="end">{100 * v:.0f}%</text>')
    body.append(f'<text x="{(left + width) / 2:.0f}" y="{height - 4}" font-size="11" text-anchor="middle">k (BM25 '
                "seeds); blue: share of gold units BM25 alone finds; green dashed: the variant at its own k</text>")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="what-if on k" width="100%" '
            f'viewBox="0 0 {width} {height}" style="max-width:{width}px;font-family:sans-serif">' + "".join(body)
            + "</svg>")
