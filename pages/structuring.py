"""Structuring view: for each stored trace of a corpus with gold edges, the edges its structuring built against
the gold edges of its evidence (UPDATE / EXPAND / ROOT), the wrong ones highlighted; the corpus-wide scores come
from `python -m tmem links` (docs/evaluation.md)."""
from __future__ import annotations

import streamlit as st

from pages._runs import batch_status
from pages._shell import ctx
from pages._widgets import shared
from tmem import api
from tmem.api.demo import PLANNED_EDGES
from tmem.evaluation.diagnostics.confusion import summarize
from tmem.evaluation.links import score_trace
from tmem.viz.batch.results import roles_line
from tmem.viz.question import structuring as view
from tmem.viz.safe import md


def corpus_confusion(corpus: str, scored: dict, run: tuple[str, str]) -> None:
    """The corpus (one style) gold x built over the latest stored traces run as `run` (variant, backend)."""
    same = [(ref["scope"], s) for ref, s, r in reversed(list(scored.values())) if r == run]
    rows = view.latest_rows(same)
    d = summarize(rows)
    st.markdown("**Confusion over the corpus**")
    st.caption(f"Gold (rows) × built (columns), the built edges split by right and wrong parent (EXPAND right: "
               f"built EXPAND under the gold parent), over the stored traces of {md(corpus)} run as {md(run[0])} "
               f"by {md(roles_line(run[1]))}: {len(rows)} children of {len(same)} questions, each child once (its "
               "latest question's decision). All annotated children, per scope, and leave-one-style-out across "
               "corpora: `python -m tmem links --details --json` (docs/evaluation.md, Diagnostics).")
    table = view.confusion_table(d["matrix"])
    st.dataframe(table, hide_index=True, column_config={c: st.column_config.NumberColumn(label, help=tip) for c, (
        label, tip) in view.confusion_labels(list(table.columns)).items()})
    st.caption(view.miss_summary(d["misses"]) + " The miss column below gives each child's class.")


SCORED_FIELDS = ("evidence_ids", "decisions", "stages")


def score_latest(c, gold: dict) -> tuple[dict, list]:
    """Each scope's latest stored traces scored against its gold edges: {(question, variant, backend): (index row,
    score, (variant, backend))} and the summary rows. Computed once per stored traces and gold for every session
    (pages._widgets.shared): scoring the demo batch's 192 traces took ~8 s of CPU on every visit."""
    scored, rows = {}, []
    # only what score_trace and summary_row read: the whole trace (spans, nodes, contexts) took ~1 s to rebuild
    for ref, trace in api.explorer.latest_traces(c, fields=SCORED_FIELDS):
        if not gold.get(ref["scope"]):
            continue
        score = score_trace(trace, gold[ref["scope"]])
        scored[(ref["question_id"], ref["variant"], ref["backend"])] = (ref, score, (ref["variant"], ref["backend"]))
        rows.append(view.summary_row(trace, ref["backend"], score))
    return scored, rows


def render() -> None:
    c = ctx()
    st.subheader("Structuring")
    st.caption("Expected (gold) vs built edges per question: each child in the question's evidence with a gold edge, "
               "whose gold parent is in the evidence too. Corpus-wide scores: `python -m tmem links --corpus NAME`.")
    if not c.corpus:
        st.info("No corpus loaded.")
        st.stop()
    batch_status(c)  # a batch run storing traces now: its progress, and the page redraws as they land
    scopes = api.explorer.scope_names(c)
    gold = {s: api.explorer.gold_edges(c, s) for s in scopes}
    if not any(gold.values()):
        st.info(f"Corpus {md(c.corpus)} has no gold edges. Import IRC disentanglement logs, or a GroupMemBench-layout "
                "corpus with reply_to / decision annotations or a gold_edges.jsonl sidecar (data/cases/), to score "
                "structuring here.")
        st.stop()
    planned = bool(api.explorer.generated_gold(c))  # the demo's gold is its generator's plan: say so
    if planned:
        st.info(f"Expected edges: {PLANNED_EDGES}.", icon=":material/science:")
    index = api.explorer.trace_index(c)
    if not len(index):
        st.info("No stored traces for this corpus yet: run questions on the Question page, or a batch with "
                "`python -m tmem run`, then come back.")
        st.stop()
    stored = tuple(map(tuple, index.astype(str).itertuples(index=False)))  # every trace's key and write time
    gold_key = tuple((s, len(g), hash(tuple(g))) for s, g in sorted(gold.items()))
    scored, rows = shared("structuring", (c.database, c.corpus, stored, gold_key), lambda: score_latest(c, gold))
    if not rows:
        st.info("No stored trace of a scope with gold edges.")
        st.stop()
    st.dataframe(view.summary_table(rows), hide_index=True)
    labels = view.trace_labels(list(scored))  # readable, never the stored "|"-joined roles (the URL holds it too)
    pick = st.selectbox("Question", list(scored), key="sq", bind="query-params", format_func=labels.get)
    ref, score, run = scored[pick]
    trace = api.explorer.row_trace(c, ref)
    corpus_confusion(c.corpus, scored, run)
    children = [r["child"] for r in score.rows]
    messages = {m.id: m for m in api.explorer.messages_by_ids(c, trace.question.scope, children)}
    d = score.as_dict()
    st.caption(f"{score.edge_right} of {score.children} edges right (edge accuracy {d['edge_accuracy'] or 0:.2f}); "
               f"{len(score.rows) - score.edge_right} wrong, listed first"
               + (f"; expected: {PLANNED_EDGES}." if planned else "."))
    st.dataframe(view.highlight_wrong(view.edge_table(score, messages)), hide_index=True)
    near = view.near_misses(trace, {m.id: m for m in api.explorer.messages_by_ids(c, trace.question.scope,
                                                                              [d.child_id for d in trace.decisions])})
    st.markdown("**Near misses**")
    st.caption("The decisions closest to going the other way: the smallest margin between the chosen parent (or ROOT) "
               "and the runner-up, from the relation role's recorded reasons.")
    if len(near):
        st.dataframe(near, hide_index=True)
    else:
        st.info("This trace's relation role recorded no runner-up margins (an LLM role or a rule-based offline role).")


render()
