"""Failures' and Compare's rows (this file is not a page): a run's result rows with what a reviewer reads beside the
stored verdicts -- the evidence verdict, stale answers and revisions without rollback (tmem.evaluation.review),
whether an offline stand-in answered, the answer and gold answer texts -- under a chosen gold version, read once
per run, version and change of the run (st.cache_data); and the gold version selector both pages share."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from pages._runs import results
from pages._widgets import synced
from tmem import api
from tmem.analysis import verdicts as vd
from tmem.evaluation import matched
from tmem.evaluation.gold_versions import ORIGINAL


@st.cache_data(show_spinner="Reading the run's traces: evidence verdicts, stale answers, answers…", max_entries=8)
def _batch_rows(db: str, corpus: str, run: str, version: str, stamp: str, _c) -> pd.DataFrame:
    texts: dict[tuple, tuple[str, str]] = {}

    def keep(row, trace, gold):  # the answer and gold texts, read in the same pass as the verdicts
        answer = trace.answers[0].text or "(empty: the answer role failed)" if trace.answers else "—"
        texts[(row["variant"], row["config_hash"], row["scope"], row["question_id"])] = (
            answer, gold.answer if gold is not None and gold.answer else "—")

    frame = api.explorer.rescored_run(_c, run, version, on_trace=keep)
    keys = zip(frame["variant"], frame["config_hash"], frame["scope"], frame["question_id"])
    frame["answer"], frame["gold answer"] = zip(*[texts.get(k, ("—", "—")) for k in keys]) if len(frame) else ((), ())
    return frame


@st.cache_data(show_spinner="Reviewing the traces run in the app…", max_entries=4)
def _app_rows(db: str, corpus: str, stamp: str, rows: pd.DataFrame, _c) -> pd.DataFrame:
    ctx = api.explorer.gold_context(_c)
    out = []
    for row in rows.to_dict("records"):
        trace = api.explorer.row_trace(_c, row)
        gold = ctx.gold_of(row["scope"], row["question_id"])
        primary = trace.answers[0] if trace is not None and trace.answers else None
        out.append({**row, **ctx.review(trace, row["scope"], row["question_id"]),
                    "answer_offline": primary.offline if primary else None,
                    "answer": (primary.text or "(empty: the answer role failed)") if primary else "—",
                    "gold answer": gold.answer if gold is not None and gold.answer else "—",
                    "gold_version": ORIGINAL})
    return pd.DataFrame(out) if out else rows.assign(gold_version=ORIGINAL)


def reviewed(c, run: str, version: str = ORIGINAL) -> tuple[pd.DataFrame, str, str]:
    """(rows with the review columns, answer and gold texts; primary measure; accuracy source) of one run."""
    frame = results(c, run)
    if not len(frame):
        return frame, vd.EVIDENCE, vd.OFFLINE_SOURCE
    stamp = f"{len(frame)}:{frame['created_at'].max()}"
    if run == api.APP_RUN:
        rows = _app_rows(c.database, c.corpus, stamp, frame, c)
    else:
        rows = _batch_rows(c.database, c.corpus, run, version, stamp, c)
    if len(rows):
        texts = {(q.scope, q.id): q.text for q in api.explorer.questions(c)}
        rows = rows.assign(question=[texts.get(k, "—") for k in zip(rows["scope"], rows["question_id"])])
    source = vd.rows_source(rows)
    return rows, vd.primary(source), source


def rows_key(c, run: str, version: str, frame: pd.DataFrame) -> tuple:
    """What `reviewed`'s rows are made of, for the views pages derive from them (pages._widgets.shared): the run,
    its stored version (row count, latest time), the gold version and the corpus's import (the question texts)."""
    latest = str(frame["created_at"].max()) if len(frame) and "created_at" in frame else ""
    return (c.database, c.corpus, run, version, len(frame), latest,
            str(api.explorer.corpus_info(c)["imported_at"]))


def gold_version(c, run: str, column=st) -> str:
    """The gold version selector (`gold=` in the URL; "original" = the imported gold); the app's own traces are
    always scored under the original gold."""
    versions = [ORIGINAL, *[v for v, *_ in api.explorer.gold_version_counts(c)]]
    if run == api.APP_RUN or len(versions) == 1:
        st.session_state.pop("gold", None)
        return ORIGINAL
    counts = {v: n for v, n, _ in api.explorer.gold_version_counts(c)}
    return synced(column.selectbox, "Gold version", versions, "gold", default=ORIGINAL,
                  format_func=lambda v: "original (as imported)" if v == ORIGINAL else f"{v} ({counts[v]} corrected)",
                  help="Score the stored traces under a gold version (corrections imported with `python -m tmem "
                       "gold`): recall, evidence verdicts and stale answers are recomputed without running the "
                       "pipeline again; answers are re-judged by the offline judge only (docs/evaluation.md).")


def version_caption(version: str, rows: pd.DataFrame) -> str:
    """Which gold the figures use, and what a version changed."""
    if version == ORIGINAL:
        return "Gold: **original** (as imported)."
    corrected = int(rows["corrected"].fillna(False).astype(bool).sum()) if "corrected" in rows else 0
    changed = int(rows["verdict_changed"].fillna(False).astype(bool).sum()) if "verdict_changed" in rows else 0
    return (f"Gold: version **{version}** — {corrected} row(s) with corrected gold, {changed} answer verdict(s) "
            "changed by it; traces re-scored, nothing re-run.")


@st.cache_data(show_spinner="Re-running the baseline at the compared variant's message count…", max_entries=8)
def _matched(db: str, corpus: str, run: str, version: str, baseline: str, compared: str, stamp: str, roles: str,
             _rows: pd.DataFrame, _c) -> pd.DataFrame:
    return api.explorer.matched_rows(_c, run, version, stamp, _rows, baseline, compared)  # stored once computed


def matched_rows(c, run: str, version: str, frame: pd.DataFrame, baseline: str, compared: str) -> pd.DataFrame:
    """`baseline` re-run at `compared`'s message count per question (tmem.evaluation.matched), once per run and
    change of the run (in the store, so a new server reads it too); empty when the baseline has no fixed budget."""
    if not matched.fixed_budget(baseline) or not len(frame):
        return pd.DataFrame()
    return _matched(c.database, c.corpus, run, version, baseline, compared, matched.run_stamp(frame), c.roles.label,
                    frame, c)
