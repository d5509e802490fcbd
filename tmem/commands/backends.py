"""`python -m tmem backends`: which backend and model each role uses, resolved from flags, environment and
tmem.toml, and where each value came from (tmem.models.describe). Prints the name of the key variable and whether it
is set, never a key. `--check` asks each configured server for its model list (one short request each)."""
from __future__ import annotations

import argparse
import json
import os

from tmem.api.backends import check, describe
from tmem.commands.flags import add_backend_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_backend_arguments(parser)
    parser.add_argument("--json", action="store_true", help="Print the resolved settings as JSON.")
    parser.add_argument("--check", action="store_true", help="Contact each configured server (GET /models).")


def main(args: argparse.Namespace) -> int:
    env = os.environ
    settings = settings_from_args(args, env)
    rows = describe(settings, env)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            rest = "  ".join(f"{k}={v}" for k, v in row.items() if k not in ("role", "backend", "model") and v)
            print(f"{row['role']:<17} {row['backend']:<8} {row['model']}" + (f"\n{'':<26}{rest}" if rest else ""))
    if args.check:
        for line in check(settings, env):
            print(line)
    return 0
