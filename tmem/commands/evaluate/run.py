"""`python -m tmem run`: stage-wise batch run of variants and baselines over a corpus's questions, with resume,
validators and a summary (tmem.evaluation.batch.run / summary / manifest); this module parses the flags and prints the
progress bar, the validators' findings and the summary table."""
from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

from tmem.analysis.verdicts import OFFLINE_SOURCE, accuracy_label
from tmem.api import get_method, open_store
from tmem.api.corpora import chain_writers
from tmem.api.models import (
    cache_stats,
    mean_in_flight,
    peak_in_flight,
    reset_in_flight,
    roles_for,
    settings_budget,
    systems_refused,
)
from tmem.commands.flags import add_backend_arguments, folder_path, number, positive_int, settings_from_args
from tmem.evaluation.batch import validators as v
from tmem.evaluation.batch.batch_stages import BatchAPIStages
from tmem.evaluation.batch.estimate import estimate_run, estimate_vs_actual, format_estimate, save_estimate
from tmem.evaluation.batch.manifest import manifest, run_identity, write_manifest
from tmem.evaluation.batch.run import BatchRun, collect, select_questions, store_results
from tmem.evaluation.batch.spend import SpendFile, earlier_spend
from tmem.evaluation.batch.summary import add_evidence, summarize
from tmem.evaluation.executors import EXECUTORS, make_executor
from tmem.evaluation.metrics import Prices
from tmem.evaluation.review import format_review, run_review
from tmem.limits import path_under, safe_name, strip_control

DEFAULT_VARIANTS = "full,flat"
DEFAULT_OUT = Path("runs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default="demo", help="Corpus name in the database (default: demo).")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                        help="Comma-separated variants and baselines: any of tmem.config.VARIANTS (full, flat, "
                             "no-discovery, ..., bm25-forest) and bm25, embedding, tmem-reranked, global-control "
                             f"(default: {DEFAULT_VARIANTS}).")
    parser.add_argument("--limit", type=positive_int, help="Only the first N questions (after --types).")
    parser.add_argument("--types", help="Comma-separated question types to run (default: all).")
    parser.add_argument("--out", type=folder_path, help="Run folder (records, manifest, summary); rerunning the same "
                                                 "command with the same folder resumes (default: runs/CORPUS).")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")
    parser.add_argument("--k", type=positive_int, help="Number of seed anchors (default 36).")
    parser.add_argument("--jobs", type=positive_int, help="Questions in flight per stage (default: 1 with offline "
                                                          "roles, the backend's max_in_flight with LLM roles).")
    parser.add_argument("--embedding-text", choices=("metadata", "plain"), default="metadata",
                        help="What the embedding baseline embeds: metadata-expanded text (default) or plain text.")
    parser.add_argument("--no-store", action="store_true", help="Do not write traces and results to DuckDB.")
    parser.add_argument("--executor", default="local", choices=EXECUTORS,
                        help="local (default): this process, --jobs in flight; ray: each question's stage as a Ray "
                             "task, records still written here (requirements-scale.txt).")
    parser.add_argument("--address", help="With --executor ray: the cluster to join (auto, ray://HEAD:10001); "
                                          "default: start a local Ray on this machine.")
    parser.add_argument("--num-cpus", type=positive_int, help="With a local Ray: CPUs it may use (default: all).")
    parser.add_argument("--quiet", action="store_true", help="No progress bar.")
    add_real_model_arguments(parser)
    add_backend_arguments(parser)


def add_real_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--estimate, --json and the batch-API flags (the prices and caps are backend settings: --price-input,
    --price-output, --max-cost, --max-tokens)."""
    parser.add_argument("--estimate", action="store_true",
                        help="Count the run's model calls, tokens, cache hits and cost without sending any (the "
                             "offline stages run for real); writes OUT/estimate.json, which the run's summary "
                             "later compares with what it spent.")
    parser.add_argument("--json", action="store_true",
                        help="Print the summary (summary.json: per variant accuracy with its accuracy_source, "
                             "evidence_complete, recall, stages; the review and the paired comparisons) as JSON on "
                             "stdout, the tables on stderr; with --estimate: the estimate as JSON.")
    parser.add_argument("--batch-api", action="store_true",
                        help="Send each stage's model calls as one batch through the endpoint's /v1/files and "
                             "/v1/batches (OpenAI Batch API; about half the price, results within 24 h); "
                             "stage-wise, resumable (batch ids in OUT/run.json).")
    parser.add_argument("--batch-poll", type=number(float, 0.01, 86_400), default=30.0,
                        help="With --batch-api: seconds between status polls (default 30).")
    parser.add_argument("--stage-barrier", action="store_true",
                        help="Every question finishes a stage before the next stage starts (App. D.1 literally); "
                             "default: a question's next stage starts as soon as its record of the stage before "
                             "is written (the same records, less waiting).")


class Progress:
    """A one-line progress bar with rate and ETA on stderr (a line per 10% when stderr is not a terminal)."""

    def __init__(self, label: str, total: int, enabled: bool = True, stream=None):
        self.label, self.total, self.enabled = label, total, enabled and total > 0
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.start = time.perf_counter()
        self._last, self._decile = 0.0, -1

    def __call__(self, done: int, total: int | None = None) -> None:
        if not self.enabled:
            return
        total = total or self.total
        now = time.perf_counter()
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (total - done) / rate if rate > 0 else float("nan")
        line = f"{self.label:<34} {done:>6}/{total:<6} {_bar(done / total)} {rate:6.1f} q/s  ETA {_clock(eta)}"
        if self.tty:
            if now - self._last >= 0.2 or done == total:
                self.stream.write("\r" + line + ("\n" if done == total else ""))
                self.stream.flush()
                self._last = now
        elif done * 10 // total != self._decile:
            self._decile = done * 10 // total
            self.stream.write(line + "\n")
            self.stream.flush()


def _bar(fraction: float, width: int = 24) -> str:
    full = int(round(fraction * width))
    return "[" + "#" * full + "." * (width - full) + f"] {fraction:4.0%}"


def _clock(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "--:--"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
        f"{seconds // 60:02d}:{seconds % 60:02d}"


def format_summary(summary: dict) -> str:
    variants = summary["variants"]
    names = list(variants)
    types = []
    for variant in variants.values():
        types += [t for t in variant["accuracy"] if t not in types and t != "overall"]
    width = max([12] + [len(n) + 2 for n in names])
    sources = list(dict.fromkeys(variants[n].get("accuracy_source", OFFLINE_SOURCE) for n in names))
    offline = sources == [OFFLINE_SOURCE]  # the accuracy rows are the stand-in's: say so in the table itself
    head = f"{'':<22}" + "".join(f"{n:>{width}}" for n in names)
    lines = [f"Run {summary['run_id']} on corpus {summary['corpus']!r}; roles: "
             + ", ".join(f"{k}={v}" for k, v in summary["roles"].items())]
    relations = {n: v.get("relation") for n, v in variants.items()}
    if any(r and r != summary["roles"].get("relation") for r in relations.values()):
        lines.append("relation role per variant: " + ", ".join(f"{n}={r or 'no forest'}"
                                                              for n, r in relations.items()))
    if cache := summary.get("response_cache"):
        lines.append(f"Response cache (this process): {cache['hits']} hits, {cache['misses']} misses "
                     f"({cache['hit_rate']:.0%} hit rate)")
    if summary.get("peak_calls_in_flight") is not None:
        mean = summary.get("mean_calls_in_flight")
        lines.append(f"Calls in flight: at most {summary['peak_calls_in_flight']} at once"
                     + (f", {mean:.1f} on average over the run" if mean is not None else ""))
    lines.append("accuracy source: " + "; ".join(accuracy_label(src) for src in sources))
    lines += ["", head, "-" * len(head)]
    if any(variants[n].get("evidence_judged") for n in names):  # the primary measure offline: first
        lines.append(f"{'evidence complete':<22}" + "".join(
            f"{_share(variants[n]):>{width}}" for n in names))
    lines.append("stand-in accuracy (a plumbing figure), by question type:" if offline else
                 "accuracy, by question type:")

    def cell(acc: dict, t: str) -> str:
        a = acc.get(t)
        return f"{a['accuracy']:.3f} ({a['judged']})" if a and a["accuracy"] is not None else "-"

    for t in types + ["overall"]:
        lines.append(f"{t:<22}" + "".join(f"{cell(variants[n]['accuracy'], t):>{width}}" for n in names))
    lines.append(f"{'overall (flat prompt)':<22}" + "".join(
        f"{cell(variants[n]['accuracy_flat'], 'overall'):>{width}}" for n in names))
    lines.append(f"{'evidence recall':<22}" + "".join(
        f"{_fmt(variants[n]['recall']['recall']):>{width}}" for n in names))
    lines.append(f"{'mean evidence msgs':<22}" + "".join(
        f"{_fmt(variants[n]['mean_evidence_messages'], 1):>{width}}" for n in names))
    lines.append(f"{'errors':<22}" + "".join(f"{variants[n]['errors']:>{width}}" for n in names))
    lines.append(f"{'incomplete':<22}" + "".join(f"{variants[n]['incomplete']:>{width}}" for n in names))
    for label, key in (("context tok. before", "mean_before_compression"),
                       ("context tok. after", "mean_after_compression")):
        lines.append(f"{label:<22}" + "".join(
            f"{_fmt(variants[n]['context_tokens'][key], 1):>{width}}" for n in names))
    if any(variant["cost_usd"] is not None for variant in variants.values()):
        lines.append(f"{'cost (USD)':<22}" + "".join(f"{_fmt(variants[n]['cost_usd'], 4):>{width}}" for n in names))
    lines += ["", f"context tok.: mean tokens of the evidence passages per question, before / after compression "
                  f"(counted with {summary['token_counter']}); prompt / completion tok.: usage reported or counted "
                  "for model calls (none with offline roles)",
              "", f"{'variant':<16}{'stage':<16}{'median s':>10}{'p95 s':>10}{'total s':>10}{'prompt tok':>12}"
                  f"{'compl. tok':>12}{'calls':>8}"]
    for n in names:
        for s, d in variants[n]["stages"].items():
            lines.append(f"{n:<16}{s:<16}{d['median_s']:>10.4f}{d['p95_s']:>10.4f}{d['total_s']:>10.2f}"
                         f"{d['prompt_tokens']:>12}{d['completion_tokens']:>12}{d['calls']:>8}"
                         + (f"  ${d['cost_usd']:.4f}" if "cost_usd" in d else ""))
    return "\n".join(lines)


def _share(variant: dict) -> str:
    share = variant.get("evidence_complete")
    return "-" if share is None else f"{share:.3f} ({variant['evidence_judged']})"


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    info = store.corpus_info(args.corpus)
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    if not names:
        raise ValueError("--variants is empty")
    methods = [get_method(n, args.k, args.embedding_text) for n in dict.fromkeys(names)]
    all_questions = store.questions(args.corpus)
    questions = select_questions(all_questions, args.types, args.limit)
    if not questions:
        raise ValueError(f"corpus {args.corpus!r} has no questions to run")
    settings = settings_from_args(args)
    out = args.out or path_under(DEFAULT_OUT, safe_name(args.corpus, "corpus name"))
    budget = settings_budget(settings, earlier_spend(out))  # a cap covers the run folder's earlier passes too
    roles = roles_for(settings, store=store, budget=budget)
    offline = all(getattr(getattr(roles, r), "offline", True) for r in ("evidence_utility", "relation", "answer",
                                                                          "judge"))
    refused = systems_refused(methods, roles)  # a memory system never runs on the offline stand-ins
    if refused:
        raise ValueError(refused[0])
    if args.estimate:
        return print_estimate(args, store, methods, questions, roles, settings, out)
    jobs = args.jobs or (1 if offline else settings.max_in_flight)
    log = lambda s: print(strip_control(s), file=sys.stderr)  # noqa: E731  (ids and types come from the data)
    executor = make_executor(args.executor, store, roles, settings, address=args.address, num_cpus=args.num_cpus)
    run = BatchRun(store, args.corpus, methods, questions, out, roles, run_id=run_identity(out, log), jobs=jobs,
                   progress=None if args.quiet else Progress, log=log,
                   executor=None if executor.name == "local" else executor,  # local: the runner's own threads
                   stage_barrier=args.stage_barrier, spend=None if offline else SpendFile(out, budget),
                   stage_runner=batch_api_stages(args, settings, roles, executor, log))
    write_manifest(out, manifest(run, info, settings), run.log)
    print(f"run {run.run_id!r}: {len(questions)} questions x {len(methods)} variant(s) "
          f"({', '.join(m.name for m in methods)}) -> {out}", file=sys.stderr)
    started = time.perf_counter()
    reset_in_flight(roles)  # the peak and the mean cover the run itself
    try:
        run.run()
    finally:
        executor.close()
    mean_calls = mean_in_flight(roles)  # None when every role is offline
    findings = v.check_question_counts(info.get("format") or "", len(all_questions), len(questions),
                                       filtered=bool(args.types or args.limit is not None))
    more, results = collect(run)
    findings += more
    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout)  # --json: stdout is the JSON
    say("\nValidators:" + ("" if findings else " all checks passed"))
    for f in findings[:50]:
        say(f"  {strip_control(str(f))}")
    if len(findings) > 50:
        say(f"  ... {len(findings) - 50} more findings in {out / 'summary.json'}")
    valid = not v.has_errors(findings)
    stored = store_results(store, run, results, valid) if not args.no_store else None
    summary = summarize(run, results, budget.prices)
    summary.update(run_review(run, results))  # evidence verdicts, stale answers, paired significance
    add_evidence(summary)
    summary["valid"], summary["stored"] = valid, stored
    summary["chain_writers"] = chain_writers(info.get("notes")) or None  # who wrote injected noise chains
    summary["response_cache"] = cache_stats(roles)  # None when every role is offline (nothing to cache)
    summary["peak_calls_in_flight"] = None if args.batch_api else peak_in_flight(roles)  # None: no online call
    summary["mean_calls_in_flight"] = None if mean_calls is None else round(mean_calls, 2)
    summary["validators"] = [f.__dict__ for f in findings]
    summary["wall_seconds"] = round(time.perf_counter() - started, 2)
    summary["spent"] = SpendFile(out, budget).body() if not offline else None  # what was sent, per stage
    summary["stopped"] = run.stopped or None
    (out / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
    say()
    if not valid:
        say("VALIDATION FAILED: the figures below are not a valid report (see the errors above).")
    say(strip_control(format_summary(summary)))  # question types are the data's
    say(strip_control(format_review(summary)))
    say(f"\nrecords, manifest and summary.json in {out}" + (f"; {stored}" if stored else ""))
    print_spend(out, summary, run, say)
    if args.json:
        print(json.dumps(summary, indent=1, ensure_ascii=False))
    return 0 if valid else 1


# ------------------------------------------------------------------------------ estimate, spend, batch API
def print_estimate(args, store, methods, questions, roles, settings, out: Path) -> int:
    """`run --estimate`: the run's model calls counted, not sent, per variant and stage
    (tmem.evaluation.batch.estimate)."""
    bar = None if args.quiet or args.json else Progress("estimate (variant, question)", len(methods) * len(questions))
    est = estimate_run(store, args.corpus, methods, questions, roles, Prices(settings.price_input,
                                                                              settings.price_output),
                       out=out if out.exists() else None, progress=bar)
    path = save_estimate(out, est)
    print(json.dumps(est.to_json(), indent=1) if args.json else format_estimate(est) +
          f"\n\nsaved to {path}: the run's summary sets it against what the run spends")
    return 0


def print_spend(out: Path, summary: dict, run, say=print) -> None:
    """After the summary: what this run's model calls sent per stage, the estimate against the actual, and why the
    run stopped early (a budget cap)."""
    spent = summary.get("spent")
    if spent and spent["this_pass"]["calls"]:
        lines = ["", "sent by this pass (cache hits excluded): " + _spent(spent["this_pass"])]
        lines += [f"  {stage}: {_spent(s)}" for stage, s in spent["stages_this_pass"].items()]
        if spent["earlier_passes"]["calls"]:
            lines.append("the whole run folder so far: " + _spent(spent["total"]))
        say("\n".join(lines))
    compared = estimate_vs_actual(out, summary)
    if compared:
        say("\n" + "\n".join(compared))
    if run.stopped:
        say(f"\nSTOPPED: {run.stopped}. The records written so far are kept; rerun the same command (with a "
              "higher cap) to continue where it stopped.")


def _spent(s: dict) -> str:
    return (f"{s['calls']} calls, {s['prompt_tokens']} prompt + {s['completion_tokens']} completion tokens"
            + (f", {s['cost_usd']:.4f} USD" if s.get("cost_usd") is not None else ""))


def batch_api_stages(args, settings, roles, executor, log):
    """The stage runner of --batch-api (None without it); refused with the reason where it cannot work."""
    if not args.batch_api:
        return None
    if executor.name != "local":
        raise ValueError("--batch-api sends batches from this process: it cannot run with --executor ray")
    return BatchAPIStages(settings, roles, poll_seconds=args.batch_poll, log=log)
