"""`python -m tmem tuning`: the groups of tuned constants, their dev and test splits, how each is measured, and
the hash line the docs' dev/test table carries (tmem/evaluation/tuning.py). `--check` fails when the table in
docs/evaluation.md was measured with other constants than the code holds now."""
from __future__ import annotations

import argparse
from pathlib import Path

from tmem.evaluation.tuning import GROUPS, group_hash, hash_line, stale_groups

DOCS = Path(__file__).resolve().parents[3] / "docs" / "evaluation.md"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", nargs="?", const=str(DOCS), metavar="FILE",
                        help="Exit 1 when FILE's dev/test table (default docs/evaluation.md) is stale.")


def main(args: argparse.Namespace) -> int:
    for name, group in GROUPS.items():
        print(f"{name} ({group_hash(name)}): {group.what}\n  dev: {group.dev}\n  test: {group.test}\n"
              f"  measure: {group.measure}")
    print(hash_line())
    if args.check:
        stale = stale_groups(Path(args.check).read_text(encoding="utf-8"))
        if stale:
            raise ValueError(f"{args.check}: the dev/test table is stale for {', '.join(stale)}: re-measure "
                             "(commands above) and paste the hash line into the table")
        print(f"{args.check}: the dev/test table matches the constants")
    return 0
