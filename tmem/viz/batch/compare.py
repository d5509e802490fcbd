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

from tmem.analysis import verdicts as vd
from tmem.types import Gold, Trace
from tmem.viz.batch.tables import with_verdicts
from tmem.viz.safe import esc

JUDGED = ("correct", "wrong")
UP, DOWN = "#2b8a3e", "#c92a2a"
# per measure: the verdicts that count, each one's value (heat-map, per-question change) and the column suffix
SCORED = {vd.ACCURACY: {vd.CORRECT: 1.0, vd.WRONG: 0.0},
          vd.EVIDENCE: {vd.COMPLETE: 1.0, vd.PARTIAL: 0.5, vd.NONE: 0.0}}
SHORT = {vd.ACCURACY: "acc", vd.EVIDENCE: "evidence"}
AXIS = {vd.ACCURACY: "accuracy (%)", vd.EVIDENCE: "evidence complete (%)"}


def verdict_rows(results: pd.DataFrame, measure: str = vd.ACCURACY) -> pd.DataFrame:
    """Rows with `verdict` under the measure: the judged answer, or the evidence verdict (tmem.analysis.verdicts)."""
    return with_verdicts(results) if measure == vd.ACCURACY else vd.with_primary(results, measure)


def answered(results: pd.DataFrame, variants: Sequence[str], measure: str = vd.ACCURACY) -> dict[str, int]:
    """{variant: questions it has a verdict of the measure for} — before any alignment."""
    frame = verdict_rows(results, measure)
    ok = frame[frame["verdict"].isin(list(SCORED[measure]))]
    return {v: int(ok[ok["variant"] == v][["scope", "question_id"]].drop_duplicates().shape[0]) for v in variants}


def common_rows(results: pd.DataFrame, variants: Sequence[str], measure: str = vd.ACCURACY) -> pd.DataFrame:
    """The rows of `variants` restricted to the questions every one of them has a verdict of the measure for."""
    frame = verdict_rows(results, measure)
    frame = frame[frame["variant"].isin(variants) & frame["verdict"].isin(list(SCORED[measure]))]
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


def _rates(part: pd.DataFrame, measure: str = vd.ACCURACY) -> tuple[float, float]:
    top = vd.CORRECT if measure == vd.ACCURACY else vd.COMPLETE
    acc = float((part["verdict"] == top).mean()) if len(part) else np.nan
    units = pd.to_numeric(part["units"], errors="coerce").sum()
    found = pd.to_numeric(part["units_recovered"], errors="coerce").sum()
    return acc, (float(found / units) if units else np.nan)


def summary(results: pd.DataFrame, baseline: str, others: Sequence[str], measure: str = vd.ACCURACY) -> pd.DataFrame:
    """Per question type (and "all") over the common questions: n, each variant's share (accuracy, or evidence
    complete) and recall, and the signed deltas of the others against the baseline ("+3.3 pp")."""
    variants = [baseline, *[o for o in others if o != baseline]]
    # only the columns read below: each per-type, per-variant filter then copies 7 columns, not the run's ~40
    rows_ = common_rows(results, variants, measure).reindex(
        columns=["scope", "question_id", "qtype", "variant", "verdict", "units", "units_recovered"])
    types = ["all"] + sorted(t for t in rows_["qtype"].dropna().unique())
    short = SHORT[measure]
    out = []
    for qtype in types:
        part = rows_ if qtype == "all" else rows_[rows_["qtype"] == qtype]
        base_acc, base_rec = _rates(part[part["variant"] == baseline], measure)
        row = {"question type": qtype, "n": int(part[["scope", "question_id"]].drop_duplicates().shape[0]),
               f"{baseline} {short}": base_acc}
        for v in variants[1:]:
            acc, _ = _rates(part[part["variant"] == v], measure)
            row.update({f"{v} {short}": acc, f"Δ {short} {v}": signed_pp(acc - base_acc)})
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


def bar_figure(table: pd.DataFrame, variants: Sequence[str], measure: str = vd.ACCURACY) -> go.Figure:
    """The measure per question type, one bar per variant (grouped), n in the axis labels; escaped text."""
    short = SHORT[measure]
    types = [f"{esc(t)} (n={n})" for t, n in zip(table["question type"], table["n"])]
    palette = ["#868e96", "#1c7ed6", "#f08c00", "#7048e8", "#0ca678", "#d6336c"]  # the baseline grey
    fig = go.Figure([go.Bar(name=esc(v), x=types, marker_color=palette[i % len(palette)],
                            y=[None if pd.isna(a) else 100 * a for a in table[f"{v} {short}"]],
                            text=["" if pd.isna(a) else f"{100 * a:.0f}%" for a in table[f"{v} {short}"]],
                            textposition="outside", hovertemplate="%{x}: %{y:.1f}%<extra>" + esc(v) + "</extra>")
                     for i, v in enumerate(variants)])
    fig.update_layout(barmode="group", height=360, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      yaxis={"title": AXIS[measure], "range": [0, 110]}, legend={"orientation": "h", "y": 1.1})
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


CHANGES = ("improved", "regressed", "unchanged", "missing")


def per_question(results: pd.DataFrame, baseline: str, other: str, measure: str = vd.ACCURACY) -> pd.DataFrame:
    """One row per question of either variant: both verdicts under the measure and whether `other` improved on
    the baseline (evidence: none < partial < complete); "missing" where a side has no verdict of the measure."""
    frame = verdict_rows(results, measure)
    keep = ["scope", "question_id", "qtype", "verdict", "failure", "config_hash", "backend"]
    left = frame[frame["variant"] == baseline][[c for c in keep if c in frame]]
    right = frame[frame["variant"] == other][[c for c in keep if c in frame]]
    merged = left.merge(right, on=["scope", "question_id"], how="outer", suffixes=(" (baseline)", f" ({other})"))
    merged["qtype"] = merged["qtype (baseline)"].fillna(merged[f"qtype ({other})"])
    value = SCORED[measure]

    def change(a: object, b: object) -> str:
        if a not in value or b not in value:
            return "missing"
        return "unchanged" if value[a] == value[b] else ("improved" if value[b] > value[a] else "regressed")
    merged["change"] = [change(a, b) for a, b in zip(merged["verdict (baseline)"], merged[f"verdict ({other})"])]
    front = ["scope", "question_id", "qtype", "change", "verdict (baseline)", f"verdict ({other})",
             "failure (baseline)", f"failure ({other})"]
    rest = [c for c in merged.columns if c not in front and not c.startswith("qtype (")]
    for column in front[4:]:  # no verdict / no failure reads "—", not None or nan
        merged[column] = merged[column].astype(object).where(merged[column].notna(), "—")
    return merged[front + rest].sort_values(["change", "scope", "question_id"]).reset_index(drop=True)


def heatmap_frame(results: pd.DataFrame, variants: Sequence[str], measure: str = vd.ACCURACY,
                  only_changed: bool = False) -> pd.DataFrame:
    """question × variant matrix of the measure's values (SCORED), NaN where a variant has no verdict of it."""
    frame = verdict_rows(results, measure)
    frame = frame[frame["variant"].isin(variants)]
    frame = frame.assign(key=frame["scope"].astype(str) + " / " + frame["question_id"].astype(str),
                         value=frame["verdict"].map(SCORED[measure]))
    matrix = frame.pivot_table(index="key", columns="variant", values="value", aggfunc="last", dropna=False)
    matrix = matrix.reindex(columns=[v for v in variants if v in matrix.columns]).dropna(how="all")
    if only_changed and len(matrix.columns) > 1:
        matrix = matrix[matrix.nunique(axis=1, dropna=True) > 1]
    return matrix


def heatmap_figure(matrix: pd.DataFrame, measure: str = vd.ACCURACY) -> go.Figure:
    """Green = correct / evidence complete, amber = partial, red = wrong / none, blank = no verdict; the hover
    names question, variant and verdict (escaped)."""
    names = {v: k for k, v in SCORED[measure].items()}
    y = [esc(k) for k in matrix.index]
    x = [esc(c) for c in matrix.columns]
    text = [[f"{esc(k)}<br>{esc(c)}: " + (names.get(v, "—") if not pd.isna(v) else "—")
             for c, v in zip(matrix.columns, row)] for k, row in zip(matrix.index, matrix.to_numpy())]
    z = [[None if pd.isna(v) else float(v) for v in row] for row in matrix.to_numpy()]
    fig = go.Figure(go.Heatmap(z=z, x=x, y=y, zmin=0, zmax=1, hoverinfo="text", text=text, showscale=False,
                               colorscale=[[0, "#e03131"], [0.5, "#f59f00"], [1, "#2f9e44"]], xgap=2, ygap=1))
    fig.update_layout(height=int(min(1400, max(260, 90 + 18 * len(y)))), margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      yaxis={"autorange": "reversed", "type": "category"}, xaxis={"side": "top", "type": "category"})
    return fig


DEMO_SOURCE = ("generated demo corpus, n = {n} questions: a synthetic chat built so that BM25 misses the decisive "
               "updates (docs/corpora.md, \"The demo corpus\"); its figures show the mechanism, not T-Mem's accuracy "
               "on real conversations")


def source_note(corpus: str, demo_corpus: str, n: int) -> str:
    """The source line every figure of the demo carries ("" for another corpus)."""
    return DEMO_SOURCE.format(n=n) if corpus == demo_corpus else ""


def identical_variants(results: pd.DataFrame, variants: Sequence[str]) -> list[tuple[str, str, str]]:
    """Pairs of variants whose answer contexts held the same number of messages and the same gold units on every
    shared question, with why their evidence verdicts cannot differ there."""
    cols = ["scope", "question_id", "evidence_messages", "units_in_context"]
    if not all(c in results for c in cols + ["variant"]):
        return []
    by = {v: results[results["variant"] == v][cols].set_index(["scope", "question_id"]).sort_index()
          for v in variants}
    out = []
    for i, a in enumerate(variants):
        for b in variants[i + 1:]:
            left, right = by[a].align(by[b], join="inner")
            if len(left) and left.astype(str).equals(right.astype(str)):
                out.append((a, b, f"on all {len(left)} shared questions both gave the answer model as many messages "
                                  "holding the same gold units: what differs between them (the layout, a forest or a "
                                  "list, or a stage that added nothing here) does not reach the evidence verdict"))
    return out
