"""Sweeps a `python -m tmem sweep` process is measuring now, said on the Sweep page instead of a silently partial
heat-map (the batch run's panel, on the pages it fills, is pages/_runs.batch_status): a progress bar per sweep,
redrawn while it runs, and the page reruns when it ends. Not a page."""
from __future__ import annotations

import streamlit as st

from tmem import api
from tmem.api import ExplorerContext
from tmem.viz import progress as progress_view
from tmem.viz.safe import md


def sweep_status(c: ExplorerContext) -> None:
    """A progress bar per sweep of the corpus being measured now, redrawn every two seconds; the page reruns when
    one ends (its last cells are then stored)."""
    if not api.explorer.running_sweeps(c):
        st.session_state.pop("sweeps_seen", None)
        return

    @st.fragment(run_every=2.0)
    def panel():
        running = api.explorer.running_sweeps(c)
        names = sorted(p.sweep for p in running)
        if names != st.session_state.setdefault("sweeps_seen", names):  # one ended: redraw with all its rows
            st.session_state["sweeps_seen"] = names
            st.rerun(scope="app")
        for p in running:
            st.progress(p.fraction, text=md(progress_view.sweep_line(p)))

    panel()

