"""Failures view: the rows of a stored batch run under a gold version, filtered, failures first. Offline the primary
verdict is the evidence (tmem.analysis.verdicts), with a real answer model the judged answer; each failure is attributed
to the first stage that lost gold evidence, stale answers and revisions without rollback are flagged; counts are
clickable filters; a selected row opens the Question view, takes a reviewer's annotation and shows what raising k
would have found."""
from __future__ import annotations

import streamlit as st

from pages import _batch_cost as batch_cost
from pages._failure_row import SHOWN_VERDICT, selected_row
from pages._links import question_url
from pages._runs import batch_status, incomplete_warning, run_choices, run_label
from pages._shell import ctx
from pages._verdict_rows import gold_version, reviewed, rows_key, version_caption
from pages._widgets import export_buttons, shared, synced
from tmem import api
from tmem.analysis import verdicts as vd
from tmem.analysis.annotations import (
    label_counts,
    with_annotations,
)
from tmem.analysis.whatif_k import k_curve, units_for_traces
from tmem.api import TraceRef
from tmem.evaluation.batch import jobs
from tmem.evaluation.batch.run import select_questions
from tmem.evaluation.gold_versions import ORIGINAL
from tmem.evaluation.metrics import recall_eligible
from tmem.viz import run_settings
from tmem.viz.batch import annotations as notes_view
from tmem.viz.batch import review as review_view
from tmem.viz.batch import tables
from tmem.viz.question import whatif as whatif_view
from tmem.viz.safe import md


def whatif_curve(c, rows, version: str) -> None:
    """The paper's Exp-2 argument over the run: the share of gold units BM25 alone reaches at each k against what
    the variant found at its own k (tmem.analysis.whatif_k; no model calls). Built on request: it reads every stored
    trace."""
    # a keyed expander keeps its open state when the toggle below reruns the page (it used to fold on every switch)
    with st.expander("What-if on k across the run", icon=":material/trending_up:", key="whatif_open",
                     on_change="rerun"):
        options = sorted(rows["variant"].dropna().unique())
        if st.session_state.get("whatif_variant") not in options:  # the sidebar's variant, not the first (flat)
            st.session_state["whatif_variant"] = c.variant if c.variant in options else (options or [None])[0]
        variant = st.selectbox("What-if variant", options, key="whatif_variant")
        if not variant or not st.toggle("Rank every gold unit of this variant's rows", key="whatif_on"):
            return
        gold_of, pairs, scopes = api.explorer.gold_of_version(c, version), [], {}
        for row in rows[rows["variant"] == variant].to_dict("records"):
            ref = TraceRef.from_row(row)
            trace = api.explorer.stored_trace(c, row["scope"], row["question_id"], ref) if ref else None
            gold = gold_of(row["scope"], row["question_id"])
            if trace is not None and recall_eligible(trace.question, gold):  # the units `run`'s recall counts
                pairs.append((trace, gold))
        units, drifted = units_for_traces(pairs, lambda name: scopes.setdefault(
            name, api.explorer.stored_scope(c, name)))
        curve = k_curve(units)
        st.markdown(whatif_view.curve_svg(curve), unsafe_allow_html=True)  # the report's SVG: no plotly to load
        st.caption(md(whatif_view.curve_text(curve)) + (f" {drifted} stored run(s) were seeded by another ranking "
                                                       "(the corpus or the code changed since)." if drifted else ""))


def display_table(c, filtered, category, measure):
    """(the rows of a failure category as shown, each row's TraceRef, the table with dashes and readable verdicts)."""
    table = review_view.failure_table(review_view.in_category(filtered, category, measure), measure)
    table["annotation"] = [notes_view.annotation_text(r) or "—" for r in table.to_dict("records")]
    # what differs between questions, not the opening they share (the whole question is in the row's detail)
    table["shown question"] = tables.distinct_heads(table["question"].fillna("—").astype(str).tolist())
    # a row opens exactly its own stored trace (variant, config hash, backend), not the sidebar's variant
    refs = [TraceRef.from_row(row) for row in table.to_dict("records")]
    table.insert(0, "open", [question_url(c, s, q, ref)
                             for s, q, ref in zip(table["scope"], table["question_id"], refs)])
    return table, refs, tables.dashes(table).assign(verdict=lambda t: t["verdict"].replace(SHOWN_VERDICT))


def batch_form(c) -> None:
    """Start a batch run of the corpus in the background (`python -m tmem run` per variant, tmem.evaluation.batch.jobs):
    its results appear in the Run list variant by variant while it runs; the CLI may run at the same time."""
    running = api.explorer.active_batch(c)
    with st.expander("Run a batch", icon=":material/playlist_play:", expanded=False):
        questions = api.explorer.questions(c)
        types = sorted({q.type for q in questions if q.type})
        # no st.form: its widgets would report only on submit, and the "N questions x M variants" line below
        # must follow the typed limit, types and variants as they change
        a, b = st.columns([3, 2])
        variants = a.multiselect("Variants and baselines", api.method_names(), default=list(jobs.MAIN_VARIANTS),
                                 key="batch_variants",
                                 help="Each runs stage-wise over the chosen questions (App. D), one after another.")
        chosen = b.multiselect("Question types", types, placeholder="all types", key="batch_types")
        d, e = st.columns([1, 4])
        limit = d.number_input("Limit", min_value=0, value=0, key="batch_limit",
                               help="Only the first N questions; 0 = all.")
        offline = run_settings.all_offline(c.roles)
        names = ", ".join(sorted({r.backend for r in (c.roles.evidence_utility, c.roles.relation, c.roles.answer,
                                                      c.roles.judge)}))
        # keyed by the session's backend: applying an endpoint on Settings offers it at once (the choice used to stay
        # on "offline", kept from when the radio was disabled)
        backend = e.radio("Backend", ["offline", "session"], index=0 if offline else 1, horizontal=True,
                          disabled=offline, key=f"batch_backend-{names}",
                          format_func={"offline": "offline stand-ins", "session": f"this session's ({names})"}.get)
        g, h, _ = st.columns([1, 1, 3])
        go = g.button("Start the batch", type="primary", disabled=running is not None, key="batch_start",
                      icon=":material/play_arrow:")
        with h:
            estimate = batch_cost.estimate_button()
        picked = select_questions(questions, ",".join(chosen) or None, int(limit) or None)
        st.caption(f"{len(picked)} question{'' if len(picked) == 1 else 's'} × {len(variants)} variant"
                   f"{'' if len(variants) == 1 else 's'}, in the background at low priority; "
                   "`python -m tmem run` does the same from a terminal, also while the app is open.")
        budget = batch_cost.controls(c, picked, variants, offline or backend == "offline", estimate)
        if go:
            overrides = ({"backend.preset": "offline"} if offline or backend == "offline"
                         else dict(st.session_state.get("backend_overrides", {})))
            try:
                api.explorer.start_batch(c, variants, len(picked), types=chosen,
                                 limit=int(limit) or None, backend=overrides, budget=budget,
                                 session_key=st.session_state.get("session_api_key"))
            except ValueError as exc:
                st.error(str(exc))
            else:
                st.rerun()


def render() -> None:
    c = ctx()
    st.subheader("Failures")
    if not c.corpus:
        st.info("No corpus loaded.")
        st.stop()
    batch_form(c)
    batch_status(c)
    runs = run_choices(c)
    top = st.columns([3, 2])
    # always in the URL, the default too: a saved link reopens this run even after a newer one (synced's `always`)
    run = synced(top[0].selectbox, "Run", runs, "run", default=runs[0], always=True, format_func=run_label(c),
                 help="Batch runs written by `python -m tmem run`, or the traces run in this app.")
    incomplete_warning(c, run)
    version = gold_version(c, run, top[1])
    frame, measure, source = reviewed(c, run, version)
    if not len(frame):
        st.info("No results in this run yet. Run questions on the Question page, or a batch (*Run a batch* above, or "
                "`python -m tmem run` in a terminal); its results appear here as each variant finishes.")
        st.stop()
    attribution = (" Each failure is attributed to the first stage that lost gold evidence: anchor miss → window "
                   "miss → selection miss → compressed away." if measure == vd.EVIDENCE else " A wrong answer is "
                   "attributed to the first stage that lost its gold evidence: anchor miss → window miss → selection "
                   "miss → link error → compressed away → answer wrong despite evidence.")
    st.caption(vd.EXPLAIN[measure] + f" Accuracy source: **{md(source)}**. " + version_caption(version, frame)
               + attribution)
    notes = api.explorer.annotations(c)
    # the page's reruns (a row picked, a filter, *Back to Failures*) and every new session rebuild the same table:
    # shared under what it is made of (the run's rows, the corpus's import -- question texts --, the stored
    # annotations, the filters) -- ~0.3-0.8 s of pandas each time
    base = (*rows_key(c, run, version, frame), hash(tuple(notes.astype(str).itertuples(index=False))))
    frame = shared("fail_frame", base, lambda: with_annotations(vd.with_primary(frame, measure), notes))
    options = lambda column: [None, *sorted(frame[column].dropna().astype(str).unique())]
    every = lambda label: (lambda v: v if v is not None else f"all {label}")
    f1, f2, f3 = st.columns(3)  # two rows of three: five in a row cut "all variants" to "all vari" at 1100 px
    f4, f5, f6 = st.columns(3)
    # "Show variant", not "Variant": the sidebar's Variant picks what the Question page runs, this one filters rows
    variant = f1.selectbox("Show variant", options("variant"), key="fv", bind="query-params",
                           format_func=every("variants"))
    qtype = f2.selectbox("Question type", options("qtype"), key="qtype", bind="query-params",
                         format_func=every("types"))
    verdict = synced(f3.selectbox, "Verdict" + (" (evidence)" if measure == vd.EVIDENCE else ""),
                     [None, *review_view.verdict_options(measure)], "verdict",
                     format_func=lambda v: SHOWN_VERDICT.get(v, v) if v is not None else "all verdicts",
                     placeholder="all verdicts")
    scope = f4.selectbox("Scope", options("scope"), key="fscope", bind="query-params", format_func=every("scopes"))
    label = synced(f5.selectbox, "Annotation", notes_view.filter_choices(frame), "label", default=notes_view.ANY,
                   help=notes_view.EXPLAIN)
    filtered = notes_view.filter_label(frame, label)
    found = f6.text_input("Search the stored traces", key="fsearch", bind="query-params",
                          placeholder="words of a message, an answer, a reason",
                          help="Rows whose stored trace holds this text anywhere: the question, the messages of its "
                               "evidence and context, the answers and their reasons, the verdicts.")
    if found.strip():
        hits = api.explorer.search_traces(c, found.strip())
        keys = set(zip(hits["scope"], hits["question_id"], hits["variant"], hits["config_hash"], hits["backend"]))
        filtered = filtered[[k in keys for k in zip(filtered["scope"], filtered["question_id"], filtered["variant"],
                                                    filtered["config_hash"], filtered["backend"])]]
    for column, value in (("variant", variant), ("qtype", qtype), ("verdict", verdict), ("scope", scope)):
        if value:
            filtered = filtered[filtered[column].fillna("(none)").astype(str) == value]
    counts = shared("fail_counts", (base, variant, qtype, verdict, scope, label, found.strip()),
                   lambda: review_view.category_counts(filtered, measure))
    category = synced(st.pills, "Failure category (click to filter)", list(counts), "failure",
                      format_func=lambda k: f"{k} · {counts[k]}")
    if category in review_view.CATEGORY_EXPLAIN:
        st.caption(f"**{md(category)}**: {md(review_view.CATEGORY_EXPLAIN[category])}.")
    table, refs, shown = shared("fail_table_rows", (base, variant, qtype, verdict, scope, label, found.strip(),
                                                   category), lambda: display_table(c, filtered, category, measure))
    st.caption(f"{len(table)} of {len(frame)} rows, failures first. Select a row to open it, annotate it or see what "
               "raising k would have found; *open ↗* opens its stored trace in a new tab.")
    front = [{"question": "shown question"}.get(c_, c_) for c_ in review_view.front_columns(measure) if c_ in table]
    labels = {k: st.column_config.TextColumn(v, width="medium" if k == "answer" else None)
              for k, v in review_view.column_labels(measure).items()}
    picked = st.dataframe(shown, hide_index=True, on_select="rerun", selection_mode="single-row",
                          key="fail_table", column_order=front,
                          column_config={"open": st.column_config.LinkColumn("open", display_text="open ↗"),
                                         "shown question": st.column_config.TextColumn("question", width="medium"),
                                         **labels})
    export_buttons(table.drop(columns=["open", "shown question"]), f"failures-{category or 'all'}")
    if frame["label"].notna().any():
        with st.expander("Annotations per label × attributed stage", icon=":material/label:"):
            st.caption("Reviewers' labels on the rows shown, against the stage the automatic attribution blamed "
                       "(open coding, then axial coding): where they disagree, the attribution or the gold needs a "
                       "look.")
            st.dataframe(label_counts(filtered), hide_index=True)
    whatif_curve(c, frame, version)
    if picked.selection.rows:
        back = {"run": run, "fv": variant, "qtype": qtype, "verdict": verdict, "fscope": scope, "failure": category,
                "gold": None if version == ORIGINAL else version}
        selected_row(c, table, refs, picked.selection.rows[0], back)


render()
