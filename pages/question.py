"""Question view: run (or load the stored trace of) one question and show why its answer came out as it did; or
show exactly the stored trace a Failures/Compare row or a link names (`trace_variant`, `trace_config`,
`trace_backend`)."""
from __future__ import annotations

import time

import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx

from pages import (
    PIN,
    ctx,
    export_buttons,
    failure_callout,
    messages,
    offline_label,
    pinned_trace,
    preview_seeds,
    synced,
    text_table,
    unpin_trace,
)
from pages.question_panels import asof_panel, conversation_panel
from tmem import api
from tmem.demo import DEMO_CORPUS
from tmem.models.local.recorded import is_recorded
from tmem.models.local.server import watch as local_watch
from tmem.models.patterns import trace_patterns
from tmem.viz import explorer
from tmem.viz.batch import results as results_view
from tmem.viz.batch import tables
from tmem.viz.progress import eta_suffix
from tmem.viz.question import answers as answer_view
from tmem.viz.question import asof, evidence, forest, spans, timeline
from tmem.viz.question.answers import readable
from tmem.viz.report import question as report
from tmem.viz.safe import md, shorten

FAILURE_NAV = "failure_nav"  # session state set by the Failures page: its filtered rows, the open one, its filters


def step_failure(nav: dict, index: int) -> None:
    """Previous / next row (a button callback: it runs before the widgets exist, so it may set the question and
    the sidebar's pending values the way open_question does, without leaving the page)."""
    nav["index"] = index
    row = nav["rows"][index]
    ref = row["ref"]
    st.session_state["_pending"] = {"corpus": c.corpus, "scope": row["scope"], "tab": "Timeline",
                                    **({"variant": ref.variant} if ref is not None and ref.is_preset else {})}
    st.session_state["q"] = row["question_id"]
    st.session_state[PIN] = (c.corpus, row["scope"], row["question_id"], ref) if ref else None


def failure_context(question, gold) -> None:
    """Opened from a Failures row: that row's attribution as a banner, previous / next row, back to Failures with
    its filters (kept in session state: the Failures page's widgets are gone while this page shows)."""
    nav = st.session_state.get(FAILURE_NAV)
    row = nav["rows"][nav["index"]] if nav and nav["rows"] else None
    if row is None or (row["scope"], row["question_id"]) != (question.scope, question.id):
        return
    k, n = nav["index"], len(nav["rows"])
    what = row.get("failure") or row.get("verdict") or "—"
    text = f"**Failures row {k + 1} of {n} · {md(what)}** ({md(row.get('variant'))}): {md(readable(row.get('detail')))}"
    if row.get("verdict") in ("wrong", "error", "none", "partial"):  # offline the verdict is the evidence
        st.error(text, icon=":material/troubleshoot:")
    else:
        st.info(text, icon=":material/troubleshoot:")
    prev = nxt = back = st.container(horizontal=True)
    prev.button("Previous", disabled=k == 0, key="fail_prev", icon=":material/chevron_left:",
                on_click=step_failure, args=(nav, k - 1))
    nxt.button("Next", disabled=k + 1 >= n, key="fail_next", icon=":material/chevron_right:",
               on_click=step_failure, args=(nav, k + 1))
    if back.button("Back to Failures", key="fail_back", icon=":material/arrow_back:"):
        st.switch_page("pages/failures.py", query_params=nav["back"])


@st.cache_data(show_spinner=False, max_entries=24)
def timeline_figure(key: tuple, lane: str, band: str | None, lost: tuple, moment, _frame, _trace, _gold):
    """The figure of one stored trace (`key`: its identity and content hash), built once: ~0.6 s for the demo's
    3,000 messages, on every return to the Timeline tab before."""
    return timeline.timeline_figure(_frame, _trace, _gold, lane, band=band, lost=lost, moment=moment)


def timeline_tab(question, trace, frame, gold, lost, moment) -> None:
    """The anchor timeline with its density bands, and the messages of a picked band."""
    st.caption("Messages over time per lane; BM25 anchors sized by score; DBSCAN clusters as shaded bands (teal: "
               "density ρ above μ, grey: below); dashed outlines: padded windows; diamonds: recovered messages; green "
               "ticks: gold evidence" + ("; red ring: the gold unit this answer lost" if lost else "")
               + ". Click a band's ▼ marker (or pick it below) to list its messages.")
    opts = evidence.band_options(trace)
    lane = st.segmented_control("Lanes", ["topic", "channel"], key="lane", bind="query-params", default="topic")
    ident = (c.corpus, question.scope, question.id, trace.variant, trace.config_hash, hash(trace.context),
             hash(trace.answers), gold)
    fig = timeline_figure(ident, lane or "topic", st.session_state.get("band"), tuple(lost), moment, frame, trace,
                          gold)
    st.plotly_chart(fig, key="timeline", on_select=lambda: st.session_state.update(
        band=timeline.band_from_selection(st.session_state.get("timeline")) or st.session_state.get("band", "")),
        selection_mode="points", config={"displaylogo": False})
    band = synced(st.selectbox, "Band", ["", *opts], "band", default="", format_func=lambda b: opts.get(
        b, "all evidence messages (no band selected)"))
    listed = (evidence.band_messages(trace, frame, band, gold) if band
              else evidence.evidence_messages(trace, frame, gold))
    in_band = text_table(tables.readable_frame(listed), 3, ["status", "anchor_rank", "id", "timestamp", "author",
                                                             "channel", "topic", "text"],
                         height=260, on_select="rerun", selection_mode="single-row", key="band_table")
    export_buttons(listed, f"band-{band or 'evidence'}-{question.id}")
    if in_band.selection.rows:
        conversation_panel(frame, listed["id"].iloc[in_band.selection.rows[0]], trace, gold)


def recovered_tab(question, trace, frame, gold, stats) -> None:
    """Evidence that discovery added beyond the BM25 anchors, and the conversation around a message."""
    st.caption("Evidence that was not among the BM25 anchors: the discovery window it came from, its similarity "
               "rank in the window, and the evidence-utility label with its reason. Select a row (here, or in the "
               "timeline's list) to see its conversation.")
    rejected = st.toggle("Also show rejected window candidates", key="rejected", bind="query-params")
    recovered = evidence.recovered_table(trace, frame, gold, include_rejected=rejected)
    picked = text_table(tables.readable_frame(recovered), 4, on_select="rerun", selection_mode="single-row",
                        key="rec_table")
    export_buttons(recovered, f"recovered-{question.id}")
    around = st.selectbox("Conversation around", [None, *sorted(stats.anchors | stats.recovered | stats.gold)],
                          key="msg", bind="query-params", format_func=lambda m: m or "(choose a message)")
    focus = recovered["message_id"].iloc[picked.selection.rows[0]] if picked.selection.rows else around
    if focus:
        conversation_panel(frame, focus, trace, gold)


def forest_tab(trace, gold, topics, asof_key, picks) -> None:
    """The evidence forest as a graph, and the state of each UPDATE chain as of a moment."""
    if trace.nodes:
        counts = trace.stage("structuring").counts if trace.stage("structuring") else {}
        show = synced(st.segmented_control, "Trees", ["answer", "all"], "trees", default="answer",
                      format_func={"answer": "Trees that matter for the answer", "all": "All trees"}.get)
        st.caption(f"Forest: {len(trace.nodes)} nodes, {int(counts.get('trees', 0))} trees, "
                   f"{int(counts.get('update_edges', 0))} UPDATE (red, solid) and "
                   f"{int(counts.get('expand_edges', 0))} EXPAND (blue, dashed) edges. Time runs left to right, one "
                   "lane per topic; by default only the trees holding gold, cited or answer-chain (★) messages, "
                   "one-message trees folded into the strip below. Fill: blue anchor / orange recovered; thick "
                   "green border: gold; dashed border: compressed. It opens fitted to every node shown; hover a node "
                   "for its text; drag to pan; zoom with the buttons or ctrl + wheel; *Answer chain* zooms to "
                   "the ★ nodes. An edge that would pass behind another message arcs around it.")
        height = forest.forest_height(trace, gold, topics, show == "all")
        st.iframe(forest.forest_html(trace, gold, topics, height, show_all=show == "all"), height=height + 10)
        asof_panel(trace, topics, asof_key, picks)
    else:
        st.info("This variant builds no forest (structuring is off): the answer reads a flat list.")


def whatif_trace(trace, config):
    """The Spans tab's budget control: compression alone re-run at another B (the answers are the stored run's)."""
    stored = int((trace.stage("compression").counts or {}).get("budget", config.compression.budget_tokens))
    low = max(1, min((s.tokens for s in trace.spans), default=1))
    budget = st.number_input("What-if budget B (tokens): re-run compression alone", min_value=low, step=256,
                             value=stored, key=f"whatif-{trace.question.id}", help="The demo's contexts (~4,200 "
                             "tokens) stay under B = 8,192, so compression never fires there: lower B to see what "
                             "it would omit. Only compression is re-run; the answers shown are the stored run's.")
    if budget == stored:
        return trace, None
    scope = api.open_scope(c.store, c.corpus, trace.question.scope)
    return spans.whatif(trace, scope, config, c.roles.tokens.count, budget), budget


def spans_tab(trace, gold, config) -> None:
    """Budgeted span compression: what each node kept and lost, its g_q and protections; a what-if budget."""
    if not trace.nodes or trace.stage("compression") is None:
        st.info("No forest, so no compressed spans: this variant gives the answer model a flat list.")
        return
    trace, whatif = whatif_trace(trace, config) if trace.spans and config else (trace, None)
    summary = spans.token_summary(trace)
    st.caption(("**What-if B = " + f"{whatif}**: compression alone re-run, the answers above are the stored run's. "
                if whatif else "") + f"{summary.before} → {summary.after} tokens ({md(summary.counter)}); "
               f"{summary.omitted} of {summary.spans} spans omitted (struck through; lowest g_q per token first, "
               "leaves first); dotted underline: protected span. Budget " + ("met." if summary.budget_met else
                                                                             "**not met**."))
    for mid, parts in spans.omitted_gold(trace, gold):
        st.warning(f"Compression omitted text of gold evidence {md(mid)}: {md(' / '.join(parts))}", icon="⚠️")
    if summary.omitted:
        only = st.toggle("Only nodes that lost text", key="cut", bind="query-params")
        st.html(spans.span_markup(trace, gold, changed_only=only))
        st.dataframe(tables.dashes(spans.span_table(trace, gold, changed_only=only)), hide_index=True, height=260)
    else:  # nothing was cut: the spans are the messages themselves, folded away
        with st.expander("Nothing was cut: every node's text reached the answer model whole. Show the spans"):
            st.html(spans.span_markup(trace, gold))


def context_tab(trace) -> None:
    st.caption("The linearized context, exactly as the answer model saw it.")
    st.code(trace.context or "(empty)", language=None, wrap_lines=True)
    if trace.flat_context and trace.flat_context != trace.context:
        st.caption("Flat context (same evidence, retrieval order):")
        st.code(trace.flat_context, language=None, wrap_lines=True)


def stages_tab(trace, name: str) -> None:
    st.caption("Stages, timings and backends; *off*: a stage this variant does not run.")
    stages = explorer.trace_summary(trace)
    st.dataframe(answer_view.stage_rows(stages, trace), hide_index=True)
    export_buttons(stages, name)


c = ctx()
if not c.corpus or not c.scope:
    st.info("No corpus loaded yet: import one on the Corpus page.")
    st.page_link("pages/corpus.py", label="Open Corpus", icon=":material/forum:")
    st.stop()

questions = {q.id: q for q in c.store.questions(c.corpus, c.scope)}
ids = list(questions)
curated = c.curated[1] if c.curated and c.curated[0] == c.scope and c.curated[1] in questions else None
pick, own = st.columns([3, 2])
qid = synced(pick.selectbox, "Question", ids, "q", default=curated or (ids[0] if ids else None), always=True,
             format_func=lambda i: f"{i} · {questions[i].type or '—'} · {shorten(questions[i].text, 90)}")
with own.popover("Ask your own question", icon=":material/edit:", width="stretch"):
    text = st.text_input("Question text", key="text", bind="query-params")
    user = st.text_input("Asking user", key="user", bind="query-params", placeholder="e.g. User_3")
if not text and not ids:
    st.info("This scope has no stored questions: type your own question.")
    st.stop()
question = api.adhoc_question(c.scope, text, user) if text else questions[qid]
gold = None if text else c.store.gold(c.corpus, c.scope, question.id)

# a Failures/Compare row or a link may pin one stored trace (e.g. of the `embedding` baseline, another config hash
# or another backend): it is shown exactly, never looked up with the sidebar's settings
pinned = None if text else pinned_trace(c, question.scope, question.id)
shown = pinned or c.sidebar_trace
key = (c.corpus, question.scope, question.id, shown)
cache = st.session_state.setdefault("traces", {})
trace = cache.get(key) or api.load_trace(c.store, c.corpus, question.scope, question.id, shown)
st.markdown(f"#### {md(question.text)}")
st.caption(f"{md(question.id)} · type {md(question.type or '—')} · asked by {md(question.asking_user or '—')} · "
           f"variant **{md(shown.variant)}** · config {md(shown.config_hash)}" + ("" if pinned else
                                                                               offline_label(c.offline)))
if pinned:
    st.info(f"**Stored trace** of variant **{md(pinned.variant)}**, config {md(pinned.config_hash)}, backend "
            f"{md(pinned.backend)}, from a batch run or an earlier app run: the sidebar's variant, parameters and "
            "backend do not apply to it, and it is not re-run here.", icon=":material/push_pin:")
    st.button(f"Show the sidebar's variant instead ({c.variant}, config {c.sidebar_trace.config_hash})",
              on_click=unpin_trace, key="unpin", icon=":material/arrow_back:")
    if trace is None:
        st.warning("That stored trace does not exist for this question: it may have been stored in another "
                   "database, or the corpus was re-imported since (which deletes its traces).")
        st.stop()
else:
    slot = st.empty()
    demo_path = c.corpus == DEMO_CORPUS and curated == qid and c.variant == "full" and not c.overrides and not text
    # the demo opens with its answer (offline, or the recorded local model: no server either); else the button
    autorun = trace is None and demo_path and (c.offline or is_recorded(c.roles))
    if autorun or slot.button("Run the pipeline" if trace is None else "Re-run", type="primary" if trace is None
                              else "tertiary", icon=":material/play_arrow:", key="run_button"):
        bar = slot.progress(0.0, text="Starting…")
        preview_seeds(c, question, gold)  # the gold answer and the BM25 stage while the rest runs (issue 12, item 1)
        done, started = [0.0], time.perf_counter()  # the local model's progress and ETA replace the bar's text

        def stage(s, f):
            done[0] = explorer.overall_progress(s, f)
            bar.progress(done[0], text=explorer.stage_text(s, f) + eta_suffix(time.perf_counter() - started, done[0]))
        try:
            with local_watch(c.roles, lambda line: bar.progress(done[0], text=line), prepare=add_script_run_ctx):
                trace = api.run_and_store(c.store, c.corpus, question, c.variant, c.config, c.roles, gold,
                                          progress=stage)
        except Exception as exc:  # a known failure is a callout with what to do; anything else still raises
            slot.empty()
            if not failure_callout(exc, "The pipeline could not run"):
                raise
            st.stop()
        cache[key] = trace
        st.rerun()  # redraw with the stored trace (and a "Re-run" button)
    if trace is None:
        st.info("No stored trace for this question, variant, configuration and backend yet. Press **Run the "
                "pipeline**.")
        st.stop()
cache[key] = trace
frame = messages(c, c.scope)
stats = evidence.statuses(trace, gold)

st.subheader("Answers")
st.caption("The forest answer reads the typed evidence forest; the flat answer reads the same evidence as a list "
           "(App. I). Verdicts come from the judge role against the gold answer; *error* means a model role failed "
           "and the pipeline used its fallback.")
failure_context(question, gold)
for pattern in trace_patterns(trace):  # a language model that gave every reply the same label is not structuring
    st.warning(f"**Reply pattern:** {md(pattern)}. The forest reflects the model's bias, not the conversation.",
               icon=":material/warning:")
BADGES = {"correct": " :green-badge[correct]", "wrong": " :red-badge[wrong]", "error": " :gray-badge[error]"}
head, rest = answer_view.evidence_line(trace, gold)  # the primary verdict leads the cards (tmem.analysis.verdicts)
st.markdown(f"**{md(head)}**: {md(rest)}")
cols = st.columns(3)
for col, card in zip(cols, answer_view.answer_cards(trace)):
    with col.container(border=True):
        if card.text is None:
            st.caption(card.caption)
            continue
        st.markdown(f"**{card.presentation} answer**{BADGES.get(card.verdict, '')}{offline_label(card.offline)}")
        if card.errors:
            st.error("**A model role failed**; the answer below is the pipeline's fallback.\n\n"
                     + "\n".join(f"- {md(line)}" for line in card.errors), icon=":material/error:")
        st.text(card.text or "(empty answer)")
        st.caption(md(card.caption))
        judged = trace.verdict(card.presentation)
        if judged is not None:  # why the judge decided as it did, in its own words
            st.caption(f"Judge {md(judged.backend.split(' [', 1)[0])}: {md(shorten(' '.join(judged.raw.split()), 300))}"
                       if judged.raw.strip() else f"Judge {md(judged.backend)}: no reason recorded")
with cols[2].container(border=True):
    st.markdown("**gold answer**")
    st.text(gold.answer if gold and gold.answer else "— (no gold answer)")
    if gold and gold.superseded:
        st.caption("superseded state: " + md(gold.superseded))
if answer_view.advice(trace):
    st.warning("**What to do:** " + answer_view.advice(trace), icon=":material/build:")

if gold and gold.evidence:
    st.subheader("Evidence funnel")
    st.caption("Gold evidence units surviving each stage; discovery windows can add units the BM25 anchors missed; "
               "*off*: this variant does not run that stage.")
    funnel = evidence.funnel_table(trace, gold)
    off = answer_view.stages_off(trace)
    stages = st.container(horizontal=True, gap="medium")  # wraps at 1100 px instead of cutting the labels
    for row in funnel.itertuples():
        if row.stage in off:
            stages.metric(row.label, "off", help="This variant does not run this stage.", width="content")
        else:
            stages.metric(row.label, f"{row.units}/{int(funnel['units'][0])}", delta=int(row.change) or None,
                          width="content")
    export_buttons(funnel, f"funnel-{question.id}")
else:
    funnel = None

topics = dict(zip(frame["id"], frame["topic"]))
picks = asof.moments(trace.nodes)  # (time, message ids): the slider steps from one stated state to the next
times = [t for t, _ in picks]
asof_key = f"asof-{question.id}-{shown.variant}-{shown.config_hash}"
if times and asof_key not in st.session_state:  # a link's moment (`asof=`) restores the slider
    linked = asof.moment_from_param(st.query_params.get("asof"), (times[0], times[-1]))
    if linked is not None:
        st.session_state[asof_key] = asof.snap(linked, times)
moment = st.session_state.get(asof_key)
moment = moment if times and moment is not None and moment < times[-1] else None  # drawn once it was moved
lost = answer_view.lost_unit(trace, gold) if any(card.verdict in ("wrong", "error") for card in
                                                  answer_view.answer_cards(trace)) else ()
# Only the open tab runs and is sent to the browser: the forest's HTML, the span markup and the tables of hidden
# tabs cost about a second of server time, and the browser's layout, on every redraw. The open tab is in the URL
# (`tab=`), so a link opens the same tab.
tab_timeline, tab_recovered, tab_forest, tab_spans, tab_context, tab_stages = st.tabs(
    ["Timeline", "Recovered", "Forest", "Spans", "Context", "Stages"], key="tab", bind="query-params")

# the what-if re-runs compression under the trace's own preset (a batch baseline such as `embedding` has none)
whatif_config = (api.resolve_config(shown.variant) if shown.is_preset else None) if pinned else c.config
for tab, draw in ((tab_timeline, lambda: timeline_tab(question, trace, frame, gold, lost, moment)),
                  (tab_recovered, lambda: recovered_tab(question, trace, frame, gold, stats)),
                  (tab_forest, lambda: forest_tab(trace, gold, topics, asof_key, picks)),
                  (tab_spans, lambda: spans_tab(trace, gold, whatif_config)),
                  (tab_context, lambda: context_tab(trace)),
                  (tab_stages, lambda: stages_tab(trace, f"stages-{question.id}-{shown.variant}"))):
    if tab.open:
        with tab:
            draw()
backends = results_view.backend_rows(pinned.backend) if pinned else explorer.role_rows(c.roles)
row = st.container(horizontal=True)  # sized by the buttons: columns cut "HTML report" at 1100 px
rejected = bool(st.session_state.get("rejected"))  # read now: the download runs outside this script run


def report_html() -> bytes:
    """Built when the button is clicked, not on every redraw: the report lays out the whole forest as SVG."""
    recovered = evidence.recovered_table(trace, frame, gold, include_rejected=rejected)
    return report.question_report(trace, gold, recovered, funnel, explorer.trace_summary(trace), backends,
                                  frame).encode()


row.download_button("HTML report", report_html, f"tmem-{question.id}-{shown.variant}.html", "text/html",
                     icon=":material/description:")
row.download_button("Trace JSON", lambda: trace.to_json().encode(), f"trace-{question.id}-{shown.variant}.json",
                      "application/json", icon=":material/data_object:")
