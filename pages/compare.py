"""Compare view: a baseline variant against others — accuracy and recall per question type with deltas,
per-question improved / regressed / unchanged, a question × variant heat-map, and two traces side by side."""
from __future__ import annotations

import streamlit as st

from pages import ctx, export_buttons, open_question, results, run_choices, synced
from tmem.viz import evidence, forest, tables
from tmem.viz import results as results_view
from tmem.viz.results import TraceRef
from tmem.viz.safe import md

c = ctx()
st.subheader("Compare variants")
if not c.corpus:
    st.info("No corpus loaded.")
    st.stop()
run = st.selectbox("Run", run_choices(c), key="run", bind="query-params")
frame = results(c, run)
variants = sorted(frame["variant"].dropna().unique()) if len(frame) else []
if len(variants) < 2:
    st.info("Comparing needs results of at least two variants: run a batch with several variants, or run the same "
            "questions under two variants on the Question page.")
    st.stop()
left, right = st.columns([1, 3])
baseline = left.selectbox("Baseline", variants, key="baseline", bind="query-params",
                          index=variants.index("flat") if "flat" in variants else 0)
rest = [v for v in variants if v != baseline]
others = right.multiselect("Compared variants", rest, default=rest[:4], key="others", bind="query-params") or rest[:1]

st.markdown("**Accuracy and recall per question type** (Δ against the baseline)")
summary = tables.accuracy_by_type(frame, baseline, others)
st.dataframe(summary, hide_index=True, column_config={
    col: st.column_config.NumberColumn(format="percent") for col in summary.columns if col not in ("question type",
                                                                                                     "n")})
export_buttons(summary, f"compare-summary-{baseline}")

st.markdown("**Per question**")
a, b = st.columns([1, 3])
against = a.selectbox("Against", others, key="against", bind="query-params")
changed = b.toggle("Only changed", key="changed", bind="query-params")
aligned = tables.per_question(frame, baseline, against)
counts = aligned["change"].value_counts()
for col, name in zip(st.columns(4), tables.CHANGES):
    col.metric(name, int(counts.get(name, 0)))
if changed:
    aligned = aligned[aligned["change"].isin(["improved", "regressed"])].reset_index(drop=True)
pairs = [f"{scope}/{qid}" for scope, qid in zip(aligned["scope"], aligned["question_id"])]


def pick_pair(pairs: list[str] = pairs) -> None:
    """A selected row picks the side-by-side question (kept in `pair=`, so a link reopens it)."""
    rows = st.session_state["cmp_table"].selection.rows
    if rows:
        st.session_state["pair"] = pairs[rows[0]]


st.dataframe(aligned, hide_index=True, on_select=pick_pair, selection_mode="single-row", key="cmp_table")
export_buttons(aligned, f"compare-{baseline}-vs-{against}")

st.markdown("**Question × variant** (green correct, red wrong, blank missing)")
matrix = tables.heatmap_frame(frame, [baseline, *others], only_changed=changed)
if len(matrix):
    st.plotly_chart(tables.heatmap_figure(matrix), config={"displaylogo": False})
else:
    st.caption("No question differs between these variants.")

pair = synced(st.selectbox, "Side by side (or select a row of the per-question table)", [None, *pairs], "pair",
              format_func=lambda p: p or "(no question selected)")
if pair:
    row = aligned.iloc[pairs.index(pair)].to_dict()
    st.markdown(f"**Side by side: {md(row['scope'])} / {md(row['question_id'])}**")
    for col, side, name in zip(st.columns(2), (" (baseline)", f" ({against})"), (baseline, against)):
        with col.container(border=True):
            ref = TraceRef.from_row({**row, "variant" + side: name}, side)
            trace = results_view.load_trace(c.store, c.corpus, row["scope"], row["question_id"], ref) if ref else None
            st.markdown(f"**{md(name)}** · verdict {row.get('verdict' + side)}")
            if trace is None:
                st.caption("No stored trace for this side.")
                continue
            for answer in trace.answers:
                st.caption(f"{answer.presentation} answer" + (" (offline stand-in)" if answer.offline else ""))
                st.text(answer.text)
            gold = c.store.gold(c.corpus, row["scope"], row["question_id"])
            if gold and gold.evidence:
                st.dataframe(evidence.funnel_table(trace, gold)[["label", "units"]], hide_index=True)
            if trace.nodes:
                st.iframe(forest.forest_html(trace, gold, height=420), height=430)
            if st.button("Open on the Question page", key=f"open{side}"):  # exactly this stored trace
                open_question(c, row["scope"], row["question_id"], ref)
