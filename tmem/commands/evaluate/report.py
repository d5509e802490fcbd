"""`python -m tmem report`: a stored batch run as a self-contained static site (tmem.viz.report.site) that opens from
disk: summary with intervals, failures by category with attribution and annotations, the what-if on k, and a page per
question with its timeline and forest."""
from __future__ import annotations

import argparse
import sys
import time

from tmem.api import open_store
from tmem.commands.flags import folder_path, positive_int
from tmem.evaluation import report
from tmem.evaluation.gold_versions import JUDGE_MODES, ORIGINAL
from tmem.viz.report import site as site_module


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, metavar="ID", help="Run id (as `run` printed it; the app lists them).")
    parser.add_argument("--out", required=True, type=folder_path,
                        help="Folder to write the site into (created; never through a symbolic link; question "
                             "pages of an earlier report there that this one does not write are removed).")
    parser.add_argument("--corpus", help="The run's corpus (default: found from the run id).")
    parser.add_argument("--gold", default=ORIGINAL, metavar="VERSION",
                        help="Score under this gold version (`gold --list`; default: original).")
    parser.add_argument("--judge", default="keep", choices=JUDGE_MODES,
                        help="With --gold and an LLM judge: keep its verdicts where the gold answer did not change "
                             "(default), or re-judge every answer with the offline judge.")
    parser.add_argument("--pages", default="all", choices=site_module.PAGES,
                        help="Question pages to write: all (default), failures (wrong, unjudged, error or "
                             "incomplete evidence), none.")
    parser.add_argument("--max-pages", type=positive_int, default=site_module.MAX_PAGES,
                        help=f"At most this many question pages (default {site_module.MAX_PAGES}).")
    parser.add_argument("--variants", help="Comparison order, comma-separated: the first against each other one "
                                           "(default: full, then its ablations, then the baselines).")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")


def run_corpus(store, run_id: str, corpus: str | None) -> str:
    found = store.run_corpus(run_id)
    if found is None:
        raise KeyError(f"no stored run {run_id!r} in {store.path}; runs: "
                       + (", ".join(r for c in store.corpora() for r in store.run_ids(c)[:5]) or "none"))
    if corpus and corpus != found:
        raise ValueError(f"run {run_id!r} belongs to corpus {found!r}, not {corpus!r}")
    return found


def main(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    corpus = run_corpus(store, args.run, args.corpus)
    started = time.perf_counter()
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    order = [v.strip() for v in (args.variants or "").split(",") if v.strip()]
    built = report.build(store, corpus, args.run, version=args.gold, judge=args.judge, variants=order,
                              log=log)
    written = site_module.write(store, built, args.out, pages=args.pages, max_pages=args.max_pages, log=log)
    index = (args.out / "index.html").resolve()
    print(f"report of run {args.run!r} ({corpus}, gold {args.gold}): {len(written) - 1} question page(s), "
          f"{time.perf_counter() - started:.1f} s")
    if built.skipped_pages:
        print(f"  {built.skipped_pages} question page(s) left out (--max-pages {args.max_pages})")
    print(f"open {index.as_uri()}")
    return 0
