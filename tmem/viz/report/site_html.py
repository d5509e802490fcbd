"""The HTML of the run report (tmem.viz.report.site): the index page, the review block of each question page and the
summary.json body. Every value from the data goes through `esc` (tables through pandas' escaping to_html); the
page loads nothing and runs no script (tmem.viz.report.question.CSP).
"""
from __future__ import annotations

from datetime import datetime

import pandas as pd

from tmem.analysis import verdicts as vd
from tmem.analysis.annotations import UNATTRIBUTED
from tmem.analysis.funnel import FAILURE_CATEGORIES
from tmem.analysis.significance import method_note
from tmem.analysis.stale import EXPLAIN, ROLLBACK_MISSED, STALE
from tmem.demo import DEMO_CORPUS
from tmem.viz.batch.annotations import annotation_text
from tmem.viz.batch.compare import source_note
from tmem.viz.batch.results import roles_line
from tmem.viz.batch.review import EVIDENCE_EXPLAIN, counts_table, evidence_text, review_text, truthy
from tmem.viz.batch.significance import EXPLAIN as SIGNIFICANCE_EXPLAIN
from tmem.viz.batch.significance import MEASURE_LABEL, comparison_rows, whisker_svg
from tmem.viz.question.whatif import EXPLAIN as WHATIF_EXPLAIN
from tmem.viz.question.whatif import curve_svg, curve_text, unit_table
from tmem.viz.report.question import CSP, STYLE, table_html
from tmem.viz.safe import esc

EXTRA_STYLE = """body{padding:0 1.25rem}
.win{color:#2b8a3e;font-weight:600}.loss{color:#c92a2a;font-weight:600}.inconclusive{color:#868e96}
nav{margin:.5rem 0 1rem}nav a{margin-right:1rem}.note{color:#495057;font-size:.85rem}
.stand-in{background:#fff3bf;border:1px solid #ffe066;padding:.5rem;border-radius:4px}
.scroll{overflow-x:auto}"""
SECTIONS = (("summary", "Summary"), ("comparisons", "Comparisons"), ("failures", "Failures"),
            ("annotations", "Annotations"), ("whatif", "What-if on k"), ("questions", "Questions"))


def _head(title: str) -> str:
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><meta http-equiv='Content-Security-Policy' "
            f"content=\"{CSP}\"><meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{esc(title)}</title><style>{STYLE}\n{EXTRA_STYLE}</style></head><body>")


def _text(value) -> str:
    """A cell's text: "" for None, NaN and pandas' NA (result rows mix them)."""
    return "" if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)) else str(value)


def _verdict(row) -> str:
    """The primary verdict (tmem.analysis.verdicts.with_primary: the evidence offline, the judged answer with a
    real model), as the app shows it."""
    return _text(row.get("verdict")) or "—"


def _gold_line(site) -> str:
    if site.version == "original":
        return "gold: <b>original</b> (as imported)"
    return (f"gold: version <b>{esc(site.version)}</b> ({site.corrections} corrected question(s); answers re-judged "
            f"per judge policy <b>{esc(site.judge)}</b>)")


def index_page(site) -> str:
    first = site.rows.iloc[0] if len(site.rows) else {}
    stand_in = site.primary == "evidence"
    parts = [_head(f"T-Mem run {site.run_id}"),
             f"<h1>Run {esc(site.run_id)} on corpus {esc(site.corpus)}</h1>",
             f"<p>{len(site.rows)} result rows · variants {esc(', '.join(site.variants))} · {_gold_line(site)} · "
             f"generated {datetime.now():%Y-%m-%d %H:%M}</p>",
             "<nav>" + "".join(f"<a href='#{k}'>{esc(t)}</a>" for k, t in SECTIONS)
             + "<a href='rows.csv'>rows.csv</a><a href='rows.json'>rows.json</a>"
               "<a href='summary.json'>summary.json</a></nav>"]
    if stand_in:
        parts.append("<p class='stand-in'>Every answer in this run came from an <b>offline stand-in</b>, not a "
                     "language model: its accuracy is a plumbing figure, not T-Mem's result. The primary measure "
                     f"is therefore <b>evidence</b> ({esc(EVIDENCE_EXPLAIN)}).</p>")
    questions = site.rows[["scope", "question_id"]].drop_duplicates().shape[0] if len(site.rows) else 0
    if note := source_note(site.corpus, DEMO_CORPUS, questions):  # as the app's Compare: the demo shows the mechanism
        parts.append(f"<p class='stand-in'>{esc(note[0].upper() + note[1:])}.</p>")
    parts += ["<h2 id='summary'>Summary</h2>", table_html(_summary_table(site)),
              f"<p class='note'>roles: {esc(roles_line(str(first.get('backend', ''))))}</p>"]
    parts += ["<h2 id='comparisons'>Comparisons</h2>", f"<p class='note'>{esc(SIGNIFICANCE_EXPLAIN)}</p>"]
    for pair in site.pairs:
        parts.append(_pair_html(site, pair))
    if not site.pairs:
        parts.append("<p><i>one variant: nothing to compare</i></p>")
    parts += ["<h2 id='failures'>Failures</h2>", _failures_html(site)]
    parts += ["<h2 id='annotations'>Annotations</h2>", _annotations_html(site)]
    parts += ["<h2 id='whatif'>What-if on k</h2>", f"<p class='note'>{esc(WHATIF_EXPLAIN)}</p>", _whatif_html(site)]
    parts += ["<h2 id='questions'>Questions</h2>", _questions_html(site), "</body></html>"]
    return "\n".join(parts)


def _summary_table(site) -> pd.DataFrame:
    out = []
    counts = counts_table(site.rows, site.variants).set_index("variant")
    for v in site.variants:
        part = site.rows[site.rows["variant"] == v]
        judged = part["correct"].dropna().astype(bool)
        units = pd.to_numeric(part["units"], errors="coerce").sum()
        found = pd.to_numeric(part["units_recovered"], errors="coerce").sum()
        out.append({"variant": v, "questions": len(part), "errors": int((part["status"] == "error").sum()),
                    "evidence complete": counts.loc[v, "evidence complete"],
                    "accuracy" + (" (stand-in)" if site.primary == "evidence" else ""):
                        f"{int(judged.sum())} of {len(judged)}" + (f" ({100 * judged.mean():.1f}%)" if len(judged)
                                                                  else ""),
                    "key-evidence recall": f"{100 * found / units:.1f}% of {int(units)} units" if units else "—",
                    STALE: counts.loc[v, STALE], ROLLBACK_MISSED: counts.loc[v, ROLLBACK_MISSED]})
    return pd.DataFrame(out)


def _pair_html(site, pair: dict) -> str:
    variant, baseline = pair["variant"], pair["baseline"]
    rows = comparison_rows(site.rows, baseline, variant, pair["primary"])
    html = [f"<h3>{esc(variant)} − {esc(baseline)}: {esc(MEASURE_LABEL[pair['primary']])} (primary)</h3>",
            whisker_svg(rows), _outcome_table(rows)]
    others = [comparison_rows(site.rows, baseline, variant, m).head(1).assign(group=MEASURE_LABEL[m] + ", overall")
              for m in MEASURE_LABEL if m != pair["primary"]]
    html += [f"<p>Other measures{' (accuracy: the stand-in, secondary)' if site.primary == 'evidence' else ''}:</p>",
             _outcome_table(pd.concat(others, ignore_index=True))]
    return "\n".join(html)


def _outcome_table(rows: pd.DataFrame) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in ("group", "n", "baseline", "variant", "Δ", "95% CI", "McNemar p",
                                                 "Holm p", "outcome"))
    body = "".join("<tr>" + "".join(f"<td>{esc(r[c])}</td>" for c in ("group", "n", "baseline", "variant", "Δ",
                                                                      "95% CI", "McNemar p", "Holm p"))
                   + f"<td class='{esc(r['outcome'])}'>{esc(r['outcome'])}</td></tr>" for r in rows.to_dict("records"))
    return f"<table><tr>{head}</tr>{body}</table>"


def _failures_html(site) -> str:
    rows = site.rows
    table = pd.crosstab(rows["category"], rows["variant"]).reindex(columns=site.variants, fill_value=0)
    order = [vd.COMPLETE, vd.CORRECT, *FAILURE_CATEGORIES, UNATTRIBUTED, vd.NOT_SCORED, vd.NO_VERDICT, vd.ERROR]
    table = table.reindex([c for c in order if c in table.index])
    table.columns.name = None
    table = table.reset_index()
    stale_counts = counts_table(site.rows, site.variants)
    failing = ("rows whose answer context lacked a gold unit (partial or none)" if site.primary == vd.EVIDENCE
               else "wrong answers")
    return (f"<p class='note'>Under the primary measure ({esc(site.primary)}), {failing} by the first pipeline stage "
            "that lost gold evidence (automatic attribution, as the explorer's Failures page counts them); the "
            "other verdicts for completeness. Not attributed: a failing row no stage can be blamed for (e.g. a "
            "wrong answer to a question without gold evidence units).</p>"
            + table_html(table)
            + "<h3>Stale answers</h3>" + "".join(f"<p class='note'><b>{esc(c)}</b>: {esc(EXPLAIN[c])}</p>"
                                                for c in (STALE, ROLLBACK_MISSED))
            + table_html(stale_counts[["variant", STALE, ROLLBACK_MISSED]]))


def _annotations_html(site) -> str:
    notes = site.rows[site.rows["label"].notna()]
    if not len(notes):
        return ("<p><i>no annotations on this run</i> — add one with <code>python -m tmem annotate --run "
                f"{esc(site.run_id)} --question ID --variant V --label LABEL --note TEXT</code></p>")
    listed = pd.DataFrame({"variant": notes["variant"], "question": notes["question_id"],
                           "annotation": [annotation_text(r) for r in notes.to_dict("records")],
                           "attributed stage": notes["failure"].fillna(UNATTRIBUTED)})
    return ("<p class='note'>Annotated rows per label (rows) and attributed stage (columns).</p>"
            + table_html(site.labels) + table_html(listed))


def _whatif_html(site) -> str:
    if not site.whatif:
        return "<p><i>no gold evidence units</i></p>"
    html = []
    for variant, (curve, units, drifted) in site.whatif.items():
        html += [f"<h3>{esc(variant)}</h3>", curve_svg(curve), f"<p>{esc(curve_text(curve))}</p>"]
        if drifted:
            html.append(f"<p class='warn'>{drifted} trace(s) have seeds that differ from today's BM25 ranking (the "
                        "corpus or the code changed since the run): their ranks are today's.</p>")
        beyond = [u for u in units if u.found_beyond_seeds]
        html += [f"<p>{len(beyond)} unit(s) found although outside the top-{curve.k} seeds:</p>",
                 table_html(unit_table(beyond), limit=100)]
    return "\n".join(html)


def _questions_html(site) -> str:
    second = "stand-in verdict (secondary)" if site.primary == vd.EVIDENCE else "evidence"
    head = "".join(f"<th>{esc(c)}</th>" for c in ("variant", "question", "type", "verdict", second, "failure",
                                                 "stale", "annotation"))
    lines = []
    for r in site.rows.to_dict("records"):
        page = site.pages.get((r["variant"], r["scope"], r["question_id"]))
        qid = f"<a href='q/{esc(page)}'>{esc(r['question_id'])}</a>" if page else esc(r["question_id"])
        cells = [esc(r["variant"]), qid, esc(r.get("qtype") or "—"), esc(_verdict(r)),
                 esc(r.get("answer verdict") if site.primary == vd.EVIDENCE
                     else evidence_text(r.get("evidence_complete"))),
                 esc(_text(r.get("failure"))),
                 esc(review_text(r)), esc(annotation_text(r))]
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    cut = (f"<p class='warn'>{site.skipped_pages} question page(s) not written (--max-pages).</p>"
           if site.skipped_pages else "")
    return f"{cut}<div class='scroll'><table><tr>{head}</tr>{''.join(lines)}</table></div>"


def question_review(site, row: dict, units) -> str:
    """The navigation and review block of one question page."""
    findings = "".join(f"<p class='warn'><b>{esc(c)}</b>: {esc(row.get(col + '_detail'))}<br><small>"
                       f"{esc(EXPLAIN[c])}</small></p>" for c, col in ((STALE, "stale"), (ROLLBACK_MISSED, "rollback"))
                       if truthy(row.get(col)))
    note = annotation_text(row)
    return ("<style>body{padding:0 1.25rem}</style><nav><a href='../index.html'>← run report "
            + esc(site.run_id) + "</a> · "
            "<a href='../index.html#questions'>all questions</a> · <a href='../index.html#comparisons'>"
            "comparisons</a></nav>"
            f"<h2>Review</h2><p>{_gold_line(site)} · verdict ({esc(site.primary)}) <b>{esc(_verdict(row))}</b> · "
            + (f"stand-in verdict (secondary) {esc(_text(row.get('answer verdict')) or '—')}"
               if site.primary == vd.EVIDENCE
               else f"evidence <b>{esc(evidence_text(row.get('evidence_complete')))}</b>")
            + f" · attributed stage <b>{esc(_text(row.get('failure')) or '—')}</b> "
            f"{esc(_text(row.get('failure_detail')))}</p>{findings}"
            + (f"<p>annotation: {esc(note)}</p>" if note else "<p class='note'>no annotation</p>")
            + ("<h3>What-if on k</h3>" + table_html(unit_table(units)) if units else ""))


def summary_json(site) -> dict:
    return {"run_id": site.run_id, "corpus": site.corpus, "gold_version": site.version, "judge": site.judge,
            "primary": site.primary, "method": method_note(), "comparisons": site.pairs,
            "review": counts_table(site.rows, site.variants).to_dict("records"),
            "whatif": {v: {"k": c.k, "units": c.units, "found_share": c.found_share, "k_to_match": c.k_to_match,
                           "unreachable": c.unreachable, "curve": dict(zip(map(str, c.ks), c.bm25_share))}
                       for v, (c, _, _) in site.whatif.items()}}
