"""Stored runs: the Run selector's choices, a run's result rows (or rows rebuilt from the app's traces), and the
background batch's progress. Not a page."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from tmem import api
from tmem.api import ExplorerContext
from tmem.viz import progress as progress_view
from tmem.viz.safe import md


@st.cache_data(show_spinner="Reading stored traces…", max_entries=8)
def _trace_results(db: str, corpus: str, stamp: str) -> pd.DataFrame:
    return api.explorer.app_results(db, corpus)


def run_choices(c: ExplorerContext) -> list[str]:
    """Stored batch runs of the corpus (newest first), then the traces run in the app."""
    return [*api.explorer.batch_run_ids(c), api.APP_RUN]


def run_label(c: ExplorerContext):
    """The Run selector's text for a run: its id, and whether it is an app batch that stopped half-way."""
    def label(run: str) -> str:
        note = api.explorer.incomplete_run_note(c, run) if run != api.APP_RUN else ""
        return f"{run} — {note.split(' (')[0]}" if note else run
    return label


def incomplete_warning(c: ExplorerContext, run: str) -> None:
    """Under the Run selector: what an app batch that stopped half-way is missing."""
    note = api.explorer.incomplete_run_note(c, run) if run != api.APP_RUN else ""
    if note:
        st.warning(md(f"This run is {note}."), icon=":material/warning:")


def results(c: ExplorerContext, run: str) -> pd.DataFrame:
    """Result rows of a batch run, or rows rebuilt from the traces stored by the app (cached until a new one)."""
    if run != api.APP_RUN:
        return api.explorer.batch_run_results(c, run)
    index = api.explorer.trace_index(c)
    stamp = f"{len(index)}:{index['created_at'].max() if len(index) else ''}"
    return _trace_results(c.database, c.corpus, stamp)



def batch_status(c: ExplorerContext) -> None:
    """The database's background batch run (tmem.evaluation.batch.jobs; the Failures page starts one): a progress bar
    redrawn every second while it runs, and a rerun of the whole page each time a variant's results are stored, so
    the page's tables fill in as the run goes. On a first start the demo batch starts here, before the page draws
    (app.py starts it only after a page): a page it fills shows it running from its first draw."""
    if c.corpus == "demo" and not api.explorer.batch_jobs(c):
        api.explorer.ensure_demo_batch(c)
    # the database's latest batch of this corpus ("Show its results" for the demo's batch showed on other corpora)
    job = next(iter(reversed([j for j in api.explorer.batch_jobs(c) if j.corpus == c.corpus])), None)
    if job is None:
        return

    @st.fragment(run_every=1.0 if job.running else None)
    def panel():
        progress = job.progress()
        seen = st.session_state.setdefault("batch_seen", {})
        if seen.setdefault(job.label, (len(progress.finished), job.running)) != (len(progress.finished), job.running):
            seen[job.label] = (len(progress.finished), job.running)
            st.rerun(scope="app")  # new results stored (or the run ended): redraw the tables
        line = md(progress_view.progress_line(job.label, progress))
        if progress.state == "running":
            bar, stop = st.columns([6, 1])
            bar.progress(progress.fraction, text=line)
            stop.button("Cancel", key=f"cancel-{job.label}", on_click=job.cancel, icon=":material/stop:")
        elif progress.state == "failed":
            st.warning(line, icon=":material/warning:")
        elif progress.finished:
            st.caption(line)

    panel()
    # outside the fragment (a full rerun draws it; the fragment reruns the app when a variant lands): the Run
    # selector keeps the user's pick until asked, and a callback sets it before the selector is drawn
    finished = job.progress().finished
    run_id = job.run_id if finished else None
    if run_id and st.session_state.get("run") != run_id:
        st.button(f"Show its results ({', '.join(finished)})", key=f"show-{job.label}", icon=":material/table_view:",
                  on_click=show_run, args=(run_id,))


def show_run(run_id: str) -> None:
    st.session_state["run"] = run_id  # the selector is bound to the URL: it updates it

