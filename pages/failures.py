"""Failures view: the questions of a stored batch run, filtered, each failure attributed to the first stage that
lost the gold evidence; counts are clickable filters and a row opens the Question view."""
from __future__ import annotations

import streamlit as st

from pages import (
    batch_cost,
    batch_status,
    ctx,
    export_buttons,
    open_question,
    question_url,
    results,
    run_choices,
    synced,
)
from tmem.evaluation import jobs
from tmem.evaluation.batch import select_questions
from tmem.methods import methods
from tmem.viz import explorer, tables
from tmem.viz import results as results_view
from tmem.viz.results import TraceRef

FRONT = ["open", "question", "answer", "gold answer", "verdict", "failure", "failure_detail", "error", "variant",
         "qtype"]


@st.cache_data(show_spinner="Reading the rows' questions, answers and gold answers…", max_entries=16)
def details(db: str, corpus: str, run: str, stamp: str, rows: tuple, _store, _table):
    """The rows with question, answer (from each row's stored trace) and gold answer, cached per run and rows."""
    return results_view.with_details(_store, corpus, _table)


def batch_form(c) -> None:
    """Start a batch run of the corpus in the background (`python -m tmem run` per variant, tmem.evaluation.jobs):
    its results appear in the Run list variant by variant while it runs; the CLI may run at the same time."""
    running = jobs.active(c.store.path)
    with st.expander("Run a batch", icon=":material/playlist_play:", expanded=False):
        questions = c.store.questions(c.corpus)
        types = sorted({q.type for q in questions if q.type})
        with st.form("batch", border=False):
            a, b = st.columns([3, 2])
            variants = a.multiselect("Variants and baselines", list(methods()), default=list(jobs.MAIN_VARIANTS),
                                     help="Each runs stage-wise over the chosen questions (App. D), one after another.")
            chosen = b.multiselect("Question types", types, placeholder="all types")
            d, e = st.columns([1, 4])
            limit = d.number_input("Limit", min_value=0, value=0, help="Only the first N questions; 0 = all.")
            offline = explorer.all_offline(c.roles)
            names = ", ".join(sorted({r.backend for r in (c.roles.evidence_utility, c.roles.relation, c.roles.answer,
                                                          c.roles.judge)}))
            backend = e.radio("Backend", ["offline", "session"], horizontal=True, disabled=offline,
                              format_func={"offline": "offline stand-ins",
                                           "session": f"this session's ({names})"}.get)
            go = st.form_submit_button("Start the batch", type="primary", disabled=running is not None,
                                       icon=":material/play_arrow:")
            estimate = batch_cost.estimate_button()
        picked = select_questions(questions, ",".join(chosen) or None, int(limit) or None)
        st.caption(f"{len(picked)} questions × {len(variants)} variants, in the background at low priority; "
                   "`python -m tmem run` does the same from a terminal, also while the app is open.")
        budget = batch_cost.controls(c, picked, variants, offline or backend == "offline", estimate)
        if go:
            overrides = ({"backend.preset": "offline"} if offline or backend == "offline"
                         else dict(st.session_state.get("backend_overrides", {})))
            try:
                jobs.start_batch(c.store.path, c.corpus, variants, len(picked), types=chosen,
                                 limit=int(limit) or None, backend=overrides, budget=budget,
                                 session_key=st.session_state.get("session_api_key"))
            except ValueError as exc:
                st.error(str(exc))
            else:
                st.rerun()


c = ctx()
st.subheader("Failures")
st.caption("Each wrong answer is attributed to the first stage that lost its gold evidence: anchor miss → window "
           "miss → selection miss → link error → compressed away → answer wrong despite evidence.")
if not c.corpus:
    st.info("No corpus loaded.")
    st.stop()
batch_form(c)
batch_status(c)
runs = run_choices(c)
run = st.selectbox("Run", runs, key="run", bind="query-params",
                   help="Batch runs written by `python -m tmem run`, or the traces run in this app.")
frame = results(c, run)
if not len(frame):
    st.info("No results in this run yet. Run questions on the Question page, or a batch (*Run a batch* above, or "
            "`python -m tmem run` in a terminal); its results appear here as each variant finishes.")
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
stamp = f"{len(frame)}:{frame['created_at'].max() if 'created_at' in frame else ''}"
table = details(str(c.store.path), c.corpus, run, stamp, tuple(map(tuple, table.astype(str).to_numpy())), c.store,
                table)
table.insert(0, "open", [question_url(c, s, q, ref) for s, q, ref in zip(table["scope"], table["question_id"], refs)])
st.caption(f"{len(table)} of {len(frame)} rows. Select a row to open its stored trace on the Question page; there "
           "*Previous* / *Next* walk these rows and *Back to Failures* returns to these filters.")
picked = st.dataframe(tables.dashes(table), hide_index=True, on_select="rerun", selection_mode="single-row",
                      key="fail_table", column_order=[c_ for c_ in FRONT if c_ in table] + [
                          c_ for c_ in table.columns if c_ not in FRONT],
                      column_config={"open": st.column_config.LinkColumn("open", display_text="open ↗"),
                                     "question": st.column_config.TextColumn(width="medium"),
                                     "answer": st.column_config.TextColumn(width="medium")})
export_buttons(table, f"failures-{category or 'all'}")
if picked.selection.rows:
    row = picked.selection.rows[0]
    records = table.to_dict("records")
    st.session_state["failure_nav"] = {  # read by the Question page: banner, previous / next, back
        "index": row, "back": {k: v for k, v in {"run": run, "fv": variant, "qtype": qtype, "verdict": verdict,
                                                  "fscope": scope, "failure": category}.items() if v},
        "rows": [{"scope": r["scope"], "question_id": r["question_id"], "ref": ref, "variant": r.get("variant"),
                  "verdict": r.get("verdict"), "failure": r.get("failure"), "detail": r.get("failure_detail")
                  if r.get("verdict") != "error" else r.get("error")} for r, ref in zip(records, refs)]}
    open_question(c, table["scope"].iloc[row], table["question_id"].iloc[row], refs[row])
