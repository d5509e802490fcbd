"""Failures and Compare view-models for what tmem.evaluation.review adds to result rows: the evidence verdict and
the stale-answer categories, per variant and per row, with the sentence that explains each category where it is
shown. Pure functions over result rows that carry the review columns (tmem.evaluation.gold_versions.rescore
returns them for a stored run under any gold version).
"""
from __future__ import annotations

import pandas as pd

from tmem.stale import EXPLAIN, ROLLBACK_MISSED, STALE

EVIDENCE_EXPLAIN = ("evidence complete: the answer context after compression holds every gold evidence unit "
                    "(answerable questions with gold evidence only)")
CATEGORY_COLUMN = {STALE: "stale", ROLLBACK_MISSED: "rollback"}


def counts_table(rows: pd.DataFrame, variants: list[str] | None = None) -> pd.DataFrame:
    """Per variant: evidence complete (count and share of judged), stale answers, revisions without rollback."""
    variants = variants or list(dict.fromkeys(rows["variant"]))
    out = []
    for v in variants:
        part = rows[rows["variant"] == v]
        judged = part["evidence_complete"].dropna().astype(bool)
        out.append({"variant": v, "evidence complete": f"{int(judged.sum())} of {len(judged)}"
                    + (f" ({100 * judged.mean():.1f}%)" if len(judged) else ""),
                    STALE: int(_flag(part, "stale").sum()), ROLLBACK_MISSED: int(_flag(part, "rollback").sum())})
    return pd.DataFrame(out, columns=["variant", "evidence complete", STALE, ROLLBACK_MISSED])


def category_rows(rows: pd.DataFrame, category: str) -> pd.DataFrame:
    """The rows flagged with a stale category, with its detail as `why`."""
    column = CATEGORY_COLUMN[category]
    part = rows[_flag(rows, column)].copy()
    part["why"] = part[f"{column}_detail"]
    return part


def evidence_text(value: object) -> str:
    """complete / incomplete / — for a row's evidence_complete."""
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return "—"
    return "complete" if bool(value) else "incomplete"


def review_text(row) -> str:
    """The stale categories of one row, joined ("" when none)."""
    return "; ".join(c for c, col in CATEGORY_COLUMN.items() if truthy(row.get(col)))


def explain(category: str) -> str:
    return EXPLAIN[category]


def _flag(rows: pd.DataFrame, column: str) -> pd.Series:
    if column not in rows:
        return pd.Series(False, index=rows.index)
    return rows[column].map(truthy).astype(bool)


def truthy(value: object) -> bool:
    return value is not None and value is not pd.NA and not (isinstance(value, float) and pd.isna(value)) \
        and bool(value)
