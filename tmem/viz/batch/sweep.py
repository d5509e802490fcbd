"""The Sweep view's models: a sweep's per-question rows (`Store.sweep_results`) summarised per cell
(tmem.analysis.sweep_summary, shared with tmem.evaluation.sweep), laid out as a heat-map over two swept parameters
(a line over one; any further parameter held at a chosen value), the paper's default marked, and the questions of
one cell with what opens them on the Question page. Pure functions over frames; every label that comes from data is
escaped.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from tmem.analysis.sweep_summary import axes, hashable, summarize, values
from tmem.config import field_help
from tmem.viz.safe import esc

# metric -> (label, format); accuracy only where the cells ran the whole pipeline
METRICS: dict[str, tuple[str, str]] = {
    "recall": ("key-evidence recall (Eq. 10)", "{:.3f}"),
    "evidence_complete": ("evidence complete (R'(q) holds every gold unit)", "{:.3f}"),
    "seed_recall": ("recall of the BM25 seeds alone", "{:.3f}"),
    "accuracy": ("accuracy (judged)", "{:.3f}"),
    "mean_messages": ("mean evidence messages", "{:.1f}"),
    "mean_seconds": ("mean seconds per question", "{:.3f}"),
}
PAPER_MARK = "★"


def paper_default(name: str) -> Any:
    """The paper's default of a parameter (tmem.config's field default)."""
    return field_help()[name][0]


def metrics_available(summary: pd.DataFrame) -> list[str]:
    return [m for m in METRICS if m in summary and summary[m].notna().any()]


def fix_others(summary: pd.DataFrame, shown: Sequence[str], fixed: Mapping[str, Any]) -> pd.DataFrame:
    """The cells whose parameters not shown on the chart have the chosen values."""
    keep = np.ones(len(summary), dtype=bool)
    for name, value in fixed.items():
        if name not in shown:
            keep &= np.array([hashable(v) == value for v in summary[name]], dtype=bool)
    return summary[keep]


def _text(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def heatmap_figure(summary: pd.DataFrame, x: str, y: str, metric: str) -> go.Figure:
    """Metric over two parameters (one cell per combination, value written in it); the paper's default cell
    outlined and starred; a cell's customdata is its key, for opening it."""
    xs, ys = values(summary, x), values(summary, y)
    label, fmt = METRICS[metric]
    z = [[None] * len(xs) for _ in ys]
    keys = [[""] * len(xs) for _ in ys]
    sizes = [[""] * len(xs) for _ in ys]
    noise = within_noise(summary, metric)
    for row in summary.to_dict("records"):  # parameter names hold dots: not attribute names
        i, j = ys.index(hashable(row[y])), xs.index(hashable(row[x]))
        z[i][j] = None if pd.isna(row[metric]) else float(row[metric])
        keys[i][j] = row["cell"]
        sizes[i][j] = f"<br>n={_n(row, metric)}" + (f" {NOISE_MARK}" if noise.get(row["cell"]) else "")
    text = [[("" if v is None else fmt.format(v)) + (f" {PAPER_MARK}" if _is_default(x, xs[j]) and
                                                    _is_default(y, ys[i]) else "") + sizes[i][j]
             for j, v in enumerate(r)] for i, r in enumerate(z)]
    xt, yt = [esc(_text(v)) for v in xs], [esc(_text(v)) for v in ys]
    hover = f"{esc(x)}=%{{x}}<br>{esc(y)}=%{{y}}<br>{esc(label)}: %{{z}}<extra></extra>"
    fig = go.Figure(go.Heatmap(z=z, x=xt, y=yt, text=text, texttemplate="%{text}", customdata=keys,
                               colorscale="Viridis", colorbar={"title": esc(metric)}, hovertemplate=hover))
    cells = [(xt[j], yt[i], keys[i][j]) for i in range(len(ys)) for j in range(len(xs)) if keys[i][j]]
    # a heat-map cell cannot be clicked in Streamlit; a near-transparent marker over each one can (opens the cell)
    fig.add_trace(go.Scatter(x=[c[0] for c in cells], y=[c[1] for c in cells], customdata=[c[2] for c in cells],
                             mode="markers", marker={"size": 36, "symbol": "square", "opacity": 0.02},
                             hoverinfo="skip", showlegend=False, name="open"))
    if any(_is_default(x, v) for v in xs) and any(_is_default(y, v) for v in ys):
        j = next(k for k, v in enumerate(xs) if _is_default(x, v))
        i = next(k for k, v in enumerate(ys) if _is_default(y, v))
        fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5, xref="x", yref="y",
                      line={"color": "#e03131", "width": 3})
    fig.update_xaxes(type="category", title=esc(x))
    fig.update_yaxes(type="category", title=esc(y))
    # the title is the metric alone: Plotly does not wrap a title, and the legend's sentence was cut at 1100 px
    # (the page shows HEATMAP_LEGEND under the chart)
    fig.update_layout(height=420, margin={"l": 10, "r": 10, "t": 30, "b": 10}, title=esc(label))
    return fig


NOISE_MARK = "≈"
HEATMAP_LEGEND = (f"{PAPER_MARK} and red outline: the paper's default · n per cell: the gold units (a recall) or "
                  f"questions it is a share of · {NOISE_MARK}: within noise of the default (1.96 standard errors)")


def _n(row: Mapping, metric: str) -> int:
    """What a cell's figure is a share of: gold units for a recall, questions otherwise."""
    return int(row["units"]) if "recall" in metric and not pd.isna(row.get("units")) else int(row["questions"])


def within_noise(summary: pd.DataFrame, metric: str) -> dict[str, bool]:
    """{cell: its figure is within 1.96 standard errors of the paper-default cell's} (binomial, unpaired; a
    cautious mark: a 1-in-32 difference on 32 units is inside it)."""
    names = axes(summary)
    default = [r for r in summary.to_dict("records") if all(_is_default(n, hashable(r["params"].get(n)))
                                                           for n in names)]
    if not default or pd.isna(default[0][metric]):
        return {}
    p0, n0 = float(default[0][metric]), _n(default[0], metric)
    out = {}
    for r in summary.to_dict("records"):
        if pd.isna(r[metric]) or r["cell"] == default[0]["cell"]:
            continue
        p, n = float(r[metric]), _n(r, metric)
        se = np.sqrt(max(p0 * (1 - p0), 1e-9) / max(n0, 1) + max(p * (1 - p), 1e-9) / max(n, 1))
        out[r["cell"]] = abs(p - p0) < 1.96 * se
    return out


def line_figure(summary: pd.DataFrame, x: str, metric: str) -> go.Figure:
    """Metric over one parameter, the paper's default marked by a dashed line (categories for non-numbers)."""
    xs = values(summary, x)
    label, _ = METRICS[metric]
    by = {hashable(v): m for v, m in zip(summary[x], summary[metric])}
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in xs)
    px = xs if numeric else [esc(_text(v)) for v in xs]
    fig = go.Figure(go.Scatter(x=px, y=[None if pd.isna(by[v]) else float(by[v]) for v in xs], mode="lines+markers",
                               customdata=[summary[summary[x].map(hashable) == v]["cell"].iloc[0] for v in xs],
                               hovertemplate=f"{esc(x)}=%{{x}}<br>{esc(label)}: %{{y}}<extra></extra>"))
    default = paper_default(x)
    if any(_is_default(x, v) for v in xs) or (numeric and isinstance(default, int | float)):
        at = default if numeric else esc(_text(default))
        fig.add_vline(x=at, line_dash="dash", line_color="#e03131",
                      annotation_text=f"{PAPER_MARK} paper default {esc(_text(default))}")
    fig.update_layout(height=380, margin={"l": 10, "r": 10, "t": 30, "b": 10}, xaxis_title=esc(x),
                      yaxis_title=esc(label), title=esc(label))
    return fig


def _is_default(name: str, value: Any) -> bool:
    default = paper_default(name)
    return hashable(value) == (tuple(default) if isinstance(default, list) else default)


def cell_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary as a table: grid values first, the paper's default cell flagged, the question count and the rates
    (recall, evidence complete, seed recall, accuracy), then the other counts and timings, then the cell's key
    (its grid values again, ~40 characters: first, it pushed the figures off screen at 1100 px)."""
    names = axes(summary)
    table = summary.drop(columns=["params"]).copy()
    table.insert(0, "paper default", [PAPER_MARK if all(_is_default(n, hashable(p.get(n))) for n in names) else ""
                                      for p in summary["params"]])
    for n in names:
        table[n] = [_text(v) for v in table[n]]
    if "mean_seconds" in table:  # milliseconds are what a timing can tell apart
        table["mean_seconds"] = pd.to_numeric(table["mean_seconds"]).round(3)
    # the figures a reader compares right after the question count, the counts behind them after: units and
    # recovered stood first and pushed evidence_complete (what the page leads with offline) off screen at 1100 px
    lead = [c for c in ("questions", *METRICS) if c in table and c not in ("mean_messages", "mean_seconds")]
    rest = [c for c in table.columns if c not in names and c not in ("paper default", "cell", *lead)]
    return table[["paper default", *names, *lead, *rest, *(["cell"] if "cell" in table else [])]]


def cell_questions(rows: pd.DataFrame, cell: str) -> pd.DataFrame:
    """The questions of one cell: what each measured, and the variant and `cfg=` that reopen it."""
    part = rows[rows["cell"] == cell]
    keep = ["scope", "question_id", "qtype", "units", "units_recovered", "seed_units_recovered", "evidence_messages",
            "correct", "correct_flat", "seconds", "error", "variant", "overrides"]
    out = part[keep].reset_index(drop=True)
    for column in ("correct", "correct_flat"):  # a verdict a person reads, not True / False / None
        out[column] = [_verdict(v) for v in out[column]]
    out["error"] = ["—" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in out["error"]]
    return out


def _verdict(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return "—"
    return "correct" if bool(value) else "wrong"


__all__ = ["METRICS", "PAPER_MARK", "axes", "cell_questions", "cell_table", "fix_others", "heatmap_figure",
           "line_figure", "metrics_available", "paper_default", "summarize", "values"]
