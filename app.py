"""T-Mem explorer: entry point (`streamlit run app.py`). See docs/app.md.

The shared sidebar (corpus, scope, variant, active backend) is drawn by `pages._shell.shell()`; its selectors are
widgets bound to query parameters (`bind="query-params"`), so a link reopens the same view and the selection
survives page switches; paper-parameter overrides from the Settings page travel as `cfg=`. The pages in pages/
only read the `ExplorerContext` the shell builds and render view models from `tmem.viz`.

`make run` serves it through `python -m tmem app` (tmem/commands/app.py), which loads the library and the BPE
ranks in a background thread while the server starts (tmem.warmup); here the first session waits for that thread
instead of importing the same modules beside it. Under plain `streamlit run app.py` there is nothing to wait for.

DuckDB: ONE `Store` per database path per process (`st.cache_resource` in pages/_shell.py). It is read-write,
because DuckDB refuses a read-only and a read-write connection to the same file in one process and the app
writes (stored traces, imports). Every Store method takes its own `cursor()`, so concurrent sessions (threads)
never share a cursor; writes go through the Store's lock. The Store holds the file only while queries run
(tmem.store.lease), so `python -m tmem run` works while the app is open. The database is $TMEM_DB, else
data/tmem.duckdb; on first use `tmem.api.open_store` loads the shipped demo corpus.

The demo's out-of-the-box batch (offline, all its questions, the main variants: tmem.evaluation.batch.jobs) starts in
the background once the first screen is up — after the page that shows the curated question's stored trace has run,
or after any other page — so it never competes with the first answer for the CPU; Failures and Compare fill in as
it runs.
"""
from __future__ import annotations

import sys

import streamlit as st

from tmem import warmup  # small: `python -m tmem app` loads the library in the background while the server starts
from tmem.viz.navigation import PAGES  # data only: the navigation is drawn before the library loads

st.set_page_config(page_title="T-Mem explorer", page_icon="🌳", layout="wide")  # = pages.PAGE_CONFIG
# The navigation comes first, before the library loads. While a pages/ folder exists, Streamlit serves a new
# server's first session in its legacy pages-folder mode until some session runs st.navigation: it would draw a
# navigation of lowercase file names (app, compare, ...) for the seconds the import below takes. .streamlit/
# config.toml therefore hides the sidebar navigation (`client.showSidebarNavigation = false`: the legacy one stays
# hidden) and the app turns it back on here, for its own navigation (a scriptable option, set process-wide).
st.set_option("client.showSidebarNavigation", True)
page = st.navigation([st.Page(path, title=title, url_path=url, default=default) for path, title, url, default in PAGES])
if "pages._shell" not in sys.modules or warmup.pending():  # the first run after a server start loads the library
    booting = st.empty()
    booting.info("Starting the explorer: loading the T-Mem library (once per server start)…",
                 icon=":material/hourglass_top:")

warmup.wait()  # under `python -m tmem app`: the background import of the library, not a second one beside it
from pages._callouts import failure_callout  # noqa: E402 - after the navigation and the boot message
from pages._shell import PAGE_CONFIG, shell  # noqa: E402
from tmem.api import explorer  # noqa: E402
from tmem.api.errors import StoreInUse  # noqa: E402

st.set_page_config(**PAGE_CONFIG)  # no page icons: a :material/...: icon is fetched from a CDN as favicon
if "booting" in globals():
    booting.empty()
try:
    context = shell()
    st.session_state["_app_ran"] = True  # the page of this run reuses the shell's context (pages/_shell.py: ctx)
    page.run()
except StoreInUse as exc:  # another process held the database past the lease's wait: a callout, not a traceback
    failure_callout(exc, "The database is busy")
    st.stop()
# after the page, not before it: the redraw that follows the curated question's first run is the answer screen, and
# a batch process started at its beginning took the CPU from it (answer screen 4.7-5.2 s -> see docs/app.md)
if context.corpus == "demo" and not explorer.batch_jobs(context) and (
        page.title != "Question" or len(explorer.trace_index(context))):
    explorer.ensure_demo_batch(context)
