"""T-Mem explorer: entry point (`streamlit run app.py`). See docs/app.md.

The shared sidebar (corpus, scope, variant, active backend) is drawn by `pages.shell()`; its selectors are
widgets bound to query parameters (`bind="query-params"`), so a link reopens the same view and the selection
survives page switches; paper-parameter overrides from the Settings page travel as `cfg=`. The pages in pages/
only read the `ExplorerContext` the shell builds and render view models from `tmem.viz`.

DuckDB: ONE `Store` per database path per process (`st.cache_resource` in pages/__init__.py). It is read-write,
because DuckDB refuses a read-only and a read-write connection to the same file in one process and the app
writes (stored traces, imports). Every Store method takes its own `cursor()`, so concurrent sessions (threads)
never share a cursor; writes go through the Store's lock. The Store holds the file only while queries run
(tmem.lease), so `python -m tmem run` works while the app is open. The database is $TMEM_DB, else
data/tmem.duckdb; on first use `tmem.api.open_store` loads the shipped demo corpus.

The demo's out-of-the-box batch (offline, all its questions, the main variants: tmem.evaluation.jobs) starts in
the background once the first screen is up — after the curated question's trace exists, or at once on any other
page — so it never competes with the first answer for the CPU; Failures and Compare fill in as it runs.
"""
from __future__ import annotations

import sys

import streamlit as st

if "pages" not in sys.modules:  # the first run after a server start imports the library (seconds): say so meanwhile
    st.set_page_config(page_title="T-Mem explorer", page_icon="🌳", layout="wide")  # = pages.PAGE_CONFIG
    booting = st.empty()
    booting.info("Starting the explorer: loading the T-Mem library (once per server start)…",
                 icon=":material/hourglass_top:")

from pages import PAGE_CONFIG, shell  # noqa: E402 - after the boot message
from tmem.evaluation import jobs  # noqa: E402

st.set_page_config(**PAGE_CONFIG)  # no page icons: a :material/...: icon is fetched from a CDN as favicon
if "booting" in globals():
    booting.empty()
context = shell()
st.session_state["_app_ran"] = True  # the page of this run reuses the shell's context (pages/__init__.py: ctx)
page = st.navigation([
    st.Page("pages/corpus.py", title="Corpus", url_path="corpus"),
    st.Page("pages/question.py", title="Question", url_path="question", default=True),
    st.Page("pages/failures.py", title="Failures", url_path="failures"),
    st.Page("pages/compare.py", title="Compare", url_path="compare"),
    st.Page("pages/sweep.py", title="Sweep", url_path="sweep"),
    st.Page("pages/structuring.py", title="Structuring", url_path="structuring"),
    st.Page("pages/recall.py", title="Recall", url_path="recall"),
    st.Page("pages/judge_audit.py", title="Judge audit", url_path="judge-audit"),
    st.Page("pages/settings.py", title="Settings", url_path="settings"),
])
if context.corpus == "demo" and not jobs.jobs(context.store.path) and (
        page.title != "Question" or len(context.store.trace_index("demo"))):
    jobs.ensure_demo_batch(context.store)
page.run()
