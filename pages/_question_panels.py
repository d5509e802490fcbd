"""The Question view's panels below a tab: the state of each UPDATE chain as of a moment (Forest) and the
conversation around a message (Timeline, Recovered). Not a page."""
from __future__ import annotations

import streamlit as st

from pages._widgets import export_buttons, text_table
from tmem.viz.batch import tables
from tmem.viz.question import asof, evidence
from tmem.viz.safe import md


def asof_panel(trace, topics: dict, key: str, picks) -> None:
    """State as of a moment: for each UPDATE chain, the state that held then and what superseded it later."""
    st.markdown("**State as of a moment**")
    if not picks:
        st.caption("This forest has no UPDATE chain: no state changes to follow over time.")
        return
    times, ids = [t for t, _ in picks], dict(picks)
    hi = times[-1]
    if len(times) == 1:
        moment = hi
    else:
        start = {} if key in st.session_state else {"value": hi}  # set from a link (`asof=`) or moved before
        moment = st.select_slider("Pick a moment: each step is a message that stated a state (also drawn on the "
                                  "timeline)", options=times, key=key,
                                  format_func=lambda t: f"{t:%Y-%m-%d %H:%M} · {ids[t]}", **start)
    if moment < hi:  # the URL keeps a picked moment, so a shared link shows the same state
        st.query_params["asof"] = asof.moment_param(moment)
    else:
        st.query_params.pop("asof", None)
    table = asof.asof_table(trace.nodes, moment, topics)
    later = int((table["superseded by"] != "—").sum())
    st.caption(f"As of {moment:%Y-%m-%d %H:%M}: {len(table)} UPDATE chain(s); {later} held a state that later "
               "messages superseded. An UPDATE edge replaces its parent's state; EXPAND only supports it.")
    text_table(table, 1, ["chain", "state then", "superseded by", "status", "message", "stated", "author", "topic",
                          "earlier states", "states"])


def conversation_panel(frame, focus: str, trace, gold) -> None:
    """The conversation around one selected message, with its evidence status."""
    conversation = evidence.conversation_around(frame, focus, trace, gold)
    st.markdown(f"**Conversation around {md(focus)}**")
    text_table(tables.readable_frame(conversation), 3,
               ["focus", "status", "id", "timestamp", "author", "channel", "topic", "text"])
    export_buttons(conversation, f"conversation-{focus}")
