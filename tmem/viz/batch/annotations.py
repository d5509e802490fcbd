"""Failures view-models for reviewers' annotations (tmem.analysis.annotations): the label choices, the text of
the annotation column, the label filter and the label x attributed stage table. Pure functions over result rows
that went through `tmem.analysis.annotations.with_annotations`.
"""
from __future__ import annotations

import pandas as pd

from tmem.analysis.annotations import BUILTIN_LABELS, labels

NEW_LABEL = "new label…"
ANY, NONE = "any", "not annotated"
EXPLAIN = ("A reviewer's label and note on a trace, kept when the question is run again under the same "
           "configuration (then marked with the run it was written on); counted against the stage the automatic "
           "attribution blamed.")


def label_options(store) -> list[str]:
    """The labels a reviewer can pick, then the choice that creates one."""
    return [*labels(store), NEW_LABEL]


def _given(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and pd.isna(value)) and str(value) not in ("", "—")


def default_label(row, options: list[str]) -> str:
    """The label a row's form opens with: its saved label, else the stage its failure was attributed to, else
    "other"."""
    for value in (row.get("label"), row.get("failure")):
        if _given(value) and str(value) in options:
            return str(value)
    return "other"


def saved_note(row) -> str:
    return str(row.get("note")) if _given(row.get("note")) else ""


def missing_ids(missing: object) -> list[str]:
    """The message ids of a row's "missing units" cell ("m1 or m2; m7" -> ["m1", "m2", "m7"])."""
    if not _given(missing):
        return []
    return [part.strip() for unit in str(missing).split(";") for part in unit.split(" or ") if part.strip()]


def annotation_text(row) -> str:
    """"label — note (author, date)", with "from run X" when the annotation was written on another run."""
    label = row.get("label")
    if label is None or (isinstance(label, float) and pd.isna(label)):
        return ""
    note = row.get("note") or ""
    when = str(row.get("annotated_at") or "")[:10]
    carried = row.get("annotation_run")
    origin = f", from run {carried}" if carried and carried != row.get("run_id") else ""
    return f"{label}" + (f" — {note}" if note else "") + f" ({row.get('annotated_by')}, {when}{origin})"


def filter_label(rows: pd.DataFrame, choice: str) -> pd.DataFrame:
    """Rows with the chosen label; ANY: every row; NONE: rows without an annotation."""
    if choice == ANY:
        return rows
    if choice == NONE:
        return rows[rows["label"].isna()]
    return rows[rows["label"] == choice]


def filter_choices(rows: pd.DataFrame) -> list[str]:
    used = [lab for lab in dict.fromkeys(rows["label"].dropna()) if lab]
    return [ANY, NONE, *sorted(used, key=lambda lab: (lab not in BUILTIN_LABELS, lab))]
