"""The top of the Question view (this file is not a page): the evidence card, which leads when offline stand-ins
answered (the answer context is what T-Mem decides: tmem.viz.question.evidence_card), then the answer cards, visibly
secondary offline, each with a stale flag when it repeats a replaced state; with a real answer model the answers
lead and the card follows. Reviewers' notes on the trace show above both."""
from __future__ import annotations

import streamlit as st

from pages._question_run import failure_context
from pages._widgets import export_buttons, offline_label
from tmem import api
from tmem.analysis.stale import stale_answer
from tmem.api import ExplorerContext, models
from tmem.viz.question import answers as answer_view
from tmem.viz.question import evidence
from tmem.viz.question import evidence_card as card_view
from tmem.viz.safe import md, shorten

BADGES = {"correct": " :green-badge[correct]", "wrong": " :red-badge[wrong]", "error": " :gray-badge[error]"}
VERDICT_STYLE = {"complete": ("green", ":material/check_circle:"), "partial": ("orange", ":material/rule:"),
                 "none": ("red", ":material/cancel:")}


def reviewer_notes(c: ExplorerContext, question, trace) -> None:
    """Reviewers' annotations on this question and variant under this configuration (Failures' *Annotate*)."""
    notes = api.explorer.annotations(c)
    if not len(notes):
        return
    mine = notes[(notes["scope"] == question.scope) & (notes["question_id"] == question.id)
                 & (notes["variant"] == trace.variant) & (notes["config_hash"] == trace.config_hash)]
    for r in mine.drop_duplicates(["run_id", "author"]).itertuples():
        st.info(f"**Reviewer's note · {md(r.label)}**" + (f": {md(r.note)}" if r.note else "")
                + f" ({md(r.author)}, {str(r.created_at)[:16]})", icon=":material/edit_note:")


def evidence_panel(question, trace, gold, offline: bool) -> None:
    """The evidence verdict card: the verdict, the gold units each stage found, the decisive recovered message."""
    card = card_view.evidence_card(trace, gold, offline)
    colour, icon = VERDICT_STYLE.get(card.verdict or "", ("gray", ":material/help:"))
    with st.container(border=True, key="evidence_card"):
        st.markdown(f"### {icon} :{colour}[{md(card.headline)}]")
        if card.steps:
            st.markdown("Gold units found: " + " → ".join(f"{md(label)} **{md(value)}**"
                                                         for label, value in card.steps))
        for d in card.decisive:
            st.markdown(f"**Decisive message recovered: {md(d.name)}** — “{md(d.text)}”",
                        help=f"message id {d.message_id}")
            st.caption(md(d.how))
        if card.missing:
            st.markdown(f"**Missing from the answer context:** {md(card.missing)}")
        st.caption(md(card.note))
        if gold and gold.evidence:  # the line above is the funnel's story; its six counts fold away
            with st.expander("The evidence funnel, stage by stage"):
                funnel_metrics(question, trace, gold)


def funnel_metrics(question, trace, gold) -> None:
    """The gold evidence units surviving each stage, as metrics, with the funnel table's exports."""
    if not (gold and gold.evidence):
        return
    funnel = evidence.funnel_table(trace, gold)
    off, not_part = answer_view.stages_off(trace), answer_view.stages_not_part(trace)
    stages = st.container(horizontal=True, gap="medium")  # wraps at 1100 px instead of cutting the labels
    for row in funnel.itertuples():
        if row.stage in not_part:
            stages.metric(evidence.FUNNEL_LABELS[row.stage], "not part of this system", width="content",
                          help="The memory system this baseline ran has no such stage: nothing was lost here.")
        elif row.stage in off:
            stages.metric(row.label, "off", help="This variant does not run this stage.", width="content")
        else:
            stages.metric(row.label, f"{row.units}/{int(funnel['units'][0])}", delta=int(row.change) or None,
                          width="content")
    export_buttons(funnel, f"funnel-{question.id}")


def answer_cards(trace, gold, offline: bool, reference=None) -> None:
    """The forest and flat answers beside the gold answer: verdict, who answered, a stale flag, the judge's reason."""
    st.subheader("Answers" + (" · offline stand-ins, secondary" if offline else ""))
    st.caption("The forest answer reads the typed evidence forest; the flat answer reads the same evidence as a "
               "list (App. I). " + ("Offline, an extractive answerer and a lexical judge stand in for the models: "
                                    "they show the parts are wired together; the evidence card above is the verdict. "
                                    if offline else "Verdicts come from the judge role against the gold answer. ")
               + "*error* means a model role failed and the pipeline used its fallback.")
    texts = (reference.texts if reference else {}) | {n.message_id: n.text for n in trace.nodes}
    cols = st.columns(3)
    for col, card in zip(cols, answer_view.answer_cards(trace)):
        with col.container(border=True):
            if card.text is None:
                st.caption(card.caption)
                continue
            st.markdown(f"**{card.presentation} answer**{BADGES.get(card.verdict, '')}{offline_label(card.offline)}")
            judged = trace.verdict(card.presentation)
            answer = trace.answer(card.presentation)
            if line := card_view.small_model_line(answer, None if judged is None else judged.correct):
                # a wrong answer is the model's, not a fault of the app: a warning, never an error callout
                (st.warning if judged is not None and not judged.correct else st.info)(md(line),
                                                                                        icon=":material/memory:")
            if card.errors:
                st.error("**A model role failed**; the answer below is the pipeline's fallback.\n\n"
                         + "\n".join(f"- {md(line)}" for line in card.errors), icon=":material/error:")
            st.text(card.text or "(empty answer)")
            if finding := stale_answer(trace, gold, card.presentation, reference):
                st.warning(md(card_view.stale_line(finding, gold, texts)), icon=":material/history:")
            st.caption(md(card.caption))
            if judged is not None:  # why the judge decided as it did, in its own words
                st.caption(f"Judge {md(judged.backend.split(' [', 1)[0])}: "
                           f"{md(shorten(' '.join(judged.raw.split()), 300))}"
                           if judged.raw.strip() else f"Judge {md(judged.backend)}: no reason recorded")
    with cols[2].container(border=True):
        st.markdown("**gold answer**")
        st.text(gold.answer if gold and gold.answer else "— (no gold answer)")
        if gold and gold.superseded:
            st.caption("superseded state: " + md(gold.superseded))
    if answer_view.advice(trace):
        st.warning("**What to do:** " + answer_view.advice(trace), icon=":material/build:")


def top(c: ExplorerContext, question, trace, gold) -> None:
    """Offline: the evidence card, then the answers; with a real answer model: the answers, then the card."""
    failure_context(c, question, gold)
    reviewer_notes(c, question, trace)
    # a language model that gave every reply the same label is not structuring
    for pattern in models.trace_patterns(trace):
        st.warning(f"**Reply pattern:** {md(pattern)}. The forest reflects the model's bias, not the conversation.",
                   icon=":material/warning:")
    offline = bool(trace.answers) and all(a.offline for a in trace.answers)
    reference = api.explorer.stale_reference(c, trace, gold)  # the same chain for every variant's answer
    if offline:
        evidence_panel(question, trace, gold, offline)
        answer_cards(trace, gold, offline, reference)
    else:
        answer_cards(trace, gold, offline, reference)
        evidence_panel(question, trace, gold, offline)
