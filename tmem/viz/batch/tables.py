"""Failures and Compare view models over batch results (rows shaped like `Store.RUN_RESULT_COLUMNS`).

A row's verdict is "correct", "wrong", "error" (the run failed) or "no verdict" (no gold answer). A wrong row's
failure category is the first stage that lost the gold evidence (tmem.analysis.funnel). Recall is gold
evidence units recovered into R'(q) over units (App. A.4). Questions are aligned across variants by
(scope, question id).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tmem.analysis.funnel import FAILURE_CATEGORIES
from tmem.viz.question.answers import readable

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


def distinct_heads(texts: Sequence[str], min_shared: int = 4, keep: int = 2) -> list[str]:
    """Texts whose opening words many share (a generated benchmark's "On what date (YYYY-MM-DD) was …") with that
    shared run folded to "…" after their first `keep` words, so a narrow column shows what differs; texts that share
    fewer than `min_shared` opening words with any other stay whole."""
    words = {t: str(t).split() for t in dict.fromkeys(texts)}  # each distinct text once (a run repeats them)
    short = {}
    for text, mine in words.items():
        shared = max((_common(mine, other) for other in words.values() if other != mine), default=0)
        short[text] = (" ".join(mine[:keep] + ["…"] + mine[shared:]) if min_shared <= shared < len(mine)
                       else " ".join(mine))
    return [short[t] for t in texts]


def _common(a: Sequence[str], b: Sequence[str]) -> int:
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
