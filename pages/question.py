"""Question view: run (or load the stored trace of) one question and show why its answer came out as it did; or
show exactly the stored trace a Failures/Compare row or a link names (`trace_variant`, `trace_config`,
`trace_backend`). The tabs are in pages/_question_tabs.py, the run and a Failures row's banner in
pages/_question_run.py."""
from __future__ import annotations

import streamlit as st

from pages._links import pinned_trace, unpin_trace
from pages._question_run import run_pipeline
from pages._question_tabs import context_tab, forest_tab, recovered_tab, spans_tab, stages_tab, timeline_tab
from pages._question_top import top
from pages._shell import ctx
from pages._widgets import messages, offline_label, synced
from tmem import api
from tmem.api import ExplorerContext, backends
from tmem.viz import run_settings
from tmem.viz.batch import results as results_view
from tmem.viz.question import answers as answer_view
from tmem.viz.question import asof, evidence
from tmem.viz.report import question as report
from tmem.viz.safe import md, shorten


def choose_question(c: ExplorerContext):
    """The question picker and the ask-your-own popover: (question, its gold or None, typed text, curated id)."""
    questions = {q.id: q for q in api.explorer.questions(c, c.scope)}
    ids = list(questions)
    curated = c.curated[1] if c.curated and c.curated[0] == c.scope and c.curated[1] in questions else None
    pick, own = st.columns([3, 2])
    # a typed question is the one shown: the picker says so instead of naming a stored question that is not shown
    typed = st.session_state.get("text") or st.query_params.get("text")
    qid = synced(pick.selectbox, "Question", ids, "q", default=curated or (ids[0] if ids else None), always=True,
                 disabled=bool(typed), help="Clear *Ask your own question* to pick a stored one." if typed else None,
                 format_func=(lambda i: "— your own question (below) —") if typed else
                 (lambda i: f"{i} · {questions[i].type or '—'} · {shorten(questions[i].text, 90)}"))
    with own.popover("Ask your own question", icon=":material/edit:", width="stretch"):
        text = st.text_input("Question text", key="text", bind="query-params")
        user = st.text_input("Asking user", key="user", bind="query-params", placeholder="e.g. User_3")
    if not text and not ids:
        st.info("This scope has no stored questions: type your own question.")
        st.stop()
    question = api.adhoc_question(c.scope, text, user) if text else questions[qid]
    gold = None if text else api.explorer.question_gold(c, c.scope, question.id)
    return question, gold, text, curated == qid


def stored_or_run(c: ExplorerContext, question, gold, text: str, curated: bool):
    """The trace to show: a pinned stored trace exactly as stored, or the sidebar's (run here on request, or at once
    for the demo's curated question); (trace, the TraceRef shown, the pin or None). Stops when there is none."""
    # a Failures/Compare row or a link may pin one stored trace (e.g. of the `embedding` baseline, another config
    # hash or another backend): it is shown exactly, never looked up with the sidebar's settings
    pinned = None if text else pinned_trace(c, question.scope, question.id)
    shown = pinned or c.sidebar_trace
    key = (c.corpus, question.scope, question.id, shown)
    cache = st.session_state.setdefault("traces", {})
    trace = cache.get(key) or api.explorer.stored_trace(c, question.scope, question.id, shown)
    st.markdown(f"#### {md(question.text)}")
    st.caption(f"{md(question.id)} · type {md(question.type or '—')} · asked by {md(question.asking_user or '—')} · "
               f"variant **{md(shown.variant)}** · config {md(shown.config_hash)}" + ("" if pinned else
                                                                                   offline_label(c.offline)))
    if pinned:
        st.info(f"**Stored trace** of variant **{md(pinned.variant)}**, config {md(pinned.config_hash)}, backend "
                f"{md(pinned.backend)}, from a batch run or an earlier app run: the sidebar's variant, parameters "
                "and backend do not apply to it, and it is not re-run here.", icon=":material/push_pin:")
        st.button(f"Show the sidebar's variant instead ({c.variant}, config {c.sidebar_trace.config_hash})",
                  on_click=unpin_trace, key="unpin", icon=":material/arrow_back:")
        if trace is None:
            st.warning("That stored trace does not exist for this question: it may have been stored in another "
                       "database, or the corpus was re-imported since (which deletes its traces).")
            st.stop()
    else:
        slot = st.empty()
        demo_path = c.corpus == api.DEMO_CORPUS and curated and c.variant == "full" and not c.overrides and not text
        # the demo opens with its answer (offline, or the recorded local model: no server either); else the button
        autorun = trace is None and demo_path and (c.offline or backends.is_recorded(c.roles))
        if autorun or slot.button("Run the pipeline" if trace is None else "Re-run", type="primary" if trace is None
                                  else "tertiary", icon=":material/play_arrow:", key="run_button"):
            cache[key] = run_pipeline(c, question, gold, slot)
            st.rerun()  # redraw with the stored trace (and a "Re-run" button)
        if trace is None:
            st.info("No stored trace for this question, variant, configuration and backend yet. Press **Run the "
                    "pipeline**.")
            st.stop()
    cache[key] = trace
    return trace, shown, pinned


def as_of_moment(question, trace, gold, shown):
    """The as-of slider's steps, its opening moment (just before the latest change of the question's chain) and the
    moment picked (None until moved; a link's `asof=` restores it)."""
    picks = asof.moments(trace.nodes)  # (time, message ids): the slider steps from one stated state to the next
    times = [t for t, _ in picks]
    opening = asof.opening_moment(trace.nodes, asof.question_ids(trace, gold))
    asof_key = f"asof-{question.id}-{shown.variant}-{shown.config_hash}"
    if times and asof_key not in st.session_state:  # a link's moment (`asof=`) restores the slider
        linked = asof.moment_from_param(st.query_params.get("asof"), (times[0], times[-1]))
        if linked is not None:
            st.session_state[asof_key] = asof.snap(linked, times)
    moment = st.session_state.get(asof_key)
    moment = moment if times and moment is not None and moment != opening else None  # drawn once it was moved
    return picks, asof_key, moment, opening


def tabs(c: ExplorerContext, question, trace, frame, gold, shown, pinned) -> None:
    """The six tabs; only the open one is drawn."""
    stats = evidence.statuses(trace, gold)
    topics = dict(zip(frame["id"], frame["topic"]))
    picks, asof_key, moment, opening = as_of_moment(question, trace, gold, shown)
    lost = answer_view.lost_unit(trace, gold) if any(card.verdict in ("wrong", "error") for card in
                                                      answer_view.answer_cards(trace)) else ()
    # Only the open tab runs and is sent to the browser: the forest's HTML, the span markup and the tables of hidden
    # tabs cost about a second of server time, and the browser's layout, on every redraw. The open tab is in the URL
    # (`tab=`), so a link opens the same tab.
    tab_timeline, tab_recovered, tab_forest, tab_spans, tab_context, tab_stages = st.tabs(
        ["Timeline", "Recovered", "Forest", "Spans", "Context", "Stages"], key="tab", bind="query-params")
    # the what-if re-runs compression under the trace's own preset (a batch baseline such as `embedding` has none)
    whatif_config = (api.resolve_config(shown.variant) if shown.is_preset else None) if pinned else c.config
    for tab, draw in ((tab_timeline, lambda: timeline_tab(c, question, trace, frame, gold, lost, moment)),
                      (tab_recovered, lambda: recovered_tab(question, trace, frame, gold, stats)),
                      (tab_forest, lambda: forest_tab(c, trace, gold, topics, asof_key, picks, opening)),
                      (tab_spans, lambda: spans_tab(c, trace, gold, whatif_config)),
                      (tab_context, lambda: context_tab(c, trace, gold, frame)),
                      (tab_stages, lambda: stages_tab(trace, gold, f"stages-{question.id}-{shown.variant}"))):
        if tab.open:
            with tab:
                draw()


def downloads(c: ExplorerContext, question, trace, frame, gold, shown, pinned) -> None:
    """The HTML report and the trace as JSON, each built only when its button is clicked."""
    backends = results_view.backend_rows(pinned.backend) if pinned else run_settings.role_rows(c.roles)
    row = st.container(horizontal=True)  # sized by the buttons: columns cut "HTML report" at 1100 px
    rejected = bool(st.session_state.get("rejected"))  # read now: the download runs outside this script run

    def report_html() -> bytes:
        """Built when the button is clicked, not on every redraw: the report lays out the whole forest as SVG."""
        recovered = evidence.recovered_table(trace, frame, gold, include_rejected=rejected)
        funnel = evidence.funnel_table(trace, gold) if gold and gold.evidence else None
        return report.question_report(trace, gold, recovered, funnel, run_settings.trace_summary(trace), backends,
                                      frame).encode()

    row.download_button("HTML report", report_html, f"tmem-{question.id}-{shown.variant}.html", "text/html",
                        icon=":material/description:")
    row.download_button("Trace JSON", lambda: trace.to_json().encode(), f"trace-{question.id}-{shown.variant}.json",
                        "application/json", icon=":material/data_object:")


def render() -> None:
    c = ctx()
    if not c.corpus or not c.scope:
        st.info("No corpus loaded yet: import one on the Corpus page.")
        st.page_link("pages/corpus.py", label="Open Corpus", icon=":material/forum:")
        st.stop()
    question, gold, text, curated = choose_question(c)
    trace, shown, pinned = stored_or_run(c, question, gold, text, curated)
    frame = messages(c, c.scope)
    top(c, question, trace, gold)
    tabs(c, question, trace, frame, gold, shown, pinned)
    downloads(c, question, trace, frame, gold, shown, pinned)


render()
