"""Opening one question: a switch to the Question page (optionally pinned to one stored trace of a result row), the
pin itself, and a link that opens the same view. Not a page."""
from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from tmem.api import ExplorerContext, TraceRef

QUESTION_PAGE = "pages/question.py"
PIN = "pinned_trace"  # session-state key: (corpus, scope, question id, TraceRef) or None


def open_question(c: ExplorerContext, scope: str, question_id: str, trace: TraceRef | None = None) -> None:
    """Switch to the Question page showing one question — with `trace`, exactly that stored trace (a result row's)
    rather than the sidebar's variant. app.py applies the pending sidebar values before its widgets exist on the
    next run (bound widgets cannot be set through the URL once they exist). The sidebar's variant stays the user's:
    opening a flat row once must not leave every later question running flat."""
    pending = {"corpus": c.corpus, "scope": scope, "tab": "Timeline"}  # a question opens on its timeline (the lost
    # unit of a failure is ringed there), not on whichever tab the last question had open
    st.session_state["_pending"] = pending
    st.session_state["q"] = question_id
    st.session_state[PIN] = (c.corpus, scope, question_id, trace) if trace else None
    st.session_state.pop("text", None)
    st.switch_page(QUESTION_PAGE, query_params={"q": question_id, **(trace.to_params() if trace else {})})


def pinned_trace(c: ExplorerContext, scope: str, question_id: str) -> TraceRef | None:
    """The stored trace a result row or a link pinned for this question, else None (the sidebar's variant applies).

    Kept in session state (read once from the URL: AppTest and page switches carry no browser URL) and mirrored to
    the URL. A pin of another question is dropped (the user picked another one), and so is a pin naming exactly
    the trace the sidebar selects (nothing to tell apart: the page keeps its Re-run button)."""
    if PIN not in st.session_state:
        ref = TraceRef.from_params(st.query_params.to_dict())
        where = (st.query_params.get("corpus", c.corpus), st.query_params.get("scope", c.scope),
                 st.query_params.get("q"))
        st.session_state[PIN] = (*where, ref) if ref else None
    pin = st.session_state[PIN]
    ref = pin[3] if pin and pin[:3] == (c.corpus, scope, question_id) else None
    if ref == c.sidebar_trace:
        ref = None
    if ref is None:
        st.session_state[PIN] = None
    for name in TraceRef.PARAMS:
        st.query_params.pop(name, None)
    st.query_params.update(ref.to_params() if ref else {})
    return ref


def unpin_trace() -> None:
    """Back to the sidebar's variant (the pinned trace's button; a change of the sidebar's variant)."""
    st.session_state[PIN] = None



def question_url(c: ExplorerContext, scope: str, question_id: str, trace: TraceRef | None = None) -> str:
    """A relative link that opens one question (for LinkColumn cells) — with `trace`, exactly that stored trace."""
    params = {"corpus": c.corpus, "scope": scope, "q": question_id}
    if trace is not None:
        params.update(({"variant": trace.variant} if trace.is_preset else {}) | trace.to_params())
    return "/?" + urlencode(params)

