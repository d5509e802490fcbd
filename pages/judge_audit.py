"""Judge audit view: two judges side by side on the same answers (the verdict stored with each answer, e.g. an
LLM judge or the recorded local model, against today's offline lexical judge), disagreements first, gold answers
that look broken flagged; CSV/JSON export. The rows and flags are tmem/viz/judge_audit.py (rules there)."""
from __future__ import annotations

import streamlit as st

from pages import ctx, export_buttons, synced
from tmem.models.recorded import RECORDING, load_recording
from tmem.viz import judge_audit as view
from tmem.viz.safe import md

c = ctx()
st.subheader("Judge audit")
st.caption("Judge A: the verdict stored with the answer (the judge that ran then). Judge B: today's offline lexical "
           "judge on the same gold and answer. Disagreements first, then questions whose gold looks broken (no "
           "evidence, or no word, number or date of the gold in its own evidence messages).")
if not c.corpus:
    st.info("No corpus loaded.")
    st.stop()
sources = ["stored traces"] + (["recorded local model"] if c.corpus == "demo" and RECORDING.exists() else [])
source = synced(st.radio, "Answers", sources, key="audit_source", default=sources[0], horizontal=True)


questions = {(q.scope, q.id): q for q in c.store.questions(c.corpus)}


def _gold(scope: str, question_id: str):
    question = questions[(scope, question_id)]
    gold = c.store.gold(c.corpus, scope, question_id)
    ids = [i for unit in (gold.evidence if gold else ()) for i in unit]
    return question, gold, view.gold_flag(question, gold, c.store.messages_by_ids(c.corpus, scope, ids))


rows = []
if source == "recorded local model":
    recording = load_recording()
    golds = {r["question"]: _gold(r["scope"], r["question"]) for r in recording.runs}
    rows = view.rows_from_recording(recording.runs, recording.model, golds)
    stale = [r["question"] for r in recording.runs if view.stale_run(r, golds[r["question"]][0])]
    if stale:
        st.warning(f"{len(stale)} recorded run(s) left out: their question text differs from the stored question "
                   f"({md(', '.join(dict.fromkeys(stale)))}); the demo was regenerated since the recording "
                   "(re-record with `make record-demo`).")
else:
    index = c.store.trace_index(c.corpus)
    latest = index.sort_values("created_at").drop_duplicates(["scope", "question_id", "variant", "backend"],
                                                             keep="last")
    # an ad-hoc question (typed on the Question page) has no stored question and no gold: nothing to judge
    adhoc = latest[[key not in questions for key in zip(latest["scope"], latest["question_id"])]]
    if len(adhoc):
        st.caption(f"{len(adhoc)} answer(s) to ad-hoc questions left out: they have no gold answer to judge against.")
    for ref in latest.drop(adhoc.index).to_dict("records"):
        trace = c.store.load_trace(c.corpus, ref["scope"], ref["question_id"], ref["variant"], ref["config_hash"],
                                   ref["backend"])
        if trace is not None:
            _, gold, flag = _gold(ref["scope"], ref["question_id"])
            rows += view.rows_from_trace(trace, ref["variant"], gold, flag)
if not rows:
    st.info(f"No judged answers for {md(c.corpus)} yet: run questions on the Question page or a batch with "
            "`python -m tmem run`, then come back.")
    st.stop()
counts = view.summary(rows)
for column, (label, value) in zip(st.columns(len(counts)), counts.items()):
    column.metric(label, value)
only = st.toggle("Only disagreements and flagged golds", key="audit_only")
frame = view.audit_frame(rows)
if only:
    frame = frame[(frame["agree"] == "NO") | (frame["gold flag"] != "")]
st.dataframe(frame, hide_index=True)
export_buttons(frame, f"judge-audit-{c.corpus}")
