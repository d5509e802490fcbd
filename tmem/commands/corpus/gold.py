"""`python -m tmem gold`: gold corrections as named versions (tmem.evaluation.gold_versions): load a corrections
file as a version of a corpus, list the versions, and re-score a stored run under one without re-running the
pipeline (what changes against the original gold)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from tmem.analysis.verdicts import OFFLINE_SOURCE, rows_source
from tmem.api import open_store
from tmem.commands.evaluate.report import run_corpus
from tmem.evaluation.gold_versions import JUDGE_MODES, ORIGINAL, read_corrections, rescore, save_version
from tmem.evaluation.review import comparisons, format_pairs, ordered_variants, primary_of_rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", help="Corpus (for --add and --list; default: the run's corpus).")
    parser.add_argument("--add", type=Path, metavar="FILE", help="Load a corrections file (JSON Lines) as a version.")
    parser.add_argument("--name", help="With --add: the version's name (default: the file name without .jsonl).")
    parser.add_argument("--list", action="store_true", help="List the corpus's gold versions.")
    parser.add_argument("--rescore", metavar="RUN", help="Re-score this stored run under --version.")
    parser.add_argument("--version", default=ORIGINAL, help="With --rescore: the gold version (default: original).")
    parser.add_argument("--judge", default="keep", choices=JUDGE_MODES,
                        help="With --rescore and an LLM judge: keep its verdicts where the gold answer did not "
                             "change (default), or re-judge every answer with the offline judge.")
    parser.add_argument("--json", action="store_true", help="With --rescore: print the figures as JSON.")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")


def _figures(frame) -> dict:
    judged = frame["correct"].dropna().astype(bool)
    units = frame["units"].dropna().astype(int).sum()
    found = frame["units_recovered"].dropna().astype(int).sum()
    complete = frame["evidence_complete"].dropna().astype(bool) if "evidence_complete" in frame else judged[:0]
    return {"correct": int(judged.sum()), "judged": len(judged), "units": int(units), "recovered": int(found),
            "evidence_complete": int(complete.sum()), "evidence_judged": len(complete)}


def rescore_summary(store, corpus: str, run_id: str, version: str, judge: str) -> dict:
    before = rescore(store, corpus, run_id, ORIGINAL)
    after = rescore(store, corpus, run_id, version, judge)
    out = {"run_id": run_id, "corpus": corpus, "version": version, "judge": judge, "variants": {}}
    for v in ordered_variants(after["variant"]):
        a, b = after[after["variant"] == v], before[before["variant"] == v]
        out["variants"][v] = {"original": _figures(b), version: _figures(a),
                              "corrected_rows": int(a["corrected"].sum()),
                              "verdicts_changed_corrected": int((a["verdict_changed"] & a["corrected"]).sum()),
                              "verdicts_changed_uncorrected": int((a["verdict_changed"] & ~a["corrected"]).sum()),
                              "unjudged_after": int(a["correct"].isna().sum() - b["correct"].isna().sum()),
                              "judges": sorted({j for j in a["judge"].dropna()}),
                              "accuracy_source": rows_source(a)}
    names = ordered_variants(after["variant"])
    if len(names) > 1:
        out["comparisons"] = comparisons(after, names, primary_of_rows(after))
    return out


def main(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    if args.add:
        if not args.corpus:
            raise ValueError("--add needs --corpus")
        corrections = read_corrections(args.add, store, args.corpus)
        name = args.name or args.add.name.removesuffix(".jsonl")
        save_version(store, args.corpus, name, corrections, str(args.add))
        print(f"gold version {name!r} of corpus {args.corpus!r}: {len(corrections)} corrected question(s) "
              f"from {args.add}")
    if args.list:
        corpus = args.corpus or (run_corpus(store, args.rescore, None) if args.rescore else None)
        if not corpus:
            raise ValueError("--list needs --corpus")
        print(f"{ORIGINAL:<24} the gold as imported")
        for name, count, source in store.gold_versions(corpus):
            print(f"{name:<24} {count} corrected question(s) from {source}")
    if args.rescore:
        corpus = run_corpus(store, args.rescore, args.corpus)
        result = rescore_summary(store, corpus, args.rescore, args.version, args.judge)
        print(json.dumps(result, indent=1, ensure_ascii=False) if args.json else format_rescore(result))
    if not (args.add or args.list or args.rescore):
        raise ValueError("give --add FILE, --list or --rescore RUN")
    return 0


def format_rescore(result: dict) -> str:
    version = result["version"]
    lines = [f"Run {result['run_id']} ({result['corpus']}) under gold {version!r} (judge policy {result['judge']})"]
    for v, f in result["variants"].items():
        o, n = f["original"], f[version]
        label = "stand-in accuracy" if f["accuracy_source"] == OFFLINE_SOURCE else f"accuracy ({f['accuracy_source']})"
        lines.append(f"  {v:<14} {label} {o['correct']}/{o['judged']} -> {n['correct']}/{n['judged']}   recall "
                     f"{o['recovered']}/{o['units']} -> {n['recovered']}/{n['units']} units   evidence complete "
                     f"{o['evidence_complete']}/{o['evidence_judged']} -> {n['evidence_complete']}/"
                     f"{n['evidence_judged']}   corrected rows {f['corrected_rows']}, verdicts changed "
                     f"{f['verdicts_changed_corrected']} (+{f['verdicts_changed_uncorrected']} uncorrected), "
                     f"judges: {', '.join(f['judges']) or '-'}")
    return "\n".join(lines + format_pairs(result.get("comparisons", [])))
