"""The Compare view's models, built so that a comparison cannot mislead: accuracy and recall only over the questions
that every compared variant answered and had judged (a variant run on 1 question is not set against one run on 3),
n per variant, signed deltas in percentage points, a grouped bar chart per question type, and an evidence diff of
two traces (messages gained / lost against the baseline, gold first). Pure functions over result rows and traces.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tmem.analysis import verdicts as vd
from tmem.types import Gold, Trace
from tmem.viz.batch.tables import with_verdicts
from tmem.viz.charts import legend_and_svg, swatch
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


PALETTE = ("#868e96", "#1c7ed6", "#f08c00", "#7048e8", "#0ca678", "#d6336c")  # the baseline grey
BAR_HEIGHT, BAR_TOP, BAR_BOTTOM, BAR_LEFT = 300, 18, 46, 5.0  # px, px, px, % of the width


def bar_svg(table: pd.DataFrame, variants: Sequence[str], measure: str = vd.ACCURACY) -> str:
    """The measure per question type, one bar per variant (grouped, a legend above, the value over each bar), n in
    the type's label; drawn as SVG in the page (no plotly: docs/app.md, "Browser work per page") with horizontal
    positions in % of the width, so the text keeps its size. Every text is escaped; one line (st.markdown)."""
    short = SHORT[measure]
    legend = "".join(swatch(PALETTE[i % len(PALETTE)], esc(v)) for i, v in enumerate(variants))
    groups = len(table)
    slot = (100 - BAR_LEFT - 1) / max(groups, 1)  # % per question type
    width = slot * 0.8 / max(len(variants), 1)
    y = lambda v: BAR_TOP + (BAR_HEIGHT - BAR_TOP - BAR_BOTTOM) * (1 - v / 100)  # noqa: E731
    body = [f'<text x="0" y="10" font-size="11" fill="#555">{esc(AXIS[measure])}</text>']
    for v in (0, 25, 50, 75, 100):
        body.append(f'<line x1="{BAR_LEFT}%" x2="99%" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e8ef"/>'
                    f'<text x="{BAR_LEFT - 0.5}%" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end" '
                    f'fill="#555">{v}</text>')
    for g, (qtype, n) in enumerate(zip(table["question type"], table["n"])):
        left = BAR_LEFT + slot * g + slot * 0.1
        body.append(f'<text x="{left + slot * 0.4:.2f}%" y="{BAR_HEIGHT - BAR_BOTTOM + 16}" font-size="11" '
                    f'text-anchor="middle" fill="#333">{esc(qtype)}<tspan x="{left + slot * 0.4:.2f}%" dy="13" '
                    f'fill="#777">n={int(n)}</tspan></text>')
        for i, v in enumerate(variants):
            value = table[f"{v} {short}"].iloc[g]
            if pd.isna(value):
                continue
            x, pct = left + width * i, 100 * float(value)
            body.append(f'<rect x="{x:.2f}%" y="{y(pct):.1f}" width="{width * 0.92:.2f}%" '
                        f'height="{y(0) - y(pct):.1f}" fill="{PALETTE[i % len(PALETTE)]}"><title>{esc(qtype)} · '
                        f'{esc(v)}: {pct:.1f}%</title></rect>'
                        f'<text x="{x + width * 0.46:.2f}%" y="{y(pct) - 3:.1f}" font-size="10" text-anchor="middle" '
                        f'fill="#333">{pct:.0f}%</text>')
    return legend_and_svg(legend, body, BAR_HEIGHT, f"{esc(AXIS[measure])} per question type", BAR_LEFT)


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


HEAT_COLOURS = {1.0: "#2f9e44", 0.5: "#f59f00", 0.0: "#e03131"}


def heatmap_html(matrix: pd.DataFrame, measure: str = vd.ACCURACY) -> str:
    """The question × variant matrix as an HTML table: each cell names its verdict on its colour (green = correct /
    evidence complete, amber = partial, red = wrong / none, blank = no verdict) and its <title> names question,
    variant and verdict. A table, not a plotly heat-map (docs/app.md, "Browser work per page"); every text escaped;
    one line, so st.markdown keeps it one raw HTML block."""
    names = {v: k for k, v in SCORED[measure].items()}
    cell = "padding:1px 8px;border:1px solid #fff;font-size:12px;text-align:center"
    head = "".join(f'<th style="{cell}">{esc(c)}</th>' for c in matrix.columns)
    rows = []
    for key, values in zip(matrix.index, matrix.to_numpy()):
        cells = "".join(
            f'<td style="{cell};background:{HEAT_COLOURS.get(float(v), "#fff") if not pd.isna(v) else "#fff"};'
            f'color:#fff" title="{esc(key)} · {esc(c)}: {esc(names.get(v, "—") if not pd.isna(v) else "—")}">'
            f'{esc(names.get(v, "") if not pd.isna(v) else "")}</td>' for c, v in zip(matrix.columns, values))
        rows.append(f'<tr><td style="{cell};text-align:left;color:#333">{esc(key)}</td>{cells}</tr>')
    return (f'<div style="max-height:640px;overflow-y:auto;margin-bottom:12px"><table role="grid" '
            f'aria-label="question by variant" style="border-collapse:collapse;font-family:sans-serif"><thead><tr>'
            f'<th style="{cell}">question</th>'
            f'{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


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
