"""`python -m tmem annotate`: a reviewer's failure label and note on a trace of a stored run (tmem.evaluation.
annotations); list the run's annotations, count them per label x attributed stage, export the run's rows with
them, list the labels, or delete one."""
from __future__ import annotations

import argparse
from pathlib import Path

from tmem.analysis.annotations import annotate, default_author, label_counts, labels, with_annotations
from tmem.api import open_store
from tmem.commands.evaluate.report import run_corpus
from tmem.limits import strip_control
from tmem.viz.batch.annotations import annotation_text
from tmem.viz.safe import spreadsheet_safe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", metavar="ID", help="Run id (as `run` printed it).")
    parser.add_argument("--question", metavar="ID", help="Question id to annotate (or --delete).")
    parser.add_argument("--scope", help="Memory scope, when the question id exists in several.")
    parser.add_argument("--variant", help="Variant of the trace (default: the run's only variant).")
    parser.add_argument("--label", help="Failure label: a built-in one (--labels) or a new one, which is created.")
    parser.add_argument("--note", default="", help="The reviewer's note (free text).")
    parser.add_argument("--description", default="", help="With a new --label: what it means.")
    parser.add_argument("--author", help="Who annotates (default: $TMEM_AUTHOR or the login name).")
    parser.add_argument("--delete", action="store_true", help="Delete the author's annotation of --question.")
    parser.add_argument("--labels", action="store_true", help="List the labels a reviewer can pick.")
    parser.add_argument("--list", action="store_true", help="List the run's annotations and the label x stage counts.")
    parser.add_argument("--export", type=Path, metavar="FILE",
                        help="Write every row of the run with its annotation columns (.csv or .json).")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")


def _row(results, args) -> dict:
    part = results[results["question_id"] == args.question]
    if args.scope:
        part = part[part["scope"] == args.scope]
    if args.variant:
        part = part[part["variant"] == args.variant]
    if not len(part):
        raise KeyError(f"run {args.run!r} has no row for question {args.question!r}"
                       + (f" in scope {args.scope!r}" if args.scope else "")
                       + (f" and variant {args.variant!r}" if args.variant else ""))
    for column, flag in (("scope", "--scope"), ("variant", "--variant")):
        if part[column].nunique() > 1:
            raise ValueError(f"question {args.question!r} has rows for several {column}s "
                             f"({', '.join(sorted(part[column].unique()))}); pass {flag}")
    return part.iloc[0].to_dict()


def main(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    if args.labels:
        for name, description in labels(store).items():
            print(f"{strip_control(name):<40} {strip_control(description)}")
        return 0
    if not args.run:
        raise ValueError("--run is required (or --labels)")
    corpus = run_corpus(store, args.run, None)
    results = store.run_results(corpus, args.run)
    if args.question:
        row = _row(results, args)
        if args.delete:
            gone = store.delete_annotation(corpus, args.run, row["scope"], row["question_id"], row["variant"],
                                           args.author or default_author())
            print(f"deleted {gone} annotation(s)")
        elif args.label:
            saved = annotate(store, corpus, row, args.label, args.note, args.author, args.description)
            print(f"annotated {saved['variant']} / {saved['question_id']} as {strip_control(saved['label'])!r} "
                  f"by {strip_control(saved['author'])}")
        else:
            raise ValueError("--question needs --label (or --delete)")
    annotated = with_annotations(results, store.annotations(corpus))
    if args.list:
        shown = annotated[annotated["label"].notna()]
        for r in shown.to_dict("records"):
            print(strip_control(f"{r['variant']:<14} {r['question_id']:<24} {annotation_text(r)}"))
        counts = label_counts(annotated)
        print("\n" + (strip_control(counts.to_string(index=False)) if len(counts) else "no annotations"))
    if args.export:
        if args.export.suffix == ".json":
            args.export.write_text(annotated.to_json(orient="records", force_ascii=False, date_format="iso"),
                                   encoding="utf-8")
        else:
            spreadsheet_safe(annotated).to_csv(args.export, index=False)  # no cell runs as a formula
        print(f"{len(annotated)} rows written to {args.export}")
    return 0
