"""Compare view: a baseline variant against others under the primary measure (offline: the evidence verdict, with
a real answer model: accuracy; tmem.analysis.verdicts) — paired significance per question type (bootstrap interval
whiskers, McNemar p, a delta whose interval spans 0 never coloured as a win), the measure and recall per question
type over the questions every variant has a verdict for, stale answers and revisions without rollback,
per-question improved / regressed / unchanged, a question × variant heat-map, and for one question both answers
with the evidence diff (messages gained and lost against the baseline, gold first); under a chosen gold version."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from pages._links import open_question
from pages._runs import batch_status, incomplete_warning, run_choices, run_label
from pages._shell import ctx
from pages._verdict_rows import gold_version, matched_rows, reviewed, rows_key, version_caption
from pages._widgets import export_buttons, messages, shared, synced
from tmem import api
from tmem.analysis import stale
from tmem.analysis import verdicts as vd
from tmem.api import TraceRef
from tmem.evaluation import matched
from tmem.viz.batch import compare, tables
from tmem.viz.batch import review as review_view
from tmem.viz.batch import significance as significance_view
from tmem.viz.safe import md


def pick_pair(pairs: list[str]) -> None:
    """A selected row picks the side-by-side question (kept in `pair=`, so a link reopens it)."""
    rows = st.session_state["cmp_table"].selection.rows
    if rows:
        st.session_state["pair"] = pairs[rows[0]]


def _equal_budget_table(frame, rows, baseline: str, compared: str):
    """(the unmatched and the equal-budget significance rows, their reading) of the evidence measure."""
    name = matched.matched_name(baseline, compared)
    both = pd.concat([frame, rows], ignore_index=True)
    # the overall rows only: bootstrapping every question type too was ~1/6 of the page's first visit
    pair = significance_view.comparison_rows(both, baseline, compared, vd.EVIDENCE, by_type=False).assign(
        group=f"unmatched: {baseline}")
    at = significance_view.comparison_rows(both, name, compared, vd.EVIDENCE, by_type=False).assign(
        group=f"equal budget: {name}")
    return pd.concat([pair, at], ignore_index=True), matched.verdict(pair["outcome"].iloc[0], at["outcome"].iloc[0])


def equal_budget(c, run: str, version: str, frame, baseline: str, compared: str, key: tuple) -> None:
    """The baseline at the compared variant's message count beside the unmatched comparison (evidence complete)."""
    rows = matched_rows(c, run, version, frame, baseline, compared)
    if not len(rows):
        return
    table, reading = shared("cmp_equal", (key, baseline, compared, c.roles.label),
                            lambda: _equal_budget_table(frame, rows, baseline, compared))
    st.markdown(f"**Evidence complete at equal budget** — {md(compared)} against {md(baseline)} given as many "
                f"messages as {md(compared)} showed its answer model (mean {rows['messages'].mean():.1f} per "
                "question)" + (f": **{md(reading)}**" if reading else ""))
    st.caption(matched.EXPLAIN)
    st.dataframe(table[list(significance_view.COLUMNS)].style.map(significance_view.outcome_style,
                                                                   subset=["outcome"]), hide_index=True)


def _significance(frame, baseline: str, compared: str, shown: str):
    rows = significance_view.comparison_rows(frame, baseline, compared, shown)
    return rows, significance_view.whisker_svg(rows)


def _summary(frame, baseline: str, others: list[str], variants_shown: list[str], measure: str):
    summary = compare.summary(frame, baseline, others, measure)
    return (compare.answered(frame, variants_shown, measure), summary,
            compare.bar_svg(summary, variants_shown, measure) if len(summary) else None)


def _per_question(frame, baseline: str, against: str, measure: str, changed: bool):
    aligned = compare.per_question(frame, baseline, against, measure)
    counts = aligned["change"].value_counts().to_dict()
    if changed:
        aligned = aligned[aligned["change"].isin(["improved", "regressed"])].reset_index(drop=True)
    return aligned, counts, tables.dashes(aligned)


def _heatmap(frame, variants: list[str], measure: str, changed: bool):
    matrix = compare.heatmap_frame(frame, variants, measure, only_changed=changed)
    return compare.heatmap_html(matrix, measure) if len(matrix) else None


def render() -> None:
    c = ctx()
    st.subheader("Compare variants")
    if not c.corpus:
        st.info("No corpus loaded.")
        st.stop()
    batch_status(c)  # a batch started on the Failures page: progress, and this page refreshes as variants finish
    runs = run_choices(c)
    top = st.columns([3, 2])
    run = synced(top[0].selectbox, "Run", runs, "run", default=runs[0], always=True,  # pinned in every link
                 format_func=run_label(c))
    incomplete_warning(c, run)
    version = gold_version(c, run, top[1])
    frame, measure, source = reviewed(c, run, version)
    # every table and figure below is derived from the run's rows and the widgets: shared by every session under
    # what it is made of (pages._widgets.shared), so a new tab or a rerun draws them without re-deriving them
    key = (*rows_key(c, run, version, frame), measure)
    variants = sorted(frame["variant"].dropna().unique()) if len(frame) else []
    if len(variants) < 2:
        st.info("Comparing needs results of at least two variants: run a batch with several variants, or run the same "
                "questions under two variants on the Question page.")
        st.stop()
    left, right = st.columns([1, 3])
    baseline = left.selectbox("Baseline", variants, key="baseline", bind="query-params",
                              index=variants.index("flat") if "flat" in variants else 0)
    rest = [v for v in variants if v != baseline]
    others = (right.multiselect("Compared variants", rest, default=rest[:4], key="others", bind="query-params")
              or rest[:1])
    variants_shown = [baseline, *others]
    name = significance_view.MEASURE_LABEL[measure]
    st.caption(vd.EXPLAIN[measure] + f" Accuracy source: **{md(source)}**. " + version_caption(version, frame))
    n = frame[["scope", "question_id"]].drop_duplicates().shape[0]
    if note := compare.source_note(c.corpus, api.DEMO_CORPUS, n):
        st.info(note[0].upper() + note[1:] + ".", icon=":material/science:")
    for a_, b_, why in shared("cmp_identical", (key, tuple(variants_shown)),
                              lambda: compare.identical_variants(frame, variants_shown)):
        st.caption(f"**{md(a_)}** and **{md(b_)}** are identical here: {md(why)}.")
    st.markdown(f"**Significance: {md(name)}, recall and "
                + ("stand-in accuracy (secondary)" if measure == vd.EVIDENCE else "evidence") + "**")
    a, b = st.columns(2)
    secondary = vd.ACCURACY if measure == vd.EVIDENCE else vd.EVIDENCE
    shown = a.selectbox("Measure", [measure, "recall", secondary], key="cmp_measure",
                        format_func=lambda m: significance_view.MEASURE_LABEL[m]
                        + (" (stand-in, secondary)" if m == vd.ACCURACY and measure == vd.EVIDENCE else ""))
    compared = b.selectbox("Variant against the baseline", others, key="cmp_sig")
    sig_rows, whiskers = shared("cmp_sig", (key, baseline, compared, shown),
                                lambda: _significance(frame, baseline, compared, shown))
    st.caption(significance_view.EXPLAIN)
    sig_table = sig_rows[list(significance_view.COLUMNS)]
    st.dataframe(sig_table.style.map(significance_view.outcome_style, subset=["outcome"])  # Δ coloured by its outcome
                 .apply(lambda col: [significance_view.outcome_style(o) for o in sig_rows["outcome"]], subset=["Δ"]),
                 hide_index=True)
    st.markdown(whiskers, unsafe_allow_html=True)  # SVG, every text escaped (st.html drops SVG)
    export_buttons(sig_rows.drop(columns=["colour"]), f"significance-{compared}-vs-{baseline}-{shown}")
    equal_budget(c, run, version, frame, baseline, compared, key)
    counts, summary, bars = shared("cmp_summary", (key, baseline, tuple(others)),
                                   lambda: _summary(frame, baseline, others, variants_shown, measure))
    common = int(summary["n"].iloc[0]) if len(summary) else 0
    st.markdown(f"**{md(name).capitalize()} and recall per question type** — only the questions every variant shown "
                "has a verdict for")
    st.caption("With a verdict: " + " · ".join(f"**{md(v)}** n={n}" for v, n in counts.items())
               + f". Compared on **{common}** question(s) all of them have"
               + (f"; {max(counts.values()) - common} left out (some variants only, errored, or not scored)."
                  if counts and max(counts.values()) > common else ".")
               + " Δ: percentage points against the baseline; colours and intervals are in the significance table above"
                 " (a delta alone may be noise).")
    if not common:
        st.warning("No question was answered by every variant shown: run the same questions under each (a batch run "
                   "over the same question set), or compare fewer variants.", icon=":material/warning:")
    else:
        rates = [col for col in summary.columns if col.endswith((f" {compare.SHORT[measure]}", " recall"))]
        st.dataframe(summary.style.format("{:.1%}", subset=rates, na_rep="—"), hide_index=True)
        export_buttons(summary, f"compare-summary-{baseline}")
        st.markdown(bars, unsafe_allow_html=True)
    st.markdown("**Complete chains, stale answers and revisions without rollback**")
    st.caption(f"**{md(stale.STALE)}**: {md(review_view.explain(stale.STALE))}. **{md(stale.ROLLBACK_MISSED)}**: "
               f"{md(review_view.explain(stale.ROLLBACK_MISSED))}. {md(review_view.EVIDENCE_EXPLAIN).capitalize()}; "
               f"{md(review_view.CHAIN_EXPLAIN)}.")
    st.dataframe(shared("cmp_review", (key, tuple(variants_shown)),
                        lambda: review_view.counts_table(frame, variants_shown)), hide_index=True)
    st.markdown("**Per question**")
    a, b = st.columns([1, 3])
    against = a.selectbox("Against", others, key="against", bind="query-params")
    changed = b.toggle("Only changed", key="changed", bind="query-params")
    aligned, counts, dashed = shared("cmp_per_question", (key, baseline, against, changed),
                                     lambda: _per_question(frame, baseline, against, measure, changed))
    for col, change in zip(st.columns(4), compare.CHANGES):
        col.metric(change, int(counts.get(change, 0)))
    pairs = [f"{scope}/{qid}" for scope, qid in zip(aligned["scope"], aligned["question_id"])]
    st.dataframe(dashed, hide_index=True, on_select=lambda: pick_pair(pairs),
                 selection_mode="single-row", key="cmp_table",
                 column_order=[c_ for c_ in aligned.columns if not c_.startswith("backend")])
    export_buttons(aligned, f"compare-{baseline}-vs-{against}")
    st.markdown("**Question × variant** (" + ("green evidence complete, amber partial, red none; questions not "
                "scored on evidence left out" if measure == vd.EVIDENCE else "green correct, red wrong, blank missing")
                + ")")
    heatmap = shared("cmp_heatmap", (key, baseline, tuple(others), changed),
                     lambda: _heatmap(frame, [baseline, *others], measure, changed))
    if heatmap is not None:
        st.markdown(heatmap, unsafe_allow_html=True)
    else:
        st.caption("No question differs between these variants.")
    pair = synced(st.selectbox, "Question to diff (or select a row of the per-question table)", [None, *pairs], "pair",
                  format_func=lambda p: p or "(no question selected)")
    if pair:
        row = aligned.iloc[pairs.index(pair)].to_dict()
        st.markdown(f"**{md(row['scope'])} / {md(row['question_id'])}: {md(against)} against the baseline "
                    f"{md(baseline)}**")
        refs = {side: TraceRef.from_row({**row, "variant" + side: name}, side)
                for side, name in ((" (baseline)", baseline), (f" ({against})", against))}
        loaded = {side: api.explorer.stored_trace(c, row["scope"], row["question_id"], ref) if ref else None
                  for side, ref in refs.items()}
        gold = api.explorer.question_gold(c, row["scope"], row["question_id"])
        cols = st.columns(2)
        vd_name = "evidence" if measure == vd.EVIDENCE else "verdict"
        for col, (side, trace), name in zip(cols, loaded.items(), (baseline, against)):
            with col.container(border=True):
                st.markdown(f"**{md(name)}** · {md(vd_name)} {md(row.get('verdict' + side) or '—')}")
                if trace is None:
                    st.caption("No stored trace for this side.")
                    continue
                for answer in trace.answers:
                    st.caption(f"{answer.presentation} answer" + (" (offline stand-in, secondary)" if answer.offline
                                                                  else f" ({answer.backend})"))
                    st.text(answer.text or "(empty answer)")
                if st.button("Open on the Question page", key=f"open{side}"):  # exactly this stored trace
                    open_question(c, row["scope"], row["question_id"], refs[side])
        base_trace, other_trace = loaded[" (baseline)"], loaded[f" ({against})"]
        if base_trace is not None and other_trace is not None:
            diff = compare.evidence_diff(base_trace, other_trace, gold, messages(c, row["scope"]))
            gained, lost = int((diff["change"] == "gained").sum()), int((diff["change"] == "lost").sum())
            gold_gained = int((diff["gold"] & (diff["change"] == "gained")).sum())
            gold_lost = int((diff["gold"] & (diff["change"] == "lost")).sum())
            st.markdown(f"**Evidence diff**: {md(against)} gave its answer model {gained} message(s) the baseline did "
                        f"not ({gold_gained} gold) and lost {lost} ({gold_lost} gold); "
                        f"{len(set(base_trace.evidence_ids) & set(other_trace.evidence_ids))} shared.")
            if len(diff):
                st.dataframe(tables.dashes(diff).style.map(
                    lambda v: f"color: {compare.UP}" if v == "gained" else f"color: {compare.DOWN}" if v == "lost"
                    else "", subset=["change"]), hide_index=True)
                export_buttons(diff, f"evidence-diff-{row['question_id']}-{against}")


render()
