"""The Question view's panels below a tab: the state of each UPDATE chain as of a moment (Forest) and the
conversation around a message (Timeline, Recovered). Not a page."""
from __future__ import annotations

import streamlit as st

from pages._widgets import export_buttons, text_table
from tmem.viz.batch import tables
from tmem.viz.question import asof, evidence
from tmem.viz.question import structuring as structuring_view
from tmem.viz.safe import md


def asof_panel(trace, gold, topics: dict, key: str, picks, opening) -> None:
    """State as of a moment: for each UPDATE chain, the state that held then and what superseded it later; it opens
    just before the latest change of the question's chain. Below it, that chain's states over time."""
    st.markdown("**State as of a moment**")
    if not picks:
        st.caption("This forest has no UPDATE chain: no state changes to follow over time.")
        return
    times, ids = [t for t, _ in picks], dict(picks)
    if len(times) == 1:
        moment = times[0]
    else:
        start = {} if key in st.session_state else {"value": opening}  # set from a link (`asof=`) or moved before
        moment = st.select_slider("Pick a moment: each step is a message that stated a state (also drawn on the "
                                  "timeline); it opens just before the latest change of the question's chain",
                                  options=times, key=key, **start,
                                  format_func=lambda t: asof.moment_label(t, ids[t], trace.nodes))
    if moment != opening:  # the URL keeps a picked moment, so a shared link shows the same state
        st.query_params["asof"] = asof.moment_param(moment)
    else:
        st.query_params.pop("asof", None)
    table = asof.asof_table(trace.nodes, moment, topics)
    later = int((table["superseded by"] != "—").sum())
    st.caption(f"As of {moment:%Y-%m-%d %H:%M}: {len(table)} UPDATE chain(s); {later} held a state that later "
               "messages superseded. An UPDATE edge replaces its parent's state; EXPAND only supports it.")
    text_table(table, 1, ["chain", "state then", "superseded by", "status", "message", "stated", "author", "topic",
                          "earlier states", "states"])
    state_strip(trace, gold)


def state_strip(trace, gold) -> None:
    """The question's decision over time: each state, who set it and when, and the edge (and role) that made it."""
    chain = asof.relevant_chain(trace.nodes, asof.question_ids(trace, gold))
    if chain is None:
        return
    stage = trace.stage("structuring")
    built_by = stage.backend.split(";", 1)[0].strip() if stage else "—"
    decisions = {d.child_id: (d.confidence, d.note) for d in trace.decisions}
    st.markdown("**The question's decision over time**")
    st.caption("Each state of the UPDATE chain the question is about (its gold evidence, else what the answer "
               "cites), the words that changed from the state before, who set it and when, and the relation role "
               "that built each UPDATE edge with its UPDATE precision measured on held-out case studies.")
    text_table(asof.state_strip(chain, decisions, built_by, structuring_view.update_precision(built_by)), 2,
               ["step", "state", "set by", "when", "message", "edge", "built by", "role's UPDATE precision"])


def conversation_panel(frame, focus: str, trace, gold) -> None:
    """The conversation around one selected message, with its evidence status."""
    conversation = evidence.conversation_around(frame, focus, trace, gold)
    st.markdown(f"**Conversation around {md(focus)}**")
    text_table(tables.readable_frame(conversation), 3,
               ["focus", "status", "id", "timestamp", "author", "channel", "topic", "text"])
    export_buttons(conversation, f"conversation-{focus}")
