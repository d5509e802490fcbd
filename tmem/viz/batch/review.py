"""Failures and Compare view-models for what tmem.evaluation.review adds to result rows: the evidence verdict and
the stale-answer categories, per variant and per row, with the sentence that explains each category where it is
shown. Pure functions over result rows that carry the review columns (tmem.evaluation.gold_versions.rescore
returns them for a stored run under any gold version).
"""
from __future__ import annotations

import pandas as pd

from tmem.analysis import verdicts as vd
from tmem.analysis.funnel import ANSWER_WRONG, FAILURE_CATEGORIES
from tmem.analysis.stale import EXPLAIN, ROLLBACK_MISSED, STALE
from tmem.viz.question.answers import readable

EVIDENCE_EXPLAIN = ("evidence complete: the answer context (after compression and the cut at B) holds every gold "
                    "evidence unit (answerable questions with gold evidence only)")
CATEGORY_COLUMN = {STALE: "stale", ROLLBACK_MISSED: "rollback"}


def counts_table(rows: pd.DataFrame, variants: list[str] | None = None) -> pd.DataFrame:
    """Per variant: evidence complete (count and share of judged), Complete Chain Recall (questions with a gold
    UPDATE chain whose every message reached the context, tmem.analysis.chains), stale answers, revisions without
    rollback."""
    variants = variants or list(dict.fromkeys(rows["variant"]))
    out = []
    for v in variants:
        part = rows[rows["variant"] == v]
        judged = part["evidence_complete"].dropna().astype(bool)
        chains = part["chain_complete"].dropna().astype(bool) if "chain_complete" in part else judged[:0]
        out.append({"variant": v, "evidence complete": _share(judged), CHAIN_RECALL: _share(chains),
                    STALE: int(_flag(part, "stale").sum()), ROLLBACK_MISSED: int(_flag(part, "rollback").sum())})
    return pd.DataFrame(out, columns=["variant", "evidence complete", CHAIN_RECALL, STALE, ROLLBACK_MISSED])


CHAIN_RECALL = "complete chain recall"
CHAIN_EXPLAIN = ("complete chain recall (Exp-5): of the questions with a gold UPDATE chain, those whose every state "
                 "— original, revisions, rollback — reached the answer context whole")


def _share(flags: pd.Series) -> str:
    return f"{int(flags.sum())} of {len(flags)}" + (f" ({100 * flags.mean():.1f}%)" if len(flags) else "")


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
    """The stale categories of one row, joined, a stale answer with the rule that fired ("" when none)."""
    rule = row.get("stale_rule")
    return "; ".join(c + (f" ({rule})" if col == "stale" and isinstance(rule, str) and rule else "")
                     for c, col in CATEGORY_COLUMN.items() if truthy(row.get(col)))


def explain(category: str) -> str:
    return EXPLAIN[category]


def _flag(rows: pd.DataFrame, column: str) -> pd.Series:
    if column not in rows:
        return pd.Series(False, index=rows.index)
    return rows[column].map(truthy).astype(bool)


def truthy(value: object) -> bool:
    return value is not None and value is not pd.NA and not (isinstance(value, float) and pd.isna(value)) \
        and bool(value)


# ------------------------------------------------------------------ Failures: evidence-first verdicts and categories
NO_EVIDENCE_WRONG = "wrong, no gold evidence to attribute"
CATEGORY_EXPLAIN = {
    vd.COMPLETE: "the answer context (after compression and the cut at B) held every gold evidence unit",
    vd.CORRECT: "the judge found the answer correct",
    vd.NOT_SCORED: "abstention questions and questions without gold evidence have no unit to hold: not scored on "
                   "evidence (docs/evaluation.md); the stand-in's verdict is shown beside them",
    NO_EVIDENCE_WRONG: "a wrong answer to a question without gold evidence (an abstention question, or no evidence "
                       "annotated): no stage lost a unit, so none is blamed",
    vd.ERROR: "the run failed for this question (a role failed and a fallback was used): see the error column",
    **{k: f"{v} — a flag beside the verdict, not a verdict" for k, v in EXPLAIN.items()},
}


def category_counts(rows: pd.DataFrame, measure: str) -> dict[str, int]:
    """The clickable counts, in pipeline order: per stage that lost gold evidence (evidence: rows with partial or
    no evidence; accuracy: wrong rows, "answer wrong despite evidence" included), then the verdicts without a
    failure, then the stale flags (they overlap the others), then errors. Zero counts of optional ones are left out."""
    failing = _failing(rows, measure)
    counts = {c: int((failing["failure"] == c).sum()) for c in FAILURE_CATEGORIES if c != ANSWER_WRONG or
              measure == vd.ACCURACY}
    counts = {k: v for k, v in counts.items() if v}
    if measure == vd.ACCURACY:
        counts[NO_EVIDENCE_WRONG] = int(failing["failure"].isna().sum())
    fine = vd.COMPLETE if measure == vd.EVIDENCE else vd.CORRECT
    counts[fine] = int((rows["verdict"] == fine).sum())
    if measure == vd.EVIDENCE:
        counts[vd.NOT_SCORED] = int((rows["verdict"] == vd.NOT_SCORED).sum())
    for category, column in CATEGORY_COLUMN.items():
        counts[category] = int(_flag(rows, column).sum())
    counts[vd.ERROR] = int((rows["verdict"] == vd.ERROR).sum())
    return {k: v for k, v in counts.items() if v or k in (fine, vd.ERROR)}


def _failing(rows: pd.DataFrame, measure: str) -> pd.DataFrame:
    bad = (vd.PARTIAL, vd.NONE) if measure == vd.EVIDENCE else (vd.WRONG,)
    return rows[rows["verdict"].isin(bad)]


def in_category(rows: pd.DataFrame, category: str | None, measure: str) -> pd.DataFrame:
    """The rows one clicked count stands for (all rows for None)."""
    if not category:
        return rows
    if category in CATEGORY_COLUMN:
        return rows[_flag(rows, CATEGORY_COLUMN[category])]
    if category == NO_EVIDENCE_WRONG:
        failing = _failing(rows, measure)
        return failing[failing["failure"].isna()]
    if category in FAILURE_CATEGORIES:
        failing = _failing(rows, measure)
        return failing[failing["failure"] == category]
    return rows[rows["verdict"] == category]


def verdict_options(measure: str) -> list[str]:
    if measure == vd.EVIDENCE:
        return [*vd.EVIDENCE_VERDICTS, vd.NOT_SCORED, vd.ERROR]
    return [vd.CORRECT, vd.WRONG, vd.ERROR, vd.NO_VERDICT]


def failure_table(rows: pd.DataFrame, measure: str) -> pd.DataFrame:
    """Display rows, failures first (tmem.analysis.verdicts.order_key): readable text only (no None, True, tuples or
    Python lists); under EVIDENCE the stand-in's answer and verdict are labelled secondary."""
    out = rows.copy()
    out["_order"] = [vd.order_key(v) for v in out["verdict"]]
    out = out.sort_values(["_order", "variant", "qtype", "scope", "question_id"], na_position="last",
                          kind="stable").drop(columns="_order").reset_index(drop=True)
    held = out["units_in_context"] if "units_in_context" in out else pd.Series(None, index=out.index)
    out["evidence in context"] = [_held(u, h) for u, h in zip(out["units"], held)] if "units" in out else "—"
    out["missing units"] = out["evidence_missing"].map(_text) if "evidence_missing" in out else "—"
    out["flags"] = [review_text(r) or "—" for r in out.to_dict("records")]
    out["why flagged"] = ["; ".join(_text(r.get(f"{col}_detail")) for col in CATEGORY_COLUMN.values()
                                    if truthy(r.get(col))) or "—" for r in out.to_dict("records")]
    for column in ("failure", "failure_detail", "error"):
        if column in out:
            out[column] = out[column].map(readable_text)
    return out


SECONDARY = {"answer": "stand-in answer (secondary)", "answer verdict": "stand-in verdict (secondary)"}
EXTRA = ("scope", "question_id", "units", "units_recovered", "evidence_messages", "config_hash")


def front_columns(measure: str) -> list[str]:
    """The columns shown, in order (the raw ones, e.g. the backend label, stay in the data for links, unshown)."""
    answer = ["answer", "answer verdict"] if measure == vd.EVIDENCE else ["answer"]
    evidence = ["evidence"] if measure == vd.ACCURACY else []
    return ["open", "verdict", *evidence, "failure", "missing units", "question", "variant", "evidence in context",
            "flags", "annotation", *answer, "gold answer", "failure_detail", "why flagged", "qtype", "error", *EXTRA]


def column_labels(measure: str) -> dict[str, str]:
    """Display labels: offline, the stand-in's answer and verdict are marked secondary."""
    plain = {"failure_detail": "failure detail"}
    return {**plain, **SECONDARY} if measure == vd.EVIDENCE else plain


def _held(units: object, held: object) -> str:
    if not truthy(units) or held is None or (isinstance(held, float) and pd.isna(held)):
        return "—"
    return f"{int(held)} of {int(units)} units"


def _text(value: object) -> str:
    return "—" if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA \
        else readable_text(value)


def readable_text(value: object) -> str:
    """A cell as text a person reads: "—" for nothing, lists without brackets and quotes."""
    if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)):
        return "—"
    return readable(value)
