"""The Failures view's selected row (this file is not a page): open it on the Question page (Previous / Next walk
the filtered rows, *Back to Failures* returns to the filters), a reviewer's annotation on its trace, and what
raising k alone would have found for it."""
from __future__ import annotations

import streamlit as st

from pages._links import open_question
from pages._widgets import messages, text_table
from tmem import api
from tmem.analysis import verdicts as vd
from tmem.analysis.annotations import ANONYMOUS, MAX_AUTHOR, MAX_LABEL, MAX_NOTE
from tmem.analysis.whatif_k import unit_ranks
from tmem.api import TraceRef
from tmem.viz.batch import annotations as notes_view
from tmem.viz.batch import tables
from tmem.viz.question import whatif as whatif_view
from tmem.viz.safe import md, shorten

# how a verdict reads on screen: the evidence verdict "none" read like an empty cell (the URL keeps "none")
SHOWN_VERDICT = {vd.NONE: "no gold unit held"}


def selected_row(c, table, refs, row: int, back: dict) -> None:
    """Below the table, for the selected row: what failed (the question, the gold answer, the text of the missing
    messages), open it on the Question page (Previous / Next walk these rows, *Back to Failures* returns to these
    filters), annotate it, and what raising k alone would have found."""
    record = table.iloc[row].to_dict()
    with st.container(border=True):
        verdict = SHOWN_VERDICT.get(record["verdict"], record["verdict"])
        st.markdown(f"**{md(record['variant'])} · {md(record['scope'])} / {md(record['question_id'])}** — "
                    f"verdict {md(verdict)}" + (f" · {md(record['failure'])}"
                                                if record.get("failure") not in (None, "—") else ""))
        if st.button("Open on the Question page", key="fail_open", icon=":material/open_in_new:", shortcut="O"):
            records = table.to_dict("records")
            st.session_state["failure_nav"] = {  # read by the Question page: banner, previous / next, back
                "index": row, "back": {k: v for k, v in back.items() if v},
                "rows": [{"scope": r["scope"], "question_id": r["question_id"], "ref": ref, "variant": r["variant"],
                          "verdict": r["verdict"], "failure": r["failure"] if r["failure"] != "—" else None,
                          "detail": r["failure_detail"] if r["verdict"] != "error" else r["error"]}
                         for r, ref in zip(records, refs)]}
            open_question(c, record["scope"], record["question_id"], refs[row])
        what_failed(c, record)
        left, right = st.columns(2)
        with left:
            annotation_form(c, record)
        with right:
            whatif_table(c, record, refs[row])


def what_failed(c, record: dict) -> None:
    """The question, its gold answer and the text of each gold message the answer context lacked."""
    st.markdown(f"**Question:** {md(record.get('question'))}")
    st.markdown(f"**Gold answer:** {md(record.get('gold answer'))}")
    missing = notes_view.missing_ids(record.get("missing units"))
    if missing:
        frame = messages(c, record["scope"])
        rows = frame[frame["id"].isin(missing)][["id", "timestamp", "author", "text"]]
        st.markdown("**Missing from the answer context:**")
        text_table(tables.readable_frame(rows), 1, ["id", "text", "author", "timestamp"])


def row_identity(record: dict) -> tuple:
    return tuple(str(record.get(k)) for k in ("run_id", "scope", "question_id", "variant", "config_hash"))


def save_annotation(c, record: dict, ident: tuple) -> None:
    """The form's callback. It runs before the form's fragment reruns (only the form: the page around it, table,
    what-if and the rest, is not redrawn): the form is reloaded here from what was stored, and the table's
    annotation column and filter read the stored annotations again on the page's next run."""
    state = st.session_state
    label = state["note_new"] if state["note_label"] == notes_view.NEW_LABEL else state["note_label"]
    try:
        saved = api.explorer.save_annotation(c, record, label, state["note_text"],
                                             state["note_author"].strip() or ANONYMOUS)
    except ValueError as exc:
        state["note_saved"] = (ident, "error", str(exc))
    else:
        state["note_saved"] = (ident, "ok", f"Saved: {saved['label']} by {saved['author']}"
                               + (f" — {shorten(saved['note'], 80)}" if saved["note"] else "") + ".")
        # the form shows what is stored now (the fragment's `record` is the page's, from before this save)
        state.update(note_row=ident, note_label=saved["label"], note_text=saved["note"] or "", note_new="")


@st.fragment
def annotation_form(c, record: dict) -> None:
    """A note and a label (picked, or created) on this row's trace, stored in the database
    (tmem.analysis.annotations): it opens with the row's saved label and note, else with the stage the failure was
    attributed to, and says when it has saved. A fragment: *Save* reruns this form alone, not the Failures page
    with its table and the row's detail (a whole-page rerun took 2-5 s under load, issue 42)."""
    st.markdown("**Annotate**")
    st.caption(notes_view.EXPLAIN + " Ctrl/⌘ + Enter saves.")
    options = api.explorer.annotation_labels(c)
    ident = row_identity(record)
    if st.session_state.get("note_row") != ident:  # another row (or one just saved): its stored values, not the last
        st.session_state.update(note_row=ident, note_label=notes_view.default_label(record, options),
                                note_text=notes_view.saved_note(record), note_new="")
    with st.form("annotate", border=False):
        st.selectbox("Label", options, key="note_label")
        st.text_input("New label (with “new label…”)", key="note_new", max_chars=MAX_LABEL)
        st.text_area("Note", key="note_text", max_chars=MAX_NOTE, height=80)
        # empty, never the server's login name (every visitor would read it); left empty: "anonymous"
        st.text_input("Author", key="note_author", max_chars=MAX_AUTHOR, placeholder="your name")
        st.form_submit_button("Save the annotation", icon=":material/edit_note:", on_click=save_annotation,
                              args=(c, record, ident), shortcut="Mod+Enter")
    done = st.session_state.get("note_saved")
    if done and done[0] == ident:
        (st.success if done[1] == "ok" else st.error)(md(done[2]), icon=":material/check:" if done[1] == "ok"
                                                      else ":material/error:")


@st.cache_data(show_spinner=False, max_entries=64)
def _unit_table(db: str, corpus: str, scope: str, question_id: str, ref: tuple, version: str, imported: str, _c):
    """The row's gold units ranked, once per stored trace (its content hash `version`) and import of the corpus
    (`imported`: its gold): it read the trace, the gold and the scope's BM25 index on every rerun of the page."""
    trace = api.explorer.stored_trace(_c, scope, question_id, TraceRef(*ref))
    gold = api.explorer.question_gold(_c, scope, question_id)
    if trace is None or gold is None or not gold.evidence:
        return None
    units = unit_ranks(trace, gold, api.explorer.stored_scope(_c, scope))
    return tables.dashes(whatif_view.unit_table(units).drop(columns=["question", "type"]))


def whatif_table(c, record: dict, ref) -> None:
    """Each gold unit's BM25 rank, i.e. the k at which raising k alone would have found it (tmem.analysis.whatif_k)."""
    st.markdown("**What-if on k**")
    version = api.explorer.trace_version(c, record["scope"], record["question_id"], ref)
    table = None if version is None else _unit_table(
        c.database, c.corpus, record["scope"], record["question_id"], (ref.variant, ref.config_hash, ref.backend),
        version, str(api.explorer.corpus_info(c)["imported_at"]), c)
    if table is None:
        st.caption("No gold evidence unit (or no stored trace) for this row: nothing to rank.")
        return
    st.caption(whatif_view.EXPLAIN)
    st.dataframe(table, hide_index=True)
