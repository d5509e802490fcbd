"""The Question view's tabs: the anchor timeline, the recovered evidence, the forest, the compressed spans (with a
what-if budget), the linearized context and the stages. Not a page; only the open tab is drawn."""
from __future__ import annotations

import streamlit as st

from pages._question_panels import asof_panel, conversation_panel
from pages._widgets import export_buttons, synced, text_table
from tmem import api
from tmem.api import ExplorerContext, TraceRef
from tmem.viz import run_settings
from tmem.viz.batch import tables
from tmem.viz.question import answers as answer_view
from tmem.viz.question import evidence, forest, memories, spans, timeline
from tmem.viz.question import role_calls as calls
from tmem.viz.question import structuring as structuring_view
from tmem.viz.safe import md


@st.cache_data(show_spinner=False, max_entries=24)
def timeline_figure(key: tuple, lane: str, band: str | None, lost: tuple, moment, _frame, _trace, _gold):
    """The figure of one stored trace (`key`: its identity and content hash), built once: ~0.6 s for the demo's
    3,000 messages, on every return to the Timeline tab before."""
    return timeline.timeline_figure(_frame, _trace, _gold, lane, band=band, lost=lost, moment=moment)


def timeline_tab(c: ExplorerContext, question, trace, frame, gold, lost, moment) -> None:
    """The anchor timeline with its density bands, and the messages of a picked band."""
    st.caption("Messages over time per lane (grey; above 1,500 messages a strip, darker where more messages "
               "fall, hover for the count); BM25 anchors sized by score; DBSCAN clusters as shaded bands (teal: "
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


def memory_context(question, trace, gold) -> bool:
    """A baseline's context (tmem.viz.question.memories): what its memory system recalled, the gold it holds and
    what it cost; False for T-Mem's own variants."""
    summary = memories.memory_summary(trace, gold)
    if summary is None:
        return False
    st.markdown(f"**What {md(summary.system)} recalled for this question**")
    st.caption(f"{md(summary.items)} · {md(summary.gold)}")
    st.caption(f"Cost: {md(summary.cost)}")
    table = memories.memory_table(trace, gold)
    text_table(table, 4, key="memory_table")
    export_buttons(table, f"memories-{question.id}")
    return True


def recovered_tab(question, trace, frame, gold, stats) -> None:
    """Evidence that discovery added beyond the BM25 anchors, and the conversation around a message; a memory
    system's recalled items instead for a baseline (discovery is not part of that system)."""
    if memory_context(question, trace, gold):
        return
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


@st.cache_data(show_spinner=False, max_entries=24)
def forest_page(key: tuple, show_all: bool, _trace, _gold, _topics) -> str:
    """The forest's HTML for one stored trace (`key`: its identity, nodes, gold and node topics), laid out once: the
    tab's reruns (the as-of slider, the Trees switch back) and a second visit read it (~1 s of layout before)."""
    view = forest.forest_view(_trace, _gold, _topics, show_all)
    height = forest.forest_height(_trace, _gold, _topics, show_all, view)
    return forest.forest_html(_trace, _gold, _topics, height, show_all=show_all, view=view)


def forest_tab(c: ExplorerContext, trace, gold, topics, asof_key, picks, opening) -> None:
    """The evidence forest as a graph, and the state of each UPDATE chain as of a moment."""
    if trace.nodes:
        ident = (c.database, c.corpus, trace.question.scope, trace.question.id, trace.variant, trace.config_hash,
                 hash(trace.nodes), hash(trace.answers), gold, evidence.statuses(trace, gold),
                 tuple(topics.get(n.message_id) for n in trace.nodes))  # everything the drawing reads
        counts = trace.stage("structuring").counts if trace.stage("structuring") else {}
        show = synced(st.segmented_control, "Trees", ["answer", "all"], "trees", default="answer",
                      format_func={"answer": "Trees that matter for the answer", "all": "All trees"}.get)
        st.caption(f"Forest: {len(trace.nodes)} nodes, {int(counts.get('trees', 0))} trees, "
                   f"{int(counts.get('update_edges', 0))} UPDATE (red, solid) and "
                   f"{int(counts.get('expand_edges', 0))} EXPAND (blue, dashed) edges. Time runs left to right, one "
                   "lane per topic; by default only the trees holding gold, cited or answer-chain (★) messages, "
                   "one-message trees folded into the strip below. Fill: blue anchor / orange recovered; thick "
                   "green border: gold; dashed border: compressed. It opens fitted to the trees shown, or, where that "
                   "is too small to read, on the ★ answer chain and its neighbours; *Fit all* shows everything; hover "
                   "a node for its text; drag to pan; zoom with the buttons or ctrl + wheel. An edge that would pass "
                   "behind another message arcs around it; an UPDATE's label shows the words it changed.")
        if note := structuring_view.stand_in_note(trace):
            st.info(md(note), icon=":material/cloud_off:")
        if failed := structuring_view.fallback_note(trace):  # roots made by a failed call, never silent
            st.error(md(failed), icon=":material/error:")
        # "content": the frame follows the canvas, which sizes itself to the window (tmem.viz.question.forest)
        st.iframe(forest_page(ident, show == "all", trace, gold, topics), height="content")
        asof_panel(trace, gold, topics, asof_key, picks, opening)
    elif system := memories.memory_system(trace):
        st.info(f"A forest is not part of this system: {md(system)} gives the answer model its own recalled items "
                "(the *Recovered* tab lists them, the *Context* tab shows them beside another variant's forest).")
    else:
        st.info("This variant builds no forest (structuring is off): the answer reads a flat list.")


def whatif_trace(c: ExplorerContext, trace, config):
    """The Spans tab's budget control: compression alone re-run at another B (the answers are the stored run's)."""
    stored = int((trace.stage("compression").counts or {}).get("budget", config.compression.budget_tokens))
    low = max(1, min((s.tokens for s in trace.spans), default=1))
    budget = st.number_input("What-if budget B (tokens): re-run compression alone", min_value=low, step=256,
                             value=stored, key=f"whatif-{trace.question.id}", help="The demo's contexts (~4,200 "
                             "tokens) stay under B = 8,192, so compression never fires there: lower B to see what "
                             "it would omit. Only compression is re-run; the answers shown are the stored run's.")
    if budget == stored:
        return trace, None
    scope = api.explorer.stored_scope(c, trace.question.scope)
    return spans.whatif(trace, scope, config, c.roles.tokens.count, budget), budget


def spans_tab(c: ExplorerContext, trace, gold, config) -> None:
    """Budgeted span compression: what each node kept and lost, its g_q and protections; a what-if budget; beside
    them the messages the cut at B shortened or removed."""
    cuts = spans.cut_table(trace, gold)
    if len(cuts):
        golds = int((cuts["gold"] == "yes").sum())
        st.warning(f"The cut at B shortened or removed {len(cuts)} message line(s) of the answer contexts"
                   + (f", **{golds} of them gold evidence**" if golds else "") + ": the answer model did not read "
                   "them whole, and the evidence verdict does not count them.", icon=":material/content_cut:")
        st.dataframe(tables.dashes(cuts), hide_index=True, height=min(260, 38 + 35 * len(cuts)))
    if not trace.nodes or trace.stage("compression") is None:
        st.info("No forest, so no compressed spans: this variant gives the answer model a flat list.")
        return
    trace, whatif = whatif_trace(c, trace, config) if trace.spans and config else (trace, None)
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
        with st.expander("No span omitted (the cut at B is listed above). Show the spans" if len(cuts) else
                         "Nothing was cut: every node's text reached the answer model whole. Show the spans"):
            st.html(spans.span_markup(trace, gold))


def context_tab(c: ExplorerContext, trace, gold, frame) -> None:
    """The contexts as the answer model saw them, gold lines highlighted; beside them, another stored trace's."""
    texts = dict(zip(frame["id"], frame["text"]))
    st.caption("The linearized context, exactly as the answer model saw it" + (
        "; lines with gold evidence highlighted green." if gold and gold.evidence else "."))
    other = side_by_side_choice(c, trace)
    left, right = st.columns(2) if other is not None else (st.container(), None)
    with left:
        context_text(trace, gold, texts)
    if right is not None:
        with right:
            st.markdown(f"**{md(other.variant)}** · config {md(other.config_hash)} · answer: "
                        f"“{md(other.answers[0].text if other.answers else '—')}”")
            context_text(other, gold, texts)


def context_text(trace, gold, texts) -> None:
    st.html(evidence.context_markup(trace.context or "(empty)", trace, gold, texts))
    if trace.flat_context and trace.flat_context != trace.context:
        st.caption("Flat context (same evidence, retrieval order):")
        st.html(evidence.context_markup(trace.flat_context, trace, gold, texts))


def side_by_side_choice(c: ExplorerContext, trace):
    """Another stored trace of this question (another variant, configuration or backend) to read beside this one."""
    q = trace.question
    index = api.explorer.trace_index(c)
    mine = index[(index["scope"] == q.scope) & (index["question_id"] == q.id)].drop_duplicates(
        ["variant", "config_hash", "backend"], keep="last")
    refs = [TraceRef(r.variant, r.config_hash, r.backend) for r in mine.itertuples()
            if (r.variant, r.config_hash) != (trace.variant, trace.config_hash)]
    if not refs:
        return None
    pick = st.selectbox("Side by side with another stored trace of this question", [None, *refs], key="beside",
                        format_func=lambda r: "(none)" if r is None else f"{r.variant} · config {r.config_hash} · "
                        f"{r.backend.split('|')[2] if r.backend.count('|') >= 2 else r.backend}")
    return api.explorer.stored_trace(c, q.scope, q.id, pick) if pick else None


def stages_tab(trace, gold, name: str) -> None:
    st.caption("Stages, timings and backends; *off*: a stage this variant does not run.")
    stages = run_settings.trace_summary(trace)
    st.dataframe(answer_view.stage_rows(stages, trace), hide_index=True)
    export_buttons(stages, name)
    st.markdown("**Each role's prompt and response**")
    st.caption("The answer and judge prompts rebuilt from the paper's templates with this trace's question, context "
               "and gold answer (a trace stores the prompt's hash, not its text); the evidence-selection and relation "
               "roles answer once per message: their replies below.")
    for call in calls.role_calls(trace, gold):
        check = {True: " · rebuilt prompt matches the recorded hash", False: " · **does not rebuild** to the "
                 "recorded hash (another template or context)", None: ""}[call.rebuilt]
        with st.expander(f"{call.role} · {call.backend.split(' [', 1)[0]}"):
            st.caption("System prompt" + check)
            st.code(call.system, language=None, wrap_lines=True)
            st.caption("User prompt")
            st.code(call.user, language=None, wrap_lines=True)
            st.caption("Response")
            st.code(call.response, language=None, wrap_lines=True)
    for title, frame in (("evidence selection", calls.selection_replies(trace)),
                         ("relation", calls.relation_replies(trace))):
        if len(frame):
            with st.expander(f"{title} · {len(frame)} replies"):
                text_table(tables.readable_frame(frame), 1)
