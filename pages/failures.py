"""Failures view: the questions of a stored batch run, filtered, each failure attributed to the first stage that
lost the gold evidence; counts are clickable filters and a row opens the Question view."""
from __future__ import annotations

import streamlit as st

from pages import ctx, export_buttons, open_question, question_url, results, run_choices, synced
from tmem.viz import tables
from tmem.viz.results import TraceRef

c = ctx()
st.subheader("Failures")
st.caption("Each wrong answer is attributed to the first stage that lost its gold evidence: anchor miss → window "
           "miss → selection miss → link error → compressed away → answer wrong despite evidence.")
if not c.corpus:
    st.info("No corpus loaded.")
    st.stop()
runs = run_choices(c)
run = st.selectbox("Run", runs, key="run", bind="query-params",
                   help="Batch runs written by `python -m tmem run`, or the traces run in this app.")
frame = results(c, run)
if not len(frame):
    st.info("No results in this run yet. Run questions on the Question page, or a batch with "
            "`python -m tmem run`, then come back.")
    st.stop()

options = lambda column: [None, *sorted(frame[column].dropna().astype(str).unique())]
every = lambda label: (lambda v: v if v is not None else f"all {label}")
f1, f2, f3, f4 = st.columns(4)
variant = f1.selectbox("Variant", options("variant"), key="fv", bind="query-params", format_func=every("variants"))
qtype = f2.selectbox("Question type", options("qtype"), key="qtype", bind="query-params", format_func=every("types"))
verdict = f3.selectbox("Verdict", [None, *tables.VERDICTS], key="verdict", bind="query-params",
                       format_func=every("verdicts"))
scope = f4.selectbox("Scope", options("scope"), key="fscope", bind="query-params", format_func=every("scopes"))
filtered = tables.filter_results(frame, variant=variant, qtype=qtype, verdict=verdict, scope=scope)

counts = tables.failure_counts(filtered)
category = synced(st.pills, "Failure category (click to filter)", list(counts), "failure",
                  format_func=lambda k: f"{k} · {counts[k]}")
table = tables.failure_view(filtered, category)
# a row opens exactly its own stored trace (variant, config hash, backend), not the sidebar's variant
refs = [TraceRef.from_row(row) for row in table.to_dict("records")]
table.insert(0, "open", [question_url(c, s, q, ref) for s, q, ref in zip(table["scope"], table["question_id"], refs)])
st.caption(f"{len(table)} of {len(frame)} rows. Select a row to open its stored trace on the Question page.")
picked = st.dataframe(table, hide_index=True, on_select="rerun", selection_mode="single-row", key="fail_table",
                      column_config={"open": st.column_config.LinkColumn("open", display_text="open ↗")})
export_buttons(table, f"failures-{category or 'all'}")
if picked.selection.rows:
    row = picked.selection.rows[0]
    open_question(c, table["scope"].iloc[row], table["question_id"].iloc[row], refs[row])
