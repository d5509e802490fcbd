"""Judge audit view: two judges side by side on the same answers (the verdict stored with each answer, e.g. an
LLM judge or the recorded local model, against today's offline lexical judge), disagreements first, gold answers
that look broken flagged; CSV/JSON export. The rows and flags are tmem/viz/batch/judge_audit.py (rules there).

An audit needs two different judges. Out of the box (the demo) it opens on the recorded local model's verdicts; when
every stored verdict came from the lexical judge itself it says so, and how to get a second judge, instead of
showing "0 disagreements"."""
from __future__ import annotations

import streamlit as st

from pages._runs import batch_status
from pages._shell import ctx
from pages._widgets import export_buttons, shared, synced
from tmem import api
from tmem.api import backends
from tmem.viz.batch import judge_audit as view
from tmem.viz.batch import tables
from tmem.viz.safe import md

RECORDED, STORED = "recorded local model", "stored traces"


@st.cache_data(show_spinner="Reading the stored verdicts…", max_entries=8)
def stored_rows(db: str, corpus: str, stamp: str, _c) -> tuple[list, int]:
    """(audit rows of the latest trace per question, variant and backend; ad-hoc answers left out), cached until a
    trace is stored: the page reads a few fields of each trace's JSON, not whole traces."""
    index = api.explorer.trace_index(_c, with_json=True)
    latest = index.drop_duplicates(["scope", "question_id", "variant", "backend"], keep="last")
    questions = {(q.scope, q.id): q for q in api.explorer.questions(_c)}
    adhoc = sum(key not in questions for key in zip(latest["scope"], latest["question_id"]))
    rows, golds = [], {}
    for ref in latest.to_dict("records"):
        key = (ref["scope"], ref["question_id"])
        if key in questions:  # an ad-hoc question (typed on the Question page) has no gold to judge against
            if key not in golds:  # once per question, not per variant
                golds[key] = _gold(_c, questions[key])
            rows += view.rows_from_trace_json(ref["trace_json"], ref["variant"], *golds[key])
    return rows, adhoc


def _gold(c, question):
    gold = api.explorer.question_gold(c, question.scope, question.id)
    ids = [i for unit in (gold.evidence if gold else ()) for i in unit]
    return gold, view.gold_flag(question, gold, api.explorer.messages_by_ids(c, question.scope, ids))


def recorded_rows(c) -> tuple[list, list[str]]:
    """(audit rows of the recorded local model's runs, the questions of runs left out: their text changed since)."""
    recording = backends.load_recording()
    questions = {q.id: q for q in api.explorer.questions(c)}
    golds = {r["question"]: (questions[r["question"]], *_gold(c, questions[r["question"]]))
             for r in recording.runs if r["question"] in questions}
    stale = [r["question"] for r in recording.runs if r["question"] in golds
             and view.stale_run(r, golds[r["question"]][0])]
    return view.rows_from_recording(recording.runs, recording.model, golds), stale


def render() -> None:
    c = ctx()
    st.subheader("Judge audit")
    st.caption("Judge A: the verdict stored with the answer (the judge that ran then). Judge B: today's offline "
               "lexical judge on the same gold and answer. Disagreements first, then questions whose gold looks broken "
               "(no evidence, or no word, number or date of the gold in its own evidence messages).")
    if not c.corpus:
        st.info("No corpus loaded.")
        st.stop()
    batch_status(c)  # a batch run storing traces now: its progress, and the page redraws as they land
    recorded = c.corpus == "demo" and backends.RECORDING.exists()
    # the recorded local model is a second judge; stored traces judged by the lexical judge itself are not
    sources = [RECORDED, STORED] if recorded else [STORED]
    source = synced(st.radio, "Answers", sources, key="audit_source", default=sources[0], horizontal=True,
                    help="Recorded local model: the verdicts of the real model recorded in data/recorded-local.json. "
                         "Stored traces: the verdict stored with each answer in this database.")
    if source == RECORDED:
        # shared by every session until the corpus (its questions and gold) or the recording changes
        key = (c.database, c.corpus, str(api.explorer.corpus_info(c)["imported_at"]),
               backends.RECORDING.stat().st_mtime_ns)
        rows, stale = shared("audit_recorded", key, lambda: recorded_rows(c))
        if stale:
            st.warning(f"{len(stale)} recorded run(s) left out: their question text differs from the stored question "
                       f"({md(', '.join(dict.fromkeys(stale)))}); the demo was regenerated since the recording "
                       "(re-record with `make record-demo`).")
    else:
        index = api.explorer.trace_index(c)
        stamp = f"{len(index)}:{index['created_at'].max() if len(index) else ''}"
        rows, adhoc = stored_rows(c.database, c.corpus, stamp, c)
        if adhoc:
            st.caption(f"{adhoc} answer(s) to ad-hoc questions left out: they have no gold answer to judge against.")
        if view.same_judge(rows):
            st.warning("**This needs a second judge.** Every stored verdict here came from the offline lexical judge, "
                       "the same rules as judge B: the table compares that judge with itself, so it cannot disagree. "
                       "To audit: " + ("pick **recorded local model** above (a real model's verdicts on the demo's "
                                       "curated questions), or " if recorded else "")
                       + "set the judge role to a language model on the **Settings** page and re-run questions, or "
                       "run a batch with one: `python -m tmem run --corpus " + md(c.corpus) + " --judge-backend openai "
                       "--judge-model <model> --judge-base-url <url>`.", icon=":material/balance:")
    if not rows:
        st.info(f"No judged answers for {md(c.corpus)} yet: run questions on the Question page or a batch with "
                "`python -m tmem run`, then come back.")
        st.stop()
    counts = view.summary(rows)
    st.caption(f"Judge A: **{md(', '.join(sorted({r.judge_a for r in rows})))}** · judge B: **{md(view.LEXICAL)}**")
    for column, (label, value) in zip(st.columns(len(counts)), counts.items()):
        column.metric(label, value)
    only = st.toggle("Only disagreements and flagged golds", key="audit_only")
    frame = view.audit_frame(rows)
    if only:
        frame = frame[(frame["agree"] == "no") | (frame["gold flag"] != "")]
    st.dataframe(tables.readable_frame(frame), hide_index=True)
    export_buttons(frame, f"judge-audit-{c.corpus}")


render()
