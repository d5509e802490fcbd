"""The Compare view's significance models: per question type and overall, the paired delta of a measure with its
bootstrap interval, McNemar's p and an outcome class (win / loss / inconclusive) that decides the colour -- an
interval that spans 0 is never coloured as a win (tmem.analysis.significance). A whisker chart (static SVG, for the
app and the report). Pure functions over result rows.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from tmem.analysis import significance as sig
from tmem.viz.batch.compare import signed_pp
from tmem.viz.safe import esc

COLOURS = {sig.WIN: "#2b8a3e", sig.LOSS: "#c92a2a", sig.INCONCLUSIVE: "#868e96", sig.NO_DATA: "#adb5bd"}
MEASURE_LABEL = {"evidence": "evidence complete", "accuracy": "accuracy", "recall": "key-evidence recall"}
EXPLAIN = ("Δ = variant − baseline over the questions both answered; bar: 95% paired bootstrap interval "
           f"({sig.RESAMPLES} resamples, seed {sig.SEED}); p: exact McNemar test on the questions where the two "
           "disagree. The per-type rows are several tests at once, so their p is Holm-adjusted over the question "
           "types (Holm p) and their colour follows the adjusted p; the overall row is one test, unadjusted. Green "
           f"(win) or red (loss) only when the interval excludes 0 and p < {sig.ALPHA}; grey: inconclusive, the "
           "difference may be noise.")
COLUMNS = ("group", "n", "baseline", "variant", "Δ", "95% CI", "McNemar p", "Holm p", "outcome")


def comparison_rows(results: pd.DataFrame, baseline: str, variant: str, measure: str,
                    seed: int = sig.SEED, by_type: bool = True) -> pd.DataFrame:
    """One row per group (overall first, then question types unless `by_type` is False) with the raw figures
    (delta, ci_low, ci_high, p_mcnemar, p_holm: per-type rows, outcome, colour) and their display text (COLUMNS).
    The overall row is the same either way (its bootstrap has its own seed; Holm adjusts the types only)."""
    # only the columns the pairing reads: a run's reviewed rows carry ~50 (answers, questions, details), and
    # copying, indexing and sorting them all was most of each comparison's time on Compare's first visit
    needed = {*sig.KEY, "variant", "qtype", "units", "units_recovered", *sig.COLUMN.values()}
    results = results[[c for c in results.columns if c in needed]]
    deltas = sig.paired_deltas(results, variant, baseline, measure, seed=seed, by_type=by_type)
    rows = []
    for d in deltas:
        rows.append({"group": d.group, "n": d.n, "baseline": pct(d.baseline), "variant": pct(d.variant),
                     "Δ": signed_pp(d.delta), "95% CI": interval_text(d.ci_low, d.ci_high),
                     "McNemar p": sig.p_text(d.p_mcnemar).replace("-", "—"),
                     "Holm p": sig.p_text(d.p_holm).replace("-", "—"), "outcome": d.outcome, "p_holm": d.p_holm,
                     "delta": d.delta, "ci_low": d.ci_low, "ci_high": d.ci_high, "p_mcnemar": d.p_mcnemar,
                     "colour": COLOURS[d.outcome], "measure": measure, "baseline_name": baseline,
                     "variant_name": variant})
    return pd.DataFrame(rows)


def outcome_style(outcome: object) -> str:
    """CSS for a cell by its outcome: coloured and bold for a win or loss, plain grey otherwise."""
    colour = COLOURS.get(str(outcome))
    if str(outcome) in (sig.WIN, sig.LOSS):
        return f"color: {colour}; font-weight: 600"
    return f"color: {colour}" if colour else ""


def pct(value: float | None) -> str:
    return "—" if value is None or math.isnan(value) else f"{100 * value:.1f}%"


def interval_text(low: float | None, high: float | None) -> str:
    if low is None or math.isnan(low):
        return "—"
    return f"[{100 * low:+.1f}, {100 * high:+.1f}] pp"


def whisker_svg(rows: pd.DataFrame, width: int = 640) -> str:
    """Deltas as dots with interval whiskers, one line per group, coloured by outcome, a zero line: static SVG (no
    script) for the report and the Compare page, a <title> per group; escaped."""
    data = rows[rows["n"] > 0].reset_index(drop=True)
    if not len(data):
        return "<p><i>no paired questions</i></p>"
    left, right, row_h, top = 190, 20, 26, 22
    reach = max([abs(v) for v in (*data["ci_low"], *data["ci_high"]) if not math.isnan(v)] + [0.05])
    span = min(1.0, math.ceil(reach * 10) / 10)
    x = lambda v: left + (width - left - right) * (v + span) / (2 * span)  # noqa: E731
    height = top + row_h * len(data) + 24
    body = [f'<line x1="{x(0):.1f}" x2="{x(0):.1f}" y1="{top - 8}" y2="{height - 20}" stroke="#495057"/>',
            _label(x(-span), height - 6, f"{-100 * span:+.0f} pp", "start"),
            _label(x(0), height - 6, "0", "middle"), _label(x(span), height - 6, f"{100 * span:+.0f} pp", "end")]
    for i, r in data.iterrows():
        y = top + row_h * i + row_h / 2
        body.append(_label(4, y + 4, f"{r['group']} (n={r['n']})", "start"))
        body.append(f'<g><title>{esc(r["group"])}: {esc(r["Δ"])} {esc(r["95% CI"])}, McNemar p '
                    f'{esc(r["McNemar p"])}, Holm p {esc(r["Holm p"])}: {esc(r["outcome"])}</title>'
                    f'<line x1="{x(r["ci_low"]):.1f}" x2="{x(r["ci_high"]):.1f}" y1="{y:.0f}" y2="{y:.0f}" '
                    f'stroke="{r["colour"]}" stroke-width="3"/>'
                    f'<circle cx="{x(r["delta"]):.1f}" cy="{y:.0f}" r="5" fill="{r["colour"]}"/></g>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="paired deltas with intervals" '
            f'width="100%" viewBox="0 0 {width} {height}" style="max-width:{width}px;font-family:sans-serif">'
            + "".join(body) + "</svg>")


def _label(x: float, y: float, text: str, anchor: str) -> str:
    return f'<text x="{x:.1f}" y="{y:.0f}" font-size="11" text-anchor="{anchor}">{esc(text)}</text>'


def pairs_table(results: pd.DataFrame, names: Sequence[str], measure: str) -> pd.DataFrame:
    """The overall row of every pair (first variant against each other one), for a summary."""
    frames = [comparison_rows(results, other, names[0], measure).head(1) for other in names[1:]]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS))
