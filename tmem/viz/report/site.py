"""A stored batch run as a self-contained static site that opens from a file:// URL (`python -m tmem report`): an
index with the summary and paired comparisons with their intervals, failures by category with attribution,
stale answers and annotations, the what-if on k, every row exported as CSV and JSON, and one page per question
(tmem.viz.report.question.question_report: its timeline and forest SVGs) with its review. No server, no network, no
script: every page carries the Content-Security-Policy of tmem.viz.report.question and every value goes through `esc`.

The run's data is assembled by tmem.evaluation.report.build (a `Site`); the index's HTML is tmem.viz.report.site_html.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from tmem.viz.batch.results import backend_rows
from tmem.viz.explorer import trace_summary
from tmem.viz.question.evidence import funnel_table, recovered_table
from tmem.viz.report import site_html
from tmem.viz.report.question import question_report

PAGES = ("all", "failures", "none")
MAX_PAGES = 1000


def page_name(variant: str, scope: str, question_id: str) -> str:
    """A safe, unique file name for a question page (only [A-Za-z0-9_.-], a hash against collisions)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{variant}__{scope}__{question_id}")[:120]
    digest = hashlib.sha1(f"{variant}\0{scope}\0{question_id}".encode()).hexdigest()[:8]
    return f"{slug}-{digest}.html"


def write(store, site, out: Path, *, pages: str = "all", max_pages: int = MAX_PAGES,
          log: Callable[[str], None] = lambda s: None) -> list[Path]:
    """Write a tmem.evaluation.report.Site as index.html, rows.csv, rows.json, summary.json and the question pages
    into `out` (created)."""
    if pages not in PAGES:
        raise ValueError(f"--pages must be one of {', '.join(PAGES)}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "q").mkdir(exist_ok=True)
    wanted = _page_rows(site.rows, pages)
    site.skipped_pages = max(0, len(wanted) - max_pages)
    written = []
    frames: dict[str, pd.DataFrame] = {}
    for r in wanted.head(max_pages).to_dict("records"):
        trace = store.load_trace(site.corpus, r["scope"], r["question_id"], r["variant"], r["config_hash"],
                                 r["backend"])
        if trace is None:
            continue
        name = page_name(r["variant"], r["scope"], r["question_id"])
        site.pages[(r["variant"], r["scope"], r["question_id"])] = name
        gold = site.gold_of(r["scope"], r["question_id"])
        messages = frames.setdefault(r["scope"], store.messages_frame(site.corpus, r["scope"]))
        units = [u for u in site.whatif.get(r["variant"], (None, []))[1]
                 if (u.scope, u.question_id) == (r["scope"], r["question_id"])]
        extra = site_html.question_review(site, r, units)
        html = question_report(trace, gold, recovered_table(trace, messages, gold),
                               funnel_table(trace, gold) if gold else None, trace_summary(trace),
                               backend_rows(r["backend"]), messages, extra=extra)
        path = out / "q" / name
        path.write_text(html, encoding="utf-8")
        written.append(path)
        if len(written) % 50 == 0:
            log(f"  {len(written)} question pages")
    exported = site.rows.drop(columns=[c for c in site.rows.columns if c.startswith("_")])
    exported.to_csv(out / "rows.csv", index=False)
    (out / "rows.json").write_text(exported.to_json(orient="records", force_ascii=False, date_format="iso"),
                                   encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(site_html.summary_json(site), indent=1, ensure_ascii=False),
                                      encoding="utf-8")
    (out / "index.html").write_text(site_html.index_page(site), encoding="utf-8")
    return [out / "index.html", *written]


def _page_rows(rows: pd.DataFrame, pages: str) -> pd.DataFrame:
    if pages == "none":
        return rows.iloc[0:0]
    if pages == "failures":
        return rows[(rows["correct"] != True) | (rows["evidence_complete"] == False)]  # noqa: E712 - nullable
    return rows
