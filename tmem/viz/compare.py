"""The Compare view's models, built so that a comparison cannot mislead: accuracy and recall only over the questions
that every compared variant answered and had judged (a variant run on 1 question is not set against one run on 3),
n per variant, signed deltas in percentage points, a grouped bar chart per question type, and an evidence diff of
two traces (messages gained / lost against the baseline, gold first). Pure functions over result rows and traces.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from tmem.types import Gold, Trace
from tmem.viz.safe import esc
from tmem.viz.tables import with_verdicts

JUDGED = ("correct", "wrong")
UP, DOWN = "#2b8a3e", "#c92a2a"


def answered(results: pd.DataFrame, variants: Sequence[str]) -> dict[str, int]:
    """{variant: questions it answered with a verdict} — before any alignment."""
    frame = with_verdicts(results)
    ok = frame[frame["verdict"].isin(JUDGED)]
    return {v: int(ok[ok["variant"] == v][["scope", "question_id"]].drop_duplicates().shape[0]) for v in variants}


def common_rows(results: pd.DataFrame, variants: Sequence[str]) -> pd.DataFrame:
    """The rows of `variants` restricted to the questions every one of them answered with a verdict."""
    frame = with_verdicts(results)
    frame = frame[frame["variant"].isin(variants) & frame["verdict"].isin(JUDGED)]
    frame = frame.drop_duplicates(["variant", "scope", "question_id"], keep="last")
    keys = frame.groupby(["scope", "question_id"])["variant"].nunique()
    both = keys[keys == len(set(variants))].index
    return frame.set_index(["scope", "question_id"]).loc[lambda f: f.index.isin(both)].reset_index()


def signed_pp(delta: float) -> str:
    """+3.3 pp / -12.5 pp / ±0.0 pp; "—" when undefined."""
    if delta is None or (isinstance(delta, float) and np.isnan(delta)):
        return "—"
    points = round(100 * delta, 1)
    return "±0.0 pp" if points == 0 else f"{points:+.1f} pp"


def _rates(part: pd.DataFrame) -> tuple[float, float]:
    acc = (part["verdict"] == "correct").mean() if len(part) else np.nan
    units = pd.to_numeric(part["units"], errors="coerce").sum()
    found = pd.to_numeric(part["units_recovered"], errors="coerce").sum()
    return acc, (found / units if units else np.nan)


def summary(results: pd.DataFrame, baseline: str, others: Sequence[str]) -> pd.DataFrame:
    """Per question type (and "all") over the common questions: n, each variant's accuracy and recall, and the
    signed deltas of the others against the baseline ("+3.3 pp")."""
    variants = [baseline, *[o for o in others if o != baseline]]
    rows_ = common_rows(results, variants)
    types = ["all"] + sorted(t for t in rows_["qtype"].dropna().unique())
    out = []
    for qtype in types:
        part = rows_ if qtype == "all" else rows_[rows_["qtype"] == qtype]
        base_acc, base_rec = _rates(part[part["variant"] == baseline])
        row = {"question type": qtype, "n": int(part[["scope", "question_id"]].drop_duplicates().shape[0]),
               f"{baseline} acc": base_acc}
        for v in variants[1:]:
            acc, _ = _rates(part[part["variant"] == v])
            row.update({f"{v} acc": acc, f"Δ acc {v}": signed_pp(acc - base_acc)})
        row[f"{baseline} recall"] = base_rec
        for v in variants[1:]:
            _, rec = _rates(part[part["variant"] == v])
            row.update({f"{v} recall": rec, f"Δ recall {v}": signed_pp(rec - base_rec)})
        out.append(row)
    return pd.DataFrame(out)


def delta_colour(value: object) -> str:
    """CSS for a signed delta cell: green up, red down, nothing for zero or undefined."""
    text = str(value)
    if text.startswith("+"):
        return f"color: {UP}; font-weight: 600"
    if text.startswith("-"):
        return f"color: {DOWN}; font-weight: 600"
    return ""


def bar_figure(table: pd.DataFrame, variants: Sequence[str]) -> go.Figure:
    """Accuracy per question type, one bar per variant (grouped), n in the axis labels; escaped text."""
    types = [f"{esc(t)} (n={n})" for t, n in zip(table["question type"], table["n"])]
    palette = ["#868e96", "#1c7ed6", "#f08c00", "#7048e8", "#0ca678", "#d6336c"]  # the baseline grey
    fig = go.Figure([go.Bar(name=esc(v), x=types, marker_color=palette[i % len(palette)],
                            y=[None if pd.isna(a) else 100 * a for a in table[f"{v} acc"]],
                            text=["" if pd.isna(a) else f"{100 * a:.0f}%" for a in table[f"{v} acc"]],
                            textposition="outside", hovertemplate="%{x}: %{y:.1f}%<extra>" + esc(v) + "</extra>")
                     for i, v in enumerate(variants)])
    fig.update_layout(barmode="group", height=360, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      yaxis={"title": "accuracy (%)", "range": [0, 110]}, legend={"orientation": "h", "y": 1.1})
    return fig


def evidence_diff(baseline: Trace, other: Trace, gold: Gold | None, messages: pd.DataFrame) -> pd.DataFrame:
    """Messages `other` gave its answer model that the baseline did not ("gained") and the reverse ("lost"), gold
    evidence first, then gained before lost, then by time; message metadata from the scope's frame."""
    base, mine = set(baseline.evidence_ids), set(other.evidence_ids)
    gold_ids = gold.evidence_ids if gold else frozenset()
    by_id = messages.set_index("id", drop=False)
    rows = []
    for change, ids in (("gained", mine - base), ("lost", base - mine)):
        for mid in ids:
            m = by_id.loc[mid] if mid in by_id.index else None
            rows.append({"change": change, "gold": mid in gold_ids, "message_id": mid,
                         "timestamp": None if m is None else m["timestamp"],
                         "author": "—" if m is None else m["author"] or "—",
                         "topic": "—" if m is None else m["topic"] or "—", "text": "—" if m is None else m["text"]})
    frame = pd.DataFrame(rows, columns=["change", "gold", "message_id", "timestamp", "author", "topic", "text"])
    if not len(frame):
        return frame
    order = frame.assign(_g=~frame["gold"], _c=frame["change"] != "gained",
                         _t=frame["timestamp"].fillna(pd.Timestamp.max))
    return order.sort_values(["_g", "_c", "_t", "message_id"]).drop(columns=["_g", "_c", "_t"]).reset_index(drop=True)
