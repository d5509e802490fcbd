"""Recall view: budget-matched key-evidence recall and the recall-vs-messages curve from the files that
`python -m tmem recall --out data/recall/NAME.json` writes (view model: tmem/viz/batch/recall_curve.py)."""
from __future__ import annotations

import streamlit as st

from pages._widgets import export_buttons, synced
from tmem import api
from tmem.viz.batch import compare
from tmem.viz.batch import recall_curve as view
from tmem.viz.safe import md


def render() -> None:
    st.subheader("Recall at matched budgets")
    st.caption("Every method at the same number of messages: BM25, embedding and the global-evidence control at "
               "T-Mem's own message count per question (matched), and each at fixed budgets (the curve). dev = the "
               "first half of the corpus's scopes (LoCoMo conversations 0-4; on the interleaved corpus, the questions "
               "of conversations 0-4), test = the rest.")
    found = view.files()
    if not found:
        st.info("No recall files yet: run `python -m tmem recall --corpus NAME --out data/recall/NAME.json`.")
        st.stop()
    name = synced(st.selectbox, "Recall file", [p.name for p in found], key="recall_file", default=found[0].name)
    try:
        body = view.load(next(p for p in found if p.name == name))
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    st.caption("Run: " + md(view.provenance(body, next(p for p in found if p.name == name))))
    ks = [str(r["k"]) for r in body["runs"]]
    k = synced(st.radio, "Seed depth k", ks, key="recall_k", default=ks[0], horizontal=True)
    run = body["runs"][ks.index(k)]
    split = synced(st.radio, "Split", view.splits(run), key="recall_split", default="all", horizontal=True)
    st.markdown(view.curve_svg(run, split), unsafe_allow_html=True)  # SVG: no plotly to load (escaped)
    table = view.matched_table(run)
    n = int(table.loc[table["split"] == split, "questions"].max()) if len(table) else 0
    if note := compare.source_note(body.get("corpus", ""), api.DEMO_CORPUS, n):  # as Compare and Sweep say it
        st.info(note[0].upper() + note[1:] + ".", icon=":material/science:")
    st.dataframe(table, hide_index=True)
    export_buttons(table, f"recall-{body.get('corpus', 'corpus')}-k{k}")
    st.markdown("**Why: where the windows and the global ranking differ** (at T-Mem's own budget per question)")
    summary = view.why_summary(run, split)
    if not summary["questions"]:
        st.caption("This file has no per-question detail: re-run `python -m tmem recall --out` to get it.")
    else:
        st.caption(f"{summary['questions']} questions: gold units only T-Mem's windows found "
                   f"**{summary['windows only']}**, only the global control found **{summary['global only']}**, "
                   f"both {summary['both']}. Each row lists the rate every accepted window beat: its anchor density "
                   "against the fixed μ, or against App. F.1's μ* over its topic's or channel's background rate.")
        every = st.toggle("All questions (not only those where the two sides differ)", key="recall_why_all")
        why = view.why_table(run, split, only_differences=not every)
        st.dataframe(why, hide_index=True)
        export_buttons(why, f"recall-why-{body.get('corpus', 'corpus')}-k{k}")


render()
