"""`python -m tmem fit-relation`: fit the fitted relation role's weights on dev splits (tmem.evaluation.fit_relation).

  python -m tmem fit-relation --corpus irc-dev --corpus cases-dev --db /tmp/x.duckdb [--weight CORPUS=X] \
      [--out FILE] [--l2 X]

Writes tmem/models/relation/weights.json by default (the weights the `fitted` rule reads); name dev corpora only
(docs/evaluation.md, "Dev/test discipline"), then re-score the test splits with `python -m tmem links`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tmem.api import open_store
from tmem.api.demo import generated_corpus
from tmem.api.models import RELATION_WEIGHTS, roles_for
from tmem.commands.flags import add_backend_arguments, number, settings_from_args
from tmem.evaluation.fit_relation import L2, fit_weights
from tmem.evaluation.tuning import refuse_held_out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", action="append", required=True,
                        help="A dev corpus with gold edges (repeatable; e.g. irc-dev and cases-dev).")
    parser.add_argument("--scope", action="append", default=[], help="Only these scopes (repeatable).")
    parser.add_argument("--l2", type=number(float, 0, 10 ** 6), default=L2, help=f"L2 penalty (default {L2}).")
    parser.add_argument("--weight", action="append", default=[], metavar="CORPUS=X",
                        help="How much a corpus weighs in the fit (default 1 each, whatever its size; repeatable).")
    parser.add_argument("--out", default=str(RELATION_WEIGHTS),
                        help="Weights file to write (default: the shipped one).")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")
    add_backend_arguments(parser)


def main(args: argparse.Namespace) -> int:
    shares = {}
    for item in args.weight:
        name, _, value = item.partition("=")
        try:
            shares[name] = float(value)
        except ValueError:
            raise ValueError(f"--weight {item!r}: expected CORPUS=NUMBER") from None
        if name not in args.corpus or shares[name] < 0:
            raise ValueError(f"--weight {item!r}: name one of the --corpus values with a weight >= 0")
    store = open_store(args.db, demo=False)
    for corpus in args.corpus:
        refuse_held_out(store, corpus)  # by the split marker recorded at import, not by the name
        generated = generated_corpus(store, corpus)  # never learn from our own generator (tmem.demo.provenance)
        if generated:
            raise ValueError(f"--corpus {corpus}: {generated}; its gold edges are the generator's plan: scored, "
                             "never fitted on")
    embedder = roles_for(settings_from_args(args), store=store).embedder
    weights = fit_weights(store, args.corpus, embedder, l2=args.l2, scopes=args.scope or None,
                          log=lambda line: print(line, file=sys.stderr), weights=shares)
    Path(args.out).write_text(json.dumps(weights, indent=1) + "\n", encoding="utf-8")
    print(f"fitted on {', '.join(args.corpus)}: {weights['children']} children, {weights['typed_edges']} typed edges "
          f"({weights['updates']} UPDATE) in {weights['seconds']} s -> {args.out}")
    return 0
