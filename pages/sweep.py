"""Sweep view: a stored sweep (`python -m tmem sweep`) as a heat-map over two swept parameters (a line over one;
the others held at a chosen value), the paper's default marked; a cell (clicked, or picked) lists its questions,
each opening the Question page under exactly that cell's configuration (`variant=` and `cfg=`)."""
from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from pages._background import sweep_status
from pages._shell import ctx
from pages._widgets import export_buttons, synced
from tmem import api
from tmem.viz.batch import compare, tables
from tmem.viz.batch import results as results_view
from tmem.viz.batch import sweep as view
from tmem.viz.safe import md


def render() -> None:
    c = ctx()
    st.subheader("Sweep")
    st.caption("How key-evidence recall (and accuracy, where the cells ran the whole pipeline) moves with the "
               "parameters. Written by `python -m tmem sweep --grid section.field=v1,v2 ...` (docs/evaluation.md).")
    if not c.corpus:
        st.info("No corpus loaded.")
        st.stop()
    sweep_status(c)  # a sweep being measured now: its progress, and the page redraws when it ends
    names = api.explorer.sweep_names(c)
    if not names:
        st.info(f"No sweep of corpus {md(c.corpus)} yet. Run one, e.g. `python -m tmem sweep --corpus {md(c.corpus)} "
                "--grid discovery.eps_hours=6,12,24 --grid retrieval.k=12,36,72`, then come back.")
        st.stop()
    name = synced(st.selectbox, "Sweep", names, "sweep", default=names[0])
    rows = api.explorer.sweep_results(c, name)
    runs = sorted(set(zip(rows["measure"], rows["backend"])))
    if len(runs) > 1:  # the same sweep measured under other roles or another measure: never mix them in one cell
        pick = st.selectbox("Measure and roles", runs, key="sweep_run",
                            format_func=lambda r: f"{r[0]} · {results_view.roles_line(r[1])}")
    else:
        pick = runs[0]
    rows = rows[(rows["measure"] == pick[0]) & (rows["backend"] == pick[1])]
    summary = view.summarize(rows)
    names_ = view.axes(summary)
    st.caption(f"**{len(summary)}** cells · measure **{md(pick[0])}** · roles {md(results_view.roles_line(pick[1]))}"
               + (" · offline stand-ins: accuracy is a plumbing figure, not a T-Mem result"
                  if pick[0] == "accuracy" and "offline:" in pick[1] else ""))
    if c.corpus == api.DEMO_CORPUS:  # every figure of the demo says where it comes from (issue 42)
        n = rows[["scope", "question_id"]].drop_duplicates().shape[0]
        note = compare.source_note(c.corpus, api.DEMO_CORPUS, n)  # capitalize() would lower BM25 and T-Mem
        st.info(note[:1].upper() + note[1:] + ".", icon=":material/science:")
    metrics = view.metrics_available(summary)
    # offline answers: the evidence leads (tmem.analysis.verdicts)
    stand_in = pick[0] == "accuracy" and "offline:" in pick[1]
    first = "evidence_complete" if stand_in and "evidence_complete" in metrics else metrics[0]
    # the metric on a row of its own: its longest label ("evidence complete (R'(q) holds every gold unit)") was cut
    # in a third of the row at 1100 px (issue 42)
    metric = synced(st.selectbox, "Metric", metrics, "metric", default=first,
                    format_func=lambda m: "stand-in accuracy (secondary, a plumbing figure)" if m == "accuracy" and
                    stand_in else view.METRICS[m][0])
    cols = st.columns(2)
    x = synced(cols[0].selectbox, "x axis", names_, "x", default=names_[0])
    y = synced(cols[1].selectbox, "y axis", [n for n in names_ if n != x] or [None], "y",
               default=next((n for n in names_ if n != x), None)) if len(names_) > 1 else None
    shown = [n for n in (x, y) if n]
    fixed = {}
    for n in names_:
        if n not in shown:
            options = view.values(summary, n)
            default = view.paper_default(n)
            fixed[n] = st.selectbox(f"{n} (held at)", options, key=f"fix-{n}",
                                    index=options.index(default) if default in options else 0)
    part = view.fix_others(summary, shown, fixed)
    figure = view.heatmap_figure(part, x, y, metric) if y else view.line_figure(part, x, metric)
    event = st.plotly_chart(figure, key="sweep_chart", on_select="rerun", selection_mode="points",
                            config={"displaylogo": False})
    if y:  # the chart's legend as text that wraps (a Plotly title is one line, cut at 1100 px)
        st.caption(view.HEATMAP_LEGEND)
    points = (event or {}).get("selection", {}).get("points", []) if event else []
    if points and points[0].get("customdata"):
        st.session_state["cell"] = points[0]["customdata"]
    missing = [n for n in shown if view.paper_default(n) not in view.values(summary, n)]
    if missing:
        st.caption(f"The paper's default of {md(', '.join(missing))} is not in the grid: no cell is marked.")
    table = view.cell_table(summary)
    st.dataframe(tables.dashes(table), hide_index=True)
    export_buttons(table, f"sweep-{name}")
    st.markdown("**Open a cell** (or click it on the chart)")
    cells = list(summary["cell"])
    cell = synced(st.selectbox, "Cell", [None, *cells], "cell", format_func=lambda k: k or "(no cell selected)")
    if cell:
        questions = view.cell_questions(rows, cell)
        base = {"corpus": c.corpus}
        questions.insert(0, "open", ["/?" + urlencode({**base, "scope": r["scope"], "q": r["question_id"],
                                                       "variant": r["variant"], "cfg": r["overrides"]})
                                     for r in questions.to_dict("records")])
        st.caption("Each question opens on the Question page under this cell's configuration"
                   + (" (its stored trace, where the cell ran the whole pipeline with the app's roles)."
                      if pick[0] == "accuracy"
                      else "; the page runs the pipeline for it (recall cells stored no trace)."))
        st.dataframe(tables.dashes(questions), hide_index=True, column_config={"open": st.column_config.LinkColumn(
            "open", display_text="open")})
        export_buttons(questions, f"sweep-cell-{cell}")


render()
