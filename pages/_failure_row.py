"""The Failures view's selected row (this file is not a page): open it on the Question page (Previous / Next walk
the filtered rows, *Back to Failures* returns to the filters), a reviewer's annotation on its trace, and what
raising k alone would have found for it."""
from __future__ import annotations

import streamlit as st

from pages._links import open_question
from tmem import api
from tmem.analysis.annotations import ANONYMOUS, MAX_AUTHOR, MAX_LABEL, MAX_NOTE, annotate
from tmem.analysis.whatif_k import unit_ranks
from tmem.viz.batch import annotations as notes_view
from tmem.viz.batch import tables
from tmem.viz.question import whatif as whatif_view
from tmem.viz.safe import md


def selected_row(c, table, refs, row: int, back: dict) -> None:
    """Below the table, for the selected row: open it on the Question page (Previous / Next walk these rows, *Back
    to Failures* returns to these filters), annotate it, and what raising k alone would have found."""
    record = table.iloc[row].to_dict()
    with st.container(border=True):
        st.markdown(f"**{md(record['variant'])} · {md(record['scope'])} / {md(record['question_id'])}** — "
                    f"verdict {md(record['verdict'])}")
        if st.button("Open on the Question page", key="fail_open", icon=":material/open_in_new:"):
            records = table.to_dict("records")
            st.session_state["failure_nav"] = {  # read by the Question page: banner, previous / next, back
                "index": row, "back": {k: v for k, v in back.items() if v},
                "rows": [{"scope": r["scope"], "question_id": r["question_id"], "ref": ref, "variant": r["variant"],
                          "verdict": r["verdict"], "failure": r["failure"] if r["failure"] != "—" else None,
                          "detail": r["failure_detail"] if r["verdict"] != "error" else r["error"]}
                         for r, ref in zip(records, refs)]}
            open_question(c, record["scope"], record["question_id"], refs[row])
        left, right = st.columns(2)
        with left:
            annotation_form(c, record)
        with right:
            whatif_table(c, record, refs[row])


def annotation_form(c, record: dict) -> None:
    """A note and a label (picked, or created) on this row's trace, stored in the database
    (tmem.analysis.annotations)."""
    st.markdown("**Annotate**")
    st.caption(notes_view.EXPLAIN)
    with st.form("annotate", border=False, clear_on_submit=True):
        choice = st.selectbox("Label", notes_view.label_options(c.store), key="note_label")
        new = st.text_input("New label (with “new label…”)", key="note_new", max_chars=MAX_LABEL)
        note = st.text_area("Note", key="note_text", max_chars=MAX_NOTE, height=80)
        # empty, never the server's login name (every visitor would read it); left empty: "anonymous"
        author = st.text_input("Author", key="note_author", max_chars=MAX_AUTHOR, placeholder="your name")
        if st.form_submit_button("Save the annotation", icon=":material/edit_note:"):
            try:
                saved = annotate(c.store, c.corpus, record, new if choice == notes_view.NEW_LABEL else choice,
                                 note, author.strip() or ANONYMOUS)
            except ValueError as exc:
                st.error(str(exc))
            else:
                st.success(f"Saved: {md(saved['label'])} by {md(saved['author'])}.")
                st.rerun()


def whatif_table(c, record: dict, ref) -> None:
    """Each gold unit's BM25 rank, i.e. the k at which raising k alone would have found it (tmem.analysis.whatif_k)."""
    st.markdown("**What-if on k**")
    trace = api.load_trace(c.store, c.corpus, record["scope"], record["question_id"], ref) if ref else None
    gold = c.store.gold(c.corpus, record["scope"], record["question_id"])
    if trace is None or gold is None or not gold.evidence:
        st.caption("No gold evidence unit (or no stored trace) for this row: nothing to rank.")
        return
    units = unit_ranks(trace, gold, api.open_scope(c.store, c.corpus, record["scope"]))
    st.caption(whatif_view.EXPLAIN)
    st.dataframe(tables.dashes(whatif_view.unit_table(units).drop(columns=["question", "type"])), hide_index=True)
