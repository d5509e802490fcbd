"""The shared sidebar (corpus, scope, variant, overrides, active backend) and the `ExplorerContext` it builds, with the
database (opened once per process by tmem.api.explorer) and model roles behind it. Not a page.

Why `ctx()` may find no shell: while a `pages/` folder exists, Streamlit runs the *first* session of a server in
its legacy pages-folder mode until some session executes `st.navigation` (so does AppTest's first run), and a deep
link opened first then runs its page file without app.py. app.py marks each of its runs; a page run without the
mark draws the same shell (and, before app.py ever ran in this process, the app's pages as sidebar links).
"""
from __future__ import annotations

import streamlit as st

from pages._callouts import failure_callout
from pages._links import unpin_trace
from tmem import api
from tmem.api import ExplorerContext, backends, models
from tmem.config import VARIANTS
from tmem.viz import run_settings
from tmem.viz.navigation import PAGES
from tmem.viz.safe import md

# Emoji icon only: Streamlit fetches a :material/...: favicon from fonts.gstatic.com, an emoji becomes a data: URL.
PAGE_CONFIG = {"page_title": "T-Mem explorer", "page_icon": "🌳", "layout": "wide"}


@st.cache_resource(show_spinner="Opening the database…")
def open_database(path: str) -> str:
    """One Store (one read-write DuckDB connection, a cursor per query) per database path per process, kept by
    tmem.api.explorer; the pages hold its path."""
    return api.explorer.open_database(path)


@st.cache_resource(show_spinner="Loading model roles…")
def get_roles(backend_key: tuple, path: str):
    return api.explorer.database_roles(open_database(path), dict(backend_key))


def _roles(backend_overrides: dict, db_path: str):
    try:
        if backends.SESSION_KEY_ENV not in backend_overrides.values():
            return get_roles(tuple(sorted(backend_overrides.items())), db_path)
        # an endpoint with the session's own key: its roles live in this session only, never in a shared cache
        key = (tuple(sorted(backend_overrides.items())), db_path)
        held = st.session_state.get("_session_roles")
        if held is None or held[0] != key:
            held = (key, api.explorer.database_roles(open_database(db_path), backend_overrides,
                                                     session_key=st.session_state.get("session_api_key")))
            st.session_state["_session_roles"] = held
        return held[1]
    except Exception as exc:  # a bad backend setting must not take the whole app down
        st.error(f"Backend settings rejected: {md(str(exc))} Using the offline stand-ins.")
        return models.offline_roles()


def shell() -> ExplorerContext:
    """Draw the shared sidebar (corpus, scope, variant, overrides, active backend) and store the context."""
    for key, value in st.session_state.pop("_pending", {}).items():  # set by open_question before a switch
        st.session_state[key] = value
    db_path = str(api.default_db_path())
    try:
        database = open_database(db_path)
    except ValueError as exc:  # StoreInUse, or not a DuckDB file
        failure_callout(exc, "The database cannot be opened")
        st.stop()
    corpora = api.explorer.corpus_names(database)
    if "config_overrides" not in st.session_state:
        st.session_state["config_overrides"] = api.url_overrides(st.query_params.get("cfg"))
    overrides: dict = st.session_state["config_overrides"]
    with st.sidebar:
        st.markdown("### T-Mem explorer")
        corpus = st.selectbox("Corpus", corpora, key="corpus", bind="query-params",
                              index=corpora.index("demo") if "demo" in corpora else 0) if corpora else None
        curated = api.explorer.first_question(database, corpus) if corpus else None
        scopes = api.explorer.corpus_scopes(database, corpus) if corpus else []
        scope = st.selectbox("Scope", scopes, key="scope", bind="query-params",
                             index=scopes.index(curated[0]) if curated and curated[0] in scopes else 0,
                             help="Memory scope: retrieval for a question only sees its own scope.") if scopes else None
        variant = st.selectbox("Variant", list(VARIANTS), key="variant", bind="query-params", on_change=unpin_trace,
                               help="Configuration preset (ablations of paper Sec. 5.5/5.7, App. E).")
        st.caption(VARIANTS[variant][0])
        if overrides:
            st.caption("Parameter overrides: " + md(api.format_overrides(overrides)))
            st.query_params["cfg"] = api.format_overrides(overrides)
        elif "cfg" in st.query_params:
            del st.query_params["cfg"]
        roles = _roles(st.session_state.setdefault("backend_overrides", {}), db_path)
        config = api.resolve_config(variant, overrides)
        relation = models.relation_backend(roles.relation, config.structuring) or ""
        if run_settings.all_offline(roles):
            st.info("**Backend: offline.** Deterministic stand-ins answer, select and link — not language models"
                    + (f" (links: {md(relation)})." if relation else "."), icon=":material/cloud_off:")
        else:
            st.success("**Backend:**\n" + "\n".join(f"- {md(line)}" for line in run_settings.backend_banner(
                roles, relation)), icon=":material/cloud:")
            if backends.is_recorded(roles):  # say exactly what produced these answers, and that nothing runs now
                st.info(f"**{md(backends.load_recording().label)}** — replayed from data/recorded-local.json: no "
                        "server, no model call.", icon=":material/replay:")
    context = ExplorerContext(database=database, corpus=corpus, scope=scope, variant=variant, overrides=overrides,
                              config=config, roles=roles, curated=curated)
    st.session_state["tmem_ctx"] = context
    return context


_app_seen = False  # app.py has run in this process: Streamlit's legacy pages-folder mode is over for the server


def ctx() -> ExplorerContext:
    """The context of this run: the one app.py's shell built, or (page run without app.py) a fresh shell."""
    global _app_seen
    if st.session_state.pop("_app_ran", False) and "tmem_ctx" in st.session_state:
        _app_seen = True
        return st.session_state["tmem_ctx"]
    st.set_page_config(**PAGE_CONFIG)  # app.py did not run: apply its page config too (allowed again in 1.67)
    if not _app_seen:
        # A deep link opened as the server's first session: Streamlit's legacy pages-folder mode runs this page
        # file, with its navigation of file names hidden (app.py, config.toml). Offer the app's pages as links to
        # the same files instead. (Drawing st.navigation here would end that mode mid-session: the link's page is
        # not an app URL, and widget ids would change between two runs.)
        with st.sidebar:
            for path, title, _, _ in PAGES:
                st.page_link(path, label=title)
    return shell()
