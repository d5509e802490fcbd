"""A stored batch run as a self-contained static site that opens from a file:// URL (`python -m tmem report`): an
index with the summary and paired comparisons with their intervals, failures by category with attribution,
stale answers and annotations, the what-if on k, every row exported as CSV and JSON, and one page per question
(tmem.viz.report.question.question_report: its timeline and forest SVGs) with its review. No server, no network, no
script: every page carries the Content-Security-Policy of tmem.viz.report.question and every value goes through `esc`.

The run's data is assembled by tmem.evaluation.report.build (a `Site`); the index's HTML is tmem.viz.report.site_html.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from tmem.viz.batch.results import backend_rows
from tmem.viz.question.evidence import funnel_table, recovered_table
from tmem.viz.report import site_html
from tmem.viz.report.question import question_report
from tmem.viz.run_settings import trace_summary
from tmem.viz.safe import spreadsheet_safe

PAGES = ("all", "failures", "none")
MAX_PAGES = 1000
PAGE_NAME = re.compile(r"[A-Za-z0-9_.-]+-[0-9a-f]{8}\.html")  # what page_name makes: a stale one may be removed


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
    folder(out)
    folder(out / "q")
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
        written.append(put(out / "q", name, html))
        if len(written) % 50 == 0:
            log(f"  {len(written)} question pages")
    exported = site.rows.drop(columns=[c for c in site.rows.columns if c.startswith("_")])
    csv = io.StringIO()
    spreadsheet_safe(exported).to_csv(csv, index=False)
    put(out, "rows.csv", csv.getvalue())
    put(out, "rows.json", exported.to_json(orient="records", force_ascii=False, date_format="iso"))
    put(out, "summary.json", json.dumps(site_html.summary_json(site), indent=1, ensure_ascii=False))
    put(out, "index.html", site_html.index_page(site))
    clear_stale(out / "q", {p.name for p in written}, log)
    return [out / "index.html", *written]


# ------------------------------------------------------------------------------------------- the output folder
def folder(path: Path) -> None:
    """`path` as a real folder (created): a symbolic link, or anything but a folder, is refused (12 pages were
    written outside through a symlinked q/)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        path.mkdir(parents=True)
        return
    if stat.S_ISLNK(info.st_mode):
        raise ValueError(f"{path}: is a symbolic link; the report writes only into a real folder (refused)")
    if not stat.S_ISDIR(info.st_mode):
        raise ValueError(f"{path}: exists and is not a folder (refused)")


def put(where: Path, name: str, text: str) -> Path:
    """Write `where/name` without following a link: a new file beside it, then renamed over the name, so a
    symbolic link planted as index.html is replaced, not written through (a file outside was overwritten)."""
    tmp = where / f".{name}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(tmp, flags, 0o644), "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, where / name)
    return where / name


def clear_stale(pages: Path, kept: set[str], log: Callable[[str], None]) -> None:
    """Remove question pages of an earlier report in this folder that this one did not write: only names
    page_name makes, and never through a link (unlink removes a link itself)."""
    stale = [e for e in os.scandir(pages) if PAGE_NAME.fullmatch(e.name) and e.name not in kept
             and not e.is_dir(follow_symlinks=False)]
    for entry in stale:
        os.unlink(entry.path)
    if stale:
        log(f"  {len(stale)} question page(s) of an earlier report removed")


def _page_rows(rows: pd.DataFrame, pages: str) -> pd.DataFrame:
    if pages == "none":
        return rows.iloc[0:0]
    if pages == "failures":
        return rows[(rows["correct"] != True) | (rows["evidence_complete"] == False)]  # noqa: E712 - nullable
    return rows
