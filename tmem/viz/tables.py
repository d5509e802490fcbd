"""Failures and Compare view models over batch results (rows shaped like `Store.RUN_RESULT_COLUMNS`).

A row's verdict is "correct", "wrong", "error" (the run failed) or "no verdict" (no gold answer). A wrong row's
failure category is the first stage that lost the gold evidence (tmem.funnel). Recall is gold
evidence units recovered into R'(q) over units (App. A.4). Questions are aligned across variants by
(scope, question id).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from tmem.funnel import FAILURE_CATEGORIES
from tmem.viz.answers import readable
from tmem.viz.safe import esc

VERDICTS = ("correct", "wrong", "error", "no verdict")
CHANGES = ("improved", "regressed", "unchanged", "missing")


def verdicts(results: pd.DataFrame) -> pd.Series:
    def one(status: object, correct: object) -> str:
        if status not in (None, "ok") and not (isinstance(status, float) and np.isnan(status)):
            return "error"
        if correct is None or (isinstance(correct, float) and np.isnan(correct)) or correct is pd.NA:
            return "no verdict"
        return "correct" if bool(correct) else "wrong"
    return pd.Series([one(s, c) for s, c in zip(results["status"], results["correct"])], index=results.index,
                     dtype=object)


def with_verdicts(results: pd.DataFrame) -> pd.DataFrame:
    out = results.copy()
    out["verdict"] = verdicts(results) if len(results) else pd.Series(dtype=object)
    return out


def filter_results(results: pd.DataFrame, *, variant: str | None = None, qtype: str | None = None,
                   verdict: str | None = None, scope: str | None = None, failure: str | None = None) -> pd.DataFrame:
    """Rows matching every given filter (None = any)."""
    out = with_verdicts(results)
    for column, value in (("variant", variant), ("qtype", qtype), ("verdict", verdict), ("scope", scope),
                          ("failure", failure)):
        if value:
            out = out[out[column].fillna("(none)") == value]
    return out


def failure_counts(results: pd.DataFrame) -> dict[str, int]:
    """{category: count} in pipeline order, then "correct" and "error", for the clickable counts."""
    frame = with_verdicts(results)
    wrong = frame[frame["verdict"] == "wrong"]
    counts = {c: int((wrong["failure"] == c).sum()) for c in FAILURE_CATEGORIES}
    unattributed = int(wrong["failure"].isna().sum())
    if unattributed:
        counts["unattributed"] = unattributed
    counts["correct"] = int((frame["verdict"] == "correct").sum())
    counts["error"] = int((frame["verdict"] == "error").sum())
    return counts


def failure_view(results: pd.DataFrame, category: str | None) -> pd.DataFrame:
    """Rows for one clicked count: a failure category, "correct", "error", "unattributed", or all rows."""
    frame = with_verdicts(results)
    if category in ("correct", "error"):
        frame = frame[frame["verdict"] == category]
    elif category == "unattributed":
        frame = frame[(frame["verdict"] == "wrong") & frame["failure"].isna()]
    elif category:
        frame = frame[frame["failure"] == category]
    columns = ["scope", "question_id", "qtype", "variant", "verdict", "failure", "failure_detail", "error", "units",
               "units_recovered", "evidence_messages", "backend", "config_hash"]
    out = frame[[c for c in columns if c in frame.columns]].reset_index(drop=True)
    for column in ("failure_detail", "error"):  # no Python list syntax in what a person reads
        if column in out.columns:
            out[column] = [readable(v) for v in out[column]]
    return out


# Columns of free text a reader came for: at 1100 px a wide table's last columns are off screen, so these go
# right after the identifying columns (text_first) and the app gives them a large width.
TEXT_COLUMNS = ("text", "state then", "superseded by", "reason", "question", "answer", "gold answer", "detail")


def text_first(columns: Sequence[str], lead: int) -> list[str]:
    """`columns` with the TEXT_COLUMNS among them moved right after the first `lead` other columns."""
    texts = [c for c in columns if c in TEXT_COLUMNS]
    rest = [c for c in columns if c not in TEXT_COLUMNS]
    return rest[:lead] + texts + rest[lead:]


def _cell(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def dashes(frame: pd.DataFrame) -> pd.DataFrame:
    """For display: "—" in every empty cell. A column with gaps becomes text (Arrow needs one type per column;
    exports keep the raw frame)."""
    out = frame.copy()
    if out.empty:  # nothing to fill; an empty column's map keeps its dtype (datetime), which `|` refuses
        return out
    for column in out.columns:
        blank = [isinstance(v, str) and not v.strip() for v in out[column]]
        empty = out[column].isna().to_numpy() | np.array(blank, dtype=bool)
        if empty.any():
            out[column] = ["—" if gap else _cell(v) for v, gap in zip(out[column], empty)]
    return out


def readable_cell(value: object) -> object:
    """One cell as a person reads it: yes / no for a flag, "a, b" for a tuple or list, "—" for nothing, at most three
    decimals; role labels joined by "|" (a stored backend label) as "a · b". Numbers stay numbers."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, tuple | list | frozenset | set):
        return ", ".join(str(readable_cell(v)) for v in value) or "—"
    if isinstance(value, float):
        return round(value, 3)
    return value


def readable_frame(frame: pd.DataFrame, labels: Sequence[str] = ("backend",)) -> pd.DataFrame:
    """For display: every cell through `readable_cell`, "—" in empty ones (`dashes`), and in the `labels` columns a
    stored backend label's "|" as " · "."""
    out = frame.copy()
    for column in out.columns:
        values = [readable_cell(v) for v in out[column]]
        if any(isinstance(v, str) for v in values) and not all(isinstance(v, str) for v in values):
            values = [str(v) if not isinstance(v, float) else _cell(v) for v in values]  # one type per column
        if column in labels:
            values = [v.replace("|", " · ") if isinstance(v, str) else v for v in values]
        out[column] = pd.Series(values, index=out.index, dtype=object) if values else out[column]
    return dashes(out)


def _summary(frame: pd.DataFrame) -> dict[str, float]:
    judged = frame[frame["verdict"].isin(["correct", "wrong"])]
    units = pd.to_numeric(frame["units"], errors="coerce").sum()
    found = pd.to_numeric(frame["units_recovered"], errors="coerce").sum()
    return {"n": len(frame), "accuracy": (judged["verdict"] == "correct").mean() if len(judged) else np.nan,
            "recall": found / units if units else np.nan}


def accuracy_by_type(results: pd.DataFrame, baseline: str, variants: Sequence[str]) -> pd.DataFrame:
    """Per question type (and "all"): accuracy and recall of the baseline and each variant, with deltas."""
    frame = with_verdicts(results)
    types = ["all"] + sorted(t for t in frame["qtype"].dropna().unique())
    rows = []
    for qtype in types:
        part = frame if qtype == "all" else frame[frame["qtype"] == qtype]
        base = _summary(part[part["variant"] == baseline])
        row = {"question type": qtype, "n": base["n"], f"{baseline} acc": base["accuracy"],
               f"{baseline} recall": base["recall"]}
        for v in variants:
            s = _summary(part[part["variant"] == v])
            row.update({f"{v} acc": s["accuracy"], f"Δacc {v}": s["accuracy"] - base["accuracy"],
                        f"{v} recall": s["recall"], f"Δrecall {v}": s["recall"] - base["recall"]})
        rows.append(row)
    return pd.DataFrame(rows)


def per_question(results: pd.DataFrame, baseline: str, other: str) -> pd.DataFrame:
    """One row per question of either variant: both verdicts and whether `other` improved on the baseline."""
    frame = with_verdicts(results)
    keep = ["scope", "question_id", "qtype", "verdict", "failure", "config_hash", "backend"]
    left = frame[frame["variant"] == baseline][keep]
    right = frame[frame["variant"] == other][keep]
    merged = left.merge(right, on=["scope", "question_id"], how="outer", suffixes=(" (baseline)", f" ({other})"))
    merged["qtype"] = merged["qtype (baseline)"].fillna(merged[f"qtype ({other})"])

    def change(a: object, b: object) -> str:
        if a not in ("correct", "wrong") or b not in ("correct", "wrong"):
            return "missing" if a is np.nan or b is np.nan or pd.isna(a) or pd.isna(b) else "unchanged"
        return "unchanged" if a == b else ("improved" if b == "correct" else "regressed")
    merged["change"] = [change(a, b) for a, b in zip(merged["verdict (baseline)"], merged[f"verdict ({other})"])]
    front = ["scope", "question_id", "qtype", "change", "verdict (baseline)", f"verdict ({other})",
             "failure (baseline)", f"failure ({other})"]
    rest = [c for c in merged.columns if c not in front and not c.startswith("qtype (")]
    for column in front[4:]:  # no verdict / no failure reads "—", not None or nan
        merged[column] = merged[column].astype(object).where(merged[column].notna(), "—")
    return merged[front + rest].sort_values(["change", "scope", "question_id"]).reset_index(drop=True)


def heatmap_frame(results: pd.DataFrame, variants: Sequence[str], only_changed: bool = False) -> pd.DataFrame:
    """question × variant matrix: 1 correct, 0 wrong, NaN missing / no verdict / error."""
    frame = with_verdicts(results)
    frame = frame[frame["variant"].isin(variants)]
    frame = frame.assign(key=frame["scope"].astype(str) + " / " + frame["question_id"].astype(str),
                         value=frame["verdict"].map({"correct": 1.0, "wrong": 0.0}))
    matrix = frame.pivot_table(index="key", columns="variant", values="value", aggfunc="last", dropna=False)
    matrix = matrix.reindex(columns=[v for v in variants if v in matrix.columns])
    if only_changed and len(matrix.columns) > 1:
        matrix = matrix[matrix.nunique(axis=1, dropna=True) > 1]
    return matrix


def heatmap_figure(matrix: pd.DataFrame) -> go.Figure:
    """Green = correct, red = wrong, blank = missing; hover names question and variant (escaped)."""
    y = [esc(k) for k in matrix.index]
    x = [esc(c) for c in matrix.columns]
    text = [[f"{esc(k)}<br>{esc(c)}: " + ("correct" if v == 1 else "wrong" if v == 0 else "—")
             for c, v in zip(matrix.columns, row)] for k, row in zip(matrix.index, matrix.to_numpy())]
    z = [[None if pd.isna(v) else float(v) for v in row] for row in matrix.to_numpy()]
    fig = go.Figure(go.Heatmap(z=z, x=x, y=y, zmin=0, zmax=1, hoverinfo="text", text=text,
                               colorscale=[[0, "#e03131"], [1, "#2f9e44"]], showscale=False, xgap=2, ygap=1))
    fig.update_layout(height=int(min(1400, max(260, 90 + 18 * len(y)))), margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      yaxis={"autorange": "reversed", "type": "category"}, xaxis={"side": "top", "type": "category"})
    return fig
