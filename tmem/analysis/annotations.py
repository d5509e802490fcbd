"""Reviewers' annotations on traces: a failure label (picked from the built-in ones or created) and a note, by an
author, stored in DuckDB (tmem.store.annotations), joined onto result rows, counted per label x attributed stage.

Open coding then axial coding: a reviewer first writes notes and labels freely, then the labels are counted
against the stage the automatic attribution blamed (tmem.analysis.funnel), which shows where the two disagree ("judge
wrong" on rows attributed to "answer wrong despite evidence", "gold wrong" anywhere).

Which annotation a result row shows: the newest one made on that row's run, question and variant; else the newest
made on another run of the same question and variant under the same configuration hash (the same pipeline, so
the same trace up to the backend) -- marked with the run it came from. So a label survives re-running the question.
"""
from __future__ import annotations

import getpass
import os
from collections.abc import Mapping

import pandas as pd

from tmem.analysis.funnel import FAILURE_CATEGORIES
from tmem.analysis.stale import ROLLBACK_MISSED, STALE
from tmem.limits import strip_bidi, strip_control

REVIEWER_LABELS = {
    "gold wrong": "the gold answer or its evidence is wrong (a candidate for a gold correction)",
    "judge wrong": "the verdict is wrong for this answer and gold",
    "question ambiguous": "the question admits several answers",
    "partly right": "the answer holds part of the gold",
    "other": "see the note",
}
BUILTIN_LABELS = {**{c: "automatic attribution: " + c for c in FAILURE_CATEGORIES},
                  STALE: "states a superseded state", ROLLBACK_MISSED: "an earlier state without its rollback",
                  **REVIEWER_LABELS}
MAX_LABEL, MAX_NOTE, MAX_AUTHOR = 80, 4000, 80
UNATTRIBUTED = "not attributed"
SHOWN = ("label", "note", "annotated_by", "annotated_at", "annotation_run")


ANONYMOUS = "anonymous"  # the author of an annotation made in the app without a name: never the server's login


def default_author() -> str:
    """The command line's author: $TMEM_AUTHOR, else the login name of whoever runs it (the app never uses it: it
    would show every visitor the server's login name)."""
    try:
        return os.environ.get("TMEM_AUTHOR") or getpass.getuser()
    except (KeyError, OSError):  # no login name in a container
        return "reviewer"


def clean(value: str | None, limit: int, field: str, required: bool = True) -> str:
    """One line of text without control characters or bidirectional formatting (a note rendered reversed in
    Failures), at most `limit` characters; ValueError names the field."""
    value = strip_bidi(strip_control(value or ""))
    text = " ".join(value.split()) if field != "note" else value.strip()
    if required and not text:
        raise ValueError(f"the annotation's {field} is empty")
    if len(text) > limit:
        raise ValueError(f"the annotation's {field} has {len(text)} characters; at most {limit}")
    return text


def labels(store) -> dict[str, str]:
    """{label: description}: the built-in labels, then those reviewers created."""
    return {**BUILTIN_LABELS, **{name: d for name, d in store.failure_labels() if name not in BUILTIN_LABELS}}


def annotate(store, corpus: str, row: Mapping, label: str, note: str = "", author: str | None = None,
             description: str = "") -> dict:
    """Store a label and note on the trace of one result row (run_id, scope, question_id, variant, config_hash,
    backend); a label that is not known yet is created. -> the stored annotation."""
    label = clean(label, MAX_LABEL, "label")
    saved = {"corpus": corpus, "run_id": str(row.get("run_id") or ""), "scope": str(row["scope"]),
             "question_id": str(row["question_id"]), "variant": str(row["variant"]),
             "author": clean(author or default_author(), MAX_AUTHOR, "author"), "label": label,
             "note": clean(note, MAX_NOTE, "note", required=False), "config_hash": row.get("config_hash"),
             "backend": row.get("backend")}
    if label not in labels(store):
        store.save_failure_label(label, clean(description, MAX_NOTE, "description", required=False),
                                 saved["author"])
    store.save_annotation(saved)
    return saved


def with_annotations(rows: pd.DataFrame, notes: pd.DataFrame) -> pd.DataFrame:
    """`rows` (result rows) with the SHOWN columns of the annotation each row shows (module docstring)."""
    out = rows.copy()
    for c in SHOWN:
        out[c] = None
    if not len(notes) or not len(out):
        return out
    notes = notes.sort_values("created_at", ascending=False)
    same = notes.drop_duplicates(["run_id", "scope", "question_id", "variant"])
    later = notes.drop_duplicates(["config_hash", "scope", "question_id", "variant"])
    own = {(r.run_id, r.scope, r.question_id, r.variant): r for r in same.itertuples()}
    carried = {(r.config_hash, r.scope, r.question_id, r.variant): r for r in later.itertuples()}
    for i, r in out.iterrows():
        hit = own.get((r.get("run_id") or "", r["scope"], r["question_id"], r["variant"])) or \
            carried.get((r.get("config_hash"), r["scope"], r["question_id"], r["variant"]))
        if hit is not None:  # stored before the store cleaned them: shown in the order they were written
            out.loc[i, list(SHOWN)] = [*(strip_bidi(str(v)) if isinstance(v, str) else v
                                         for v in (hit.label, hit.note, hit.author)), str(hit.created_at), hit.run_id]
    return out


def label_counts(rows: pd.DataFrame) -> pd.DataFrame:
    """Annotated rows counted per label (rows) x attributed stage (columns, in pipeline order), with totals."""
    part = rows[rows["label"].notna()] if "label" in rows else rows.iloc[0:0]
    if not len(part):
        return pd.DataFrame(columns=["label", "total"])
    stage = part["failure"].fillna(UNATTRIBUTED) if "failure" in part else pd.Series(UNATTRIBUTED, part.index)
    table = pd.crosstab(part["label"], stage)
    order = [c for c in (*FAILURE_CATEGORIES, UNATTRIBUTED) if c in table.columns]
    table = table[order + [c for c in table.columns if c not in order]]
    table["total"] = table.sum(axis=1)
    table.columns.name = None
    return table.sort_values("total", ascending=False).reset_index()
