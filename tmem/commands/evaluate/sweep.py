"""`python -m tmem sweep`: measure every cell of a parameter grid (tmem.evaluation.sweep) on a local thread pool or
on Ray (tmem.evaluation.executors); this module parses the flags and prints the per-cell table."""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace

from tmem.api import method_for, open_store, stage_plan
from tmem.api.backends import Prices
from tmem.api.models import roles_for
from tmem.commands.evaluate.run import Progress
from tmem.commands.flags import add_backend_arguments, positive_int, settings_from_args
from tmem.config import VARIANTS, parse_overrides
from tmem.evaluation.batch.estimate import estimate_run, format_estimate
from tmem.evaluation.executors import EXECUTORS, make_executor
from tmem.evaluation.sweep import choose_measure, default_name, grid_cells, parse_grid, run_sweep, sweep_questions
from tmem.viz.batch.sweep import PAPER_MARK, axes, cell_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default="demo", help="Corpus name in the database (default: demo).")
    parser.add_argument("--grid", action="append", default=[], metavar="SECTION.FIELD=V1,V2,...",
                        help="A swept parameter and its values, e.g. discovery.eps_hours=6,12,24 (repeat for more "
                             "parameters; every combination is a cell; a tuple value's elements joined by |).")
    parser.add_argument("--variant", default="full", choices=list(VARIANTS),
                        help="Configuration preset the grid applies to (default: full).")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="Parameters held fixed in every cell (the override grammar of ask --set).")
    parser.add_argument("--measure", default="auto", choices=("auto", "recall", "accuracy"),
                        help="recall: seeds + discovery, key-evidence recall (offline, cheap); accuracy: the whole "
                             "pipeline, judged (traces stored); auto (default): accuracy when the answer role is a "
                             "language model, else recall.")
    parser.add_argument("--types", help="Comma-separated question types (default: all).")
    parser.add_argument("--limit", type=positive_int, help="Only the first N questions (after --types).")
    parser.add_argument("--name", help="Sweep name in the database (default: 'VARIANT: PARAM x PARAM'); rerunning "
                                       "the same sweep resumes it.")
    parser.add_argument("--executor", default="local", choices=EXECUTORS,
                        help="local (default): threads in this process; ray: Ray tasks (requirements-scale.txt).")
    parser.add_argument("--address", help="With --executor ray: the cluster to join (auto, ray://HEAD:10001); "
                                          "default: start a local Ray on this machine.")
    parser.add_argument("--num-cpus", type=positive_int, help="With a local Ray: CPUs it may use (default: all).")
    parser.add_argument("--jobs", type=positive_int, default=1, help="Local executor: tasks in flight (default 1).")
    parser.add_argument("--json", action="store_true", help="Print one JSON object per cell instead of the table.")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")
    parser.add_argument("--quiet", action="store_true", help="No progress output.")
    parser.add_argument("--estimate", action="store_true",
                        help="Count the sweep's model calls, tokens, cache hits and cost (at --price-input / "
                             "--price-output) without sending any; with --json as JSON.")
    add_backend_arguments(parser)


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def format_table(report, corpus: str, roles: dict[str, str], executor: str) -> str:
    table = cell_table(report.summary)
    names = axes(report.summary)
    lines = [f"Sweep {report.name!r} on {corpus!r}: {len(report.cells)} cells x {report.questions} questions, "
             f"measure {report.measure}; {executor}",
             "roles: " + ", ".join(f"{k}={v}" for k, v in roles.items()), ""]
    width = {n: max(len(n), *(len(str(v)) for v in table[n])) for n in names}
    accuracy = report.measure == "accuracy"
    head = "  " + "".join(f"{n:<{width[n] + 2}}" for n in names) + f"{'recall':>8}{'seeds':>8}{'msgs':>8}" + \
        (f"{'accuracy':>10}{'judged':>8}" if accuracy else "") + f"{'questions':>11}{'errors':>8}"
    lines += [head, "-" * len(head)]
    for row in table.to_dict("records"):
        lines.append((PAPER_MARK + " " if row["paper default"] else "  ")
                     + "".join(f"{row[n]:<{width[n] + 2}}" for n in names)
                     + f"{_fmt(row['recall']):>8}{_fmt(row['seed_recall']):>8}{_fmt(row['mean_messages'], 1):>8}"
                     + (f"{_fmt(row['accuracy']):>10}{row['judged']:>8}" if accuracy else "")
                     + f"{row['questions']:>11}{row['errors']:>8}")
    lines += ["", f"{PAPER_MARK}: the paper's default cell. recall: R'(q) (seeds + discovered evidence), Eq. 10 over "
                  "the recall-eligible questions; seeds: the BM25 seeds alone; msgs: mean evidence messages."]
    if accuracy and any(v.startswith("offline") for k, v in roles.items() if k in ("answer", "judge")):
        lines.append("accuracy with offline stand-ins (not language models) is a plumbing figure, not a T-Mem result.")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    axes_ = parse_grid(args.grid)
    fixed = parse_overrides(args.set)
    cells = grid_cells(args.variant, axes_, fixed)
    store = open_store(args.db)
    store.corpus_info(args.corpus)
    settings = settings_from_args(args)
    roles = roles_for(settings, store=store)
    measure = choose_measure(args.measure, roles)
    questions = sweep_questions(store, args.corpus, measure, args.types, args.limit)
    name = args.name or default_name(args.variant, axes_)
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr))
    if args.estimate:
        return print_estimate(args, store, cells, questions, measure, roles, settings)
    started = time.perf_counter()
    with make_executor(args.executor, store, roles, settings, address=args.address, jobs=args.jobs,
                       num_cpus=args.num_cpus) as executor:
        log(f"sweep {name!r}: {len(cells)} cells x {len(questions)} questions ({measure}) on {executor.describe}")
        report = run_sweep(store, args.corpus, cells, questions, measure, executor, roles.label, name,
                           progress=None if args.quiet else Progress("sweep (cell, question)", 1))
    log(f"measured {report.ran} (cell, question) pairs, {report.skipped} already stored"
        + (f", {report.failed} failed (rerun to retry)" if report.failed else "")
        + f" in {time.perf_counter() - started:.1f} s")
    used = roles.describe()
    if args.json:
        for row in report.summary.to_dict("records"):
            print(json.dumps({"sweep": name, "corpus": args.corpus, "measure": measure, **{
                k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}}, default=str))
    else:
        print(format_table(report, args.corpus, used, executor.describe))
        print(f"\nstored in the database as sweep {name!r} (the app's Sweep view shows it)")
    return 1 if report.failed else 0


def print_estimate(args, store, cells, questions, measure: str, roles, settings) -> int:
    """`sweep --estimate`: every cell's model calls counted, not sent (a recall sweep runs seeds and discovery
    only; tmem.evaluation.batch.estimate). Cells already stored are counted as if new: a sweep resumes per row."""
    methods = [replace(method_for(c.config, c.variant), name=c.key or c.variant) for c in cells]
    stages = ((lambda m: [s for s in stage_plan(m) if s in ("seed_retrieval", "discovery")]) if measure == "recall"
              else None)
    bar = None if args.quiet or args.json else Progress("estimate (cell, question)", len(methods) * len(questions))
    est = estimate_run(store, args.corpus, methods, questions, roles,
                       Prices(settings.price_input, settings.price_output), stages=stages, progress=bar)
    print(json.dumps(est.to_json(), indent=1) if args.json else format_estimate(est))
    return 0
