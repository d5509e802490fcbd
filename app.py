"""T-Mem explorer: entry point (`streamlit run app.py`). See docs/app.md.

The shared sidebar (corpus, scope, variant, active backend) is drawn by `pages.shell()`; its selectors are
widgets bound to query parameters (`bind="query-params"`), so a link reopens the same view and the selection
survives page switches; paper-parameter overrides from the Settings page travel as `cfg=`. The pages in pages/
only read the `ExplorerContext` the shell builds and render view models from `tmem.viz`.

DuckDB: ONE `Store` per database path per process (`st.cache_resource` in pages/__init__.py). It is read-write,
because DuckDB refuses a read-only and a read-write connection to the same file in one process and the app
writes (stored traces, imports). Every Store method takes its own `cursor()` on that connection, so concurrent
sessions (threads) never share a cursor; writes go through the Store's lock. The database is $TMEM_DB, else
data/tmem.duckdb; on first use `open_store` loads the shipped demo corpus.
"""
from __future__ import annotations

import streamlit as st

from pages import PAGE_CONFIG, shell

st.set_page_config(**PAGE_CONFIG)  # no page icons: a :material/...: icon is fetched from a CDN as favicon
shell()
st.session_state["_app_ran"] = True  # the page of this run reuses the shell's context (pages/__init__.py: ctx)
page = st.navigation([
    st.Page("pages/corpus.py", title="Corpus", url_path="corpus"),
    st.Page("pages/question.py", title="Question", url_path="question", default=True),
    st.Page("pages/failures.py", title="Failures", url_path="failures"),
    st.Page("pages/compare.py", title="Compare", url_path="compare"),
    st.Page("pages/settings.py", title="Settings", url_path="settings"),
])
page.run()
