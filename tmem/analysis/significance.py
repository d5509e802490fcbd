"""Paired significance for comparing two variants on the same questions: a paired bootstrap confidence interval of
the delta and an exact McNemar test on the paired binary verdicts. Pure functions over result rows.

Every comparison is *paired*: only questions that both variants answered with a value of the measure count, and a
bootstrap resample draws whole questions, so both variants' outcomes on a question stay together.

- Measures: `evidence` (the answer context after compression holds every gold unit: what the pipeline decides
  when the answer came from an offline stand-in), `accuracy` (the judge's verdict: primary when a real model
  answered) and `recall` (key-evidence units recovered / units, Eq. 10, micro-averaged: the delta of two ratios).
- Delta = variant - baseline, in fractions (x 100 = percentage points).
- Interval: percentile bootstrap, `RESAMPLES` resamples of the paired questions with replacement, level `LEVEL`.
  The generator is numpy's PCG64 seeded with (`seed`, a CRC-32 of the group's name), so a group's interval does
  not depend on which other groups were computed, and the same rows and seed always give the same interval.
  A degenerate sample (every question's pair identical) has a zero-width interval at its delta.
- McNemar: two-sided exact binomial test on the discordant pairs, b = variant right and baseline wrong, c = the
  reverse: p = min(1, 2 * sum_{i <= min(b, c)} C(b + c, i) / 2^(b + c)); p = 1 when there is no discordant pair.
  Recall has no McNemar (its units are not independent binary outcomes per question).
- Outcome: "win" when the interval lies above 0 *and* McNemar's p < ALPHA (where it exists), "loss" when below 0
  and p < ALPHA, otherwise "inconclusive" -- an interval that spans 0 is never a win. With tiny n the bootstrap
  interval is over-confident (3 questions all gained give [1, 1]); McNemar's p (0.25 there) keeps it inconclusive.
- Multiple comparisons: the per-type rows of one comparison test one hypothesis per question type, so their
  McNemar p are Holm-adjusted over the types (`p_holm`, step-down: the i-th smallest of m times (m - i + 1), kept
  monotone, capped at 1), and a per-type outcome reads the adjusted p. The overall row is one test: unadjusted.
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

RESAMPLES = 2000
LEVEL = 0.95
ALPHA = 0.05
SEED = 0
CHUNK = 250  # resamples drawn at once: memory stays ~CHUNK x n indices, whatever the corpus size
MEASURES = ("evidence", "accuracy", "recall")
COLUMN = {"evidence": "evidence_complete", "accuracy": "correct"}
WIN, LOSS, INCONCLUSIVE, NO_DATA = "win", "loss", "inconclusive", "no data"
KEY = ["scope", "question_id"]


@dataclass(frozen=True)
class PairedDelta:
    """One comparison of `variant` against `baseline` on one group of paired questions."""

    group: str  # a question type or "overall"
    measure: str
    baseline_name: str
    variant_name: str
    n: int  # paired questions
    baseline: float
    variant: float
    delta: float
    ci_low: float
    ci_high: float
    p_mcnemar: float | None = None
    gains: int | None = None  # b: the variant right, the baseline wrong
    losses: int | None = None  # c: the reverse
    p_holm: float | None = None  # per-type rows: p_mcnemar Holm-adjusted over the question types

    @property
    def p(self) -> float | None:
        """The p the outcome reads: Holm-adjusted on a per-type row, McNemar's own on the overall row."""
        return self.p_holm if self.p_holm is not None else self.p_mcnemar

    @property
    def outcome(self) -> str:
        return outcome(self.n, self.ci_low, self.ci_high, self.p)

    def as_json(self) -> dict:
        out = {k: (_r(v) if isinstance(v, float) else v) for k, v in asdict(self).items()}
        for name in ("p_mcnemar", "p_holm"):  # 4 significant digits, not 4 decimals: 0.00098 is not 0.001
            if getattr(self, name) is not None:
                out[name] = float(f"{getattr(self, name):.4g}")
        return {**out, "outcome": self.outcome}


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (None: no test, left out of the family and None)."""
    tested = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    out: list[float | None] = [None] * len(pvalues)
    running, m = 0.0, len(tested)
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (integer arithmetic, then one division)."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2 ** n)


def bootstrap_ratio_delta(numerator: Sequence[float], denominator: Sequence[float] | None = None, *,
                          resamples: int = RESAMPLES, level: float = LEVEL,
                          rng: np.random.Generator | None = None) -> tuple[float, float, float]:
    """(delta, low, high) of sum(numerator) / sum(denominator) over questions resampled with replacement.

    For a binary measure numerator[q] = variant - baseline (in -1, 0, 1) and denominator = 1; for recall the
    numerator is the difference of units recovered and the denominator the question's gold units."""
    num = np.asarray(numerator, dtype=float)
    den = np.ones_like(num) if denominator is None else np.asarray(denominator, dtype=float)
    if not len(num) or den.sum() <= 0:
        return math.nan, math.nan, math.nan
    delta = float(num.sum() / den.sum())
    if np.allclose(num, delta * den, rtol=0, atol=1e-12):  # every question the same ratio: so is every resample
        return delta, delta, delta
    rng = rng or np.random.default_rng(SEED)
    stats = []
    for start in range(0, resamples, CHUNK):
        idx = rng.integers(0, len(num), size=(min(CHUNK, resamples - start), len(num)))
        d = den[idx].sum(axis=1)
        stats.append(np.divide(num[idx].sum(axis=1), d, out=np.full(len(d), np.nan), where=d > 0))
    values = np.concatenate(stats)
    values = values[~np.isnan(values)]
    tail = (1 - level) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return delta, float(low), float(high)


def outcome(n: int, low: float, high: float, p: float | None, alpha: float = ALPHA) -> str:
    """win / loss / inconclusive (module docstring); "no data" without paired questions."""
    if not n or math.isnan(low):
        return NO_DATA
    significant = p is None or p < alpha
    if low > 0 and significant:
        return WIN
    if high < 0 and significant:
        return LOSS
    return INCONCLUSIVE


def method_note() -> str:
    return (f"paired bootstrap {LEVEL:.0%} percentile interval, {RESAMPLES} resamples of the paired "
            f"questions, seed {SEED}; exact two-sided McNemar test; a win needs the interval above 0 and "
            f"p < {ALPHA}")


def p_text(p: float | None) -> str:
    """McNemar's p to three decimals ("<0.001" below), "-" where the measure has none."""
    return "-" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


def paired_frame(rows: pd.DataFrame, variant: str, baseline: str, measure: str) -> pd.DataFrame:
    """One row per question both variants have a value of `measure` for: qtype, b_*/v_* columns."""
    if measure == "recall":
        cols = ["units_recovered", "units"]
    elif measure in COLUMN:
        cols = [COLUMN[measure]]
    else:
        raise ValueError(f"unknown measure {measure!r}; one of {', '.join(MEASURES)}")
    missing = [c for c in KEY + ["variant", *cols] if c not in rows.columns]
    if missing:
        raise ValueError(f"result rows lack column(s) {', '.join(missing)} for measure {measure!r}")
    part = rows[rows["variant"].isin([variant, baseline])].copy()
    part["qtype"] = part["qtype"].fillna("untyped") if "qtype" in part else "untyped"
    for c in cols:
        part[c] = pd.to_numeric(part[c].astype("object"), errors="coerce")
    part = part.dropna(subset=cols).drop_duplicates(KEY + ["variant"], keep="last")
    if measure == "recall":
        part = part[part["units"] > 0]
    base = part[part["variant"] == baseline].set_index(KEY)
    other = part[part["variant"] == variant].set_index(KEY)
    both = base.merge(other[cols], left_index=True, right_index=True, suffixes=("_b", "_v"))
    return both.reset_index().sort_values(KEY, kind="stable").reset_index(drop=True)  # row order never matters


def paired_deltas(rows: pd.DataFrame, variant: str, baseline: str, measure: str, *, resamples: int = RESAMPLES,
                  seed: int = SEED, level: float = LEVEL, by_type: bool = True) -> list[PairedDelta]:
    """The comparison overall (first) and per question type (sorted), over the paired questions of `rows`
    (result rows with scope, question_id, variant, qtype and the measure's column(s))."""
    pairs = paired_frame(rows, variant, baseline, measure)
    groups = [("overall", pairs)]
    if by_type:
        groups += [(str(t), pairs[pairs["qtype"] == t]) for t in sorted(pairs["qtype"].unique())]
    out = []
    for name, part in groups:
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        out.append(_delta(part, name, measure, variant, baseline, rng, resamples, level))
    adjusted = holm([d.p_mcnemar for d in out[1:]])  # the question types are one family; overall stays as it is
    return out[:1] + [replace(d, p_holm=p) for d, p in zip(out[1:], adjusted)]


def _delta(part: pd.DataFrame, group: str, measure: str, variant: str, baseline: str, rng, resamples: int,
           level: float) -> PairedDelta:
    if measure == "recall":
        units = part["units_b"].to_numpy(float)
        rb, rv = part["units_recovered_b"].to_numpy(float), part["units_recovered_v"].to_numpy(float)
        total = units.sum()
        delta, low, high = bootstrap_ratio_delta(rv - rb, units, resamples=resamples, level=level, rng=rng)
        return PairedDelta(group, measure, baseline, variant, len(part), rb.sum() / total if total else math.nan,
                           rv.sum() / total if total else math.nan, delta, low, high)
    col = COLUMN[measure]
    xb, xv = part[f"{col}_b"].to_numpy(float) > 0, part[f"{col}_v"].to_numpy(float) > 0
    gains, losses = int((xv & ~xb).sum()), int((xb & ~xv).sum())
    delta, low, high = bootstrap_ratio_delta(xv.astype(float) - xb, resamples=resamples, level=level, rng=rng)
    n = len(part)
    return PairedDelta(group, measure, baseline, variant, n, xb.mean() if n else math.nan,
                       xv.mean() if n else math.nan, delta, low, high, mcnemar_exact(gains, losses), gains, losses)


def _r(value: float, digits: int = 4) -> float | None:
    return None if value is None or math.isnan(value) else round(float(value), digits)
