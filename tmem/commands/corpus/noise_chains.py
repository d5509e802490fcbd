"""`python -m tmem noise-chains --corpus demo --k 2 --out PATH [--templates FILE]`: a new JSONL corpus with an injected
revision-noise chain (k revisions and a rollback, gold UPDATE edges) after the current state of every question with
a gold UPDATE chain (tmem.evaluation.noise_chains, paper Exp-5). Never written over an existing file; import it with
`python -m tmem import jsonl PATH --corpus NAME`."""
from __future__ import annotations

import argparse
from pathlib import Path

from tmem.api import open_store
from tmem.evaluation.noise_chains import inject, load_templates, write_corpus
from tmem.types import CorpusData


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, help="stored corpus with gold UPDATE chains (e.g. demo)")
    parser.add_argument("--out", type=Path, required=True, help="the new corpus's JSONL file (must not exist)")
    parser.add_argument("--k", type=int, default=2, help="intermediate revisions per chain (default 2)")
    parser.add_argument("--templates", type=Path, default=None,
                        help="JSON {\"revision\": [...], \"rollback\": [...]} with {text} {author} {i} {k}; "
                             "default: offline templates, for the plumbing only")
    parser.add_argument("--limit", type=int, default=None, help="at most this many chains")
    parser.add_argument("--db", type=Path, default=None, help="DuckDB file (default: $TMEM_DB or data/tmem.duckdb)")


def main(args: argparse.Namespace) -> int:
    if args.out.exists():
        raise FileExistsError(f"{args.out}: exists; a noise corpus is written to a new file, never over another")
    templates, plumbing = load_templates(args.templates)  # before the database is opened
    store = open_store(args.db)
    try:
        if args.corpus not in store.corpora():
            raise ValueError(f"no corpus {args.corpus!r} in {store.path}")
        scopes, questions = store.scopes(args.corpus), store.questions(args.corpus)
        data = CorpusData([m for s in scopes for m in store.messages(args.corpus, s)], questions,
                          [(q.scope, store.gold(args.corpus, q.scope, q.id)) for q in questions],
                          [(s, c, p, r) for s in scopes for c, p, r in store.gold_edges(args.corpus, s) if p])
    finally:
        store.close()
    result = inject(data, args.k, templates, plumbing, args.limit)
    write_corpus(result.data, args.out)
    print(f"{result.chains} noise chain(s) of {args.k} revision(s) and a rollback written to {args.out}"
          + (" — offline plumbing templates: not the paper's model-written chains" if plumbing else ""))
    return 0
