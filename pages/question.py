"""Question view: run (or load the stored trace of) one question and show why its answer came out as it did; or
show exactly the stored trace a Failures/Compare row or a link names (`trace_variant`, `trace_config`,
`trace_backend`)."""
from __future__ import annotations

import streamlit as st

from pages import ctx, export_buttons, messages, offline_label, pinned_trace, synced, unpin_trace
from tmem.store import DEMO_CORPUS
from tmem.viz import evidence, explorer, forest, report, spans, timeline
from tmem.viz import results as results_view
from tmem.viz.safe import md, shorten

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
question = explorer.adhoc_question(c.scope, text, user) if text else questions[qid]
gold = None if text else c.store.gold(c.corpus, c.scope, question.id)

# a Failures/Compare row or a link may pin one stored trace (e.g. of the `embedding` baseline, another config hash
# or another backend): it is shown exactly, never looked up with the sidebar's settings
pinned = None if text else pinned_trace(c, question.scope, question.id)
shown = pinned or c.sidebar_trace
key = (c.corpus, question.scope, question.id, shown)
cache = st.session_state.setdefault("traces", {})
trace = cache.get(key) or results_view.load_trace(c.store, c.corpus, question.scope, question.id, shown)
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
    autorun = trace is None and demo_path and c.offline  # the demo opens with its answer; anything else: the button
    if autorun or slot.button("Run the pipeline" if trace is None else "Re-run", type="primary" if trace is None
                              else "tertiary", icon=":material/play_arrow:", key="run_button"):
        bar = slot.progress(0.0, text="Starting…")
        trace = explorer.run_and_store(c.store, c.corpus, question, c.variant, c.config, c.roles, gold,
                                       progress=lambda s, f: bar.progress(explorer.overall_progress(s, f),
                                                                          text=explorer.stage_text(s, f)))
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
           "(App. I). Verdicts come from the judge role against the gold answer.")
cols = st.columns(3)
for col, presentation in zip(cols, ("forest", "flat")):
    answer, verdict = trace.answer(presentation), trace.verdict(presentation)
    with col.container(border=True):
        if answer is None:
            st.caption(f"No {presentation} answer in this variant.")
            continue
        badge = "" if verdict is None else (" :green-badge[correct]" if verdict.correct else " :red-badge[wrong]")
        st.markdown(f"**{presentation} answer**{badge}{offline_label(answer.offline)}")
        st.text(answer.text)
        st.caption(md(f"{answer.backend} · {answer.context_tokens} tokens · {answer.reason}"))
with cols[2].container(border=True):
    st.markdown("**gold answer**")
    st.text(gold.answer if gold and gold.answer else "— (no gold answer)")
    if gold and gold.superseded:
        st.caption("superseded state: " + md(gold.superseded))

if gold and gold.evidence:
    st.subheader("Evidence funnel")
    st.caption("Gold evidence units surviving each stage; discovery windows can add units the BM25 anchors missed.")
    funnel = evidence.funnel_table(trace, gold)
    for col, row in zip(st.columns(len(funnel)), funnel.itertuples()):
        col.metric(row.label, f"{row.units}/{int(funnel['units'][0])}", delta=int(row.change) or None)
    export_buttons(funnel, f"funnel-{question.id}")
else:
    funnel = None

st.subheader("Anchor timeline")
st.caption("Messages over time per lane; BM25 anchors sized by score; DBSCAN clusters as shaded bands (green: "
           "density ρ above μ, grey: below); dashed outlines: padded windows; diamonds: recovered messages; green "
           "ticks: gold evidence. Click a band's ▼ marker (or pick it below) to list its messages.")
opts = evidence.band_options(trace)
lane = st.segmented_control("Lanes", ["topic", "channel"], key="lane", bind="query-params", default="topic")
fig = timeline.timeline_figure(frame, trace, gold, lane or "topic", band=st.session_state.get("band"))
st.plotly_chart(fig, key="timeline", on_select=lambda: st.session_state.update(
    band=timeline.band_from_selection(st.session_state.get("timeline")) or st.session_state.get("band", "")),
    selection_mode="points", config={"displaylogo": False})
band = synced(st.selectbox, "Band", ["", *opts], "band", default="", format_func=lambda b: opts.get(
    b, "all evidence messages (no band selected)"))
listed = evidence.band_messages(trace, frame, band, gold) if band else evidence.evidence_messages(trace, frame, gold)
in_band = st.dataframe(listed, hide_index=True, height=260, on_select="rerun", selection_mode="single-row",
                       key="band_table", column_order=["status", "anchor_rank", "id", "timestamp", "author",
                                                       "channel", "topic", "text"])
export_buttons(listed, f"band-{band or 'evidence'}-{question.id}")

st.subheader("Recovered messages")
st.caption("Evidence that was not among the BM25 anchors: the discovery window it came from, its similarity rank "
           "in the window, and the evidence-utility label with its reason. Select a row here or in the list above "
           "to see its conversation.")
rejected = st.toggle("Also show rejected window candidates", key="rejected", bind="query-params")
recovered = evidence.recovered_table(trace, frame, gold, include_rejected=rejected)
picked = st.dataframe(recovered, hide_index=True, on_select="rerun", selection_mode="single-row", key="rec_table")
export_buttons(recovered, f"recovered-{question.id}")
around = st.selectbox("Conversation around", [None, *sorted(stats.anchors | stats.recovered | stats.gold)],
                      key="msg", bind="query-params", format_func=lambda m: m or "(choose a message)")
focus = (recovered["message_id"].iloc[picked.selection.rows[0]] if picked.selection.rows else
         listed["id"].iloc[in_band.selection.rows[0]] if in_band.selection.rows else around)
if focus:
    conversation = evidence.conversation_around(frame, focus, trace, gold)
    st.dataframe(conversation, hide_index=True,
                 column_order=["focus", "status", "id", "timestamp", "author", "channel", "topic", "text"])
    export_buttons(conversation, f"conversation-{focus}")

if trace.nodes:
    st.subheader("Evidence forest")
    counts = trace.stage("structuring").counts if trace.stage("structuring") else {}
    st.caption(f"Forest: {len(trace.nodes)} nodes, {int(counts.get('trees', 0))} trees, "
               f"{int(counts.get('update_edges', 0))} UPDATE (red, solid) and {int(counts.get('expand_edges', 0))} "
               "EXPAND (blue, dashed) edges. Trees left to right by time, depth by parent. Fill: blue anchor / "
               "orange recovered; thick green border: gold; dashed border: compressed. Hover a node for its text.")
    st.iframe(forest.forest_html(trace, gold, dict(zip(frame["id"], frame["topic"])),
                                 forest.forest_height(trace)), height=forest.forest_height(trace) + 10)
    st.subheader("Compressed spans")
    summary = spans.token_summary(trace)
    st.caption(f"{summary.before} → {summary.after} tokens ({md(summary.counter)}); {summary.omitted} of "
               f"{summary.spans} spans omitted (struck through); dotted underline: protected span. Budget "
               + ("met." if summary.budget_met else "**not met**."))
    for mid, parts in spans.omitted_gold(trace, gold):
        st.warning(f"Compression omitted text of gold evidence {md(mid)}: {md(' / '.join(parts))}", icon="⚠️")
    only = st.toggle("Only nodes that lost text", key="cut", bind="query-params")
    st.html(spans.span_markup(trace, gold, changed_only=only))
else:
    st.info("This variant builds no forest (structuring is off): the answer reads a flat list.")

with st.expander("Linearized context, exactly as the answer model saw it"):
    st.code(trace.context or "(empty)", language=None, wrap_lines=True)
    if trace.flat_context and trace.flat_context != trace.context:
        st.caption("Flat context (same evidence, retrieval order):")
        st.code(trace.flat_context, language=None, wrap_lines=True)
with st.expander("Stages, timings and backends"):
    stages = explorer.trace_summary(trace)
    st.dataframe(stages, hide_index=True)
    export_buttons(stages, f"stages-{question.id}-{shown.variant}")
backends = results_view.backend_rows(pinned.backend) if pinned else explorer.role_rows(c.roles)
html = report.question_report(trace, gold, recovered, funnel, stages, backends, frame)
left, right, _ = st.columns([1.3, 1.3, 5])
left.download_button("HTML report", html.encode(), f"tmem-{question.id}-{shown.variant}.html", "text/html",
                     icon=":material/description:")
right.download_button("Trace JSON", trace.to_json().encode(), f"trace-{question.id}-{shown.variant}.json",
                      "application/json", icon=":material/data_object:")
