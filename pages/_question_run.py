"""The Question view's run: the pipeline run with its progress (and, while it runs, the gold answer and the BM25
seed stage), and the banner of a Failures row it was opened from, with its previous / next row. Not a page."""
from __future__ import annotations

import time

import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx

from pages._callouts import failure_callout
from pages._links import PIN
from tmem import api
from tmem.api import ExplorerContext, models
from tmem.viz import progress as progress_view
from tmem.viz import run_settings
from tmem.viz.progress import eta_suffix
from tmem.viz.question import timeline as timeline_view
from tmem.viz.question.answers import readable
from tmem.viz.safe import md

FAILURE_NAV = "failure_nav"  # session state set by the Failures page: its filtered rows, the open one, its filters


def step_failure(c: ExplorerContext, nav: dict, index: int) -> None:
    """Previous / next row (a button callback: it runs before the widgets exist, so it may set the question and
    the sidebar's pending values the way open_question does, without leaving the page)."""
    nav["index"] = index
    row = nav["rows"][index]
    ref = row["ref"]
    st.session_state["_pending"] = {"corpus": c.corpus, "scope": row["scope"], "tab": "Timeline",
                                    **({"variant": ref.variant} if ref is not None and ref.is_preset else {})}
    st.session_state["q"] = row["question_id"]
    st.session_state[PIN] = (c.corpus, row["scope"], row["question_id"], ref) if ref else None


def failure_context(c: ExplorerContext, question, gold) -> None:
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
    # keyboard review: J / K step through the rows, B goes back (Streamlit ignores them while a text field is focused)
    prev.button("Previous", disabled=k == 0, key="fail_prev", icon=":material/chevron_left:",
                on_click=step_failure, args=(c, nav, k - 1), shortcut="K")
    nxt.button("Next", disabled=k + 1 >= n, key="fail_next", icon=":material/chevron_right:",
               on_click=step_failure, args=(c, nav, k + 1), shortcut="J")
    if back.button("Back to Failures", key="fail_back", icon=":material/arrow_back:", shortcut="B"):
        st.switch_page("pages/failures.py", query_params=nav["back"])



def preview_seeds(c: ExplorerContext, question, gold) -> None:
    """While the pipeline runs for the first time: the gold answer and the BM25 seed stage, computed by the same
    stage function the pipeline calls first (a fraction of a second once the scope is open), so the first screen
    is useful before discovery, structuring and the answer are done (the page then redraws with the whole trace)."""
    box = st.container(border=True)
    left, right = box.columns([1, 2])
    left.markdown("**gold answer**")
    left.text(gold.answer if gold and gold.answer else "— (no gold answer)")
    try:
        scope = api.explorer.stored_scope(c, question.scope)
        seeds = api.seed_preview(question, scope, c.config, c.variant, c.roles)
    except Exception:  # noqa: BLE001 - only a preview: the run that follows reports any failure as a callout
        right.caption("BM25 seed stage: not available yet.")
        return
    anchors = seeds.result.anchors
    found, units = progress_view.seed_units(anchors, gold)
    right.markdown(f"**BM25 seed stage — ready** · {len(anchors)} anchors of {len(scope):,} messages"
                   + (f" · gold evidence units among them: **{found} of {units}**" if units else ""))
    right.caption("Discovery, structuring, compression and the answer are running; this page redraws with them.")
    # a static plotly strip: the browser loads plotly.js now, while the pipeline runs, not after the answer
    box.plotly_chart(timeline_view.seed_strip(anchors, scope.by_id, gold), config={"staticPlot": True},
                     key="seed_strip")
    box.table(progress_view.seed_table(anchors, scope.by_id, gold))


def run_pipeline(c: ExplorerContext, question, gold, slot):
    """Run the pipeline for the question with a progress bar in `slot` (the local model's progress and ETA replace
    its text) and the seed preview below it; the stored trace, or a callout and a stop for a known failure."""
    bar = slot.progress(0.0, text="Starting…")
    preview_seeds(c, question, gold)  # the gold answer and the BM25 stage while the rest runs
    done, started = [0.0], time.perf_counter()

    def stage(s, f):
        done[0] = run_settings.overall_progress(s, f)
        bar.progress(done[0], text=run_settings.stage_text(s, f) + eta_suffix(time.perf_counter() - started, done[0]))
    try:
        with models.local_progress(c.roles, lambda line: bar.progress(done[0], text=line),
                                     prepare=add_script_run_ctx):
            return api.explorer.run_question_and_store(c, question, gold, progress=stage)
    except Exception as exc:  # a known failure is a callout with what to do; anything else still raises
        slot.empty()
        if not failure_callout(exc, "The pipeline could not run"):
            raise
        st.stop()
