"""`python -m tmem demo`: generate the deterministic demo corpus (tmem.demo) and write it as tmem JSONL (a .jsonl
path) or in GroupMemBench's folder layout (any other path)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from tmem.demo import DEMO_JSONL, generate, write_groupmembench, write_jsonl


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7, the shipped demo)")
    parser.add_argument("--messages", type=int, default=3000, help="messages in total (default 3000)")
    parser.add_argument("--domains", type=int, default=1, help="domains = memory scopes, 1-4 (default 1)")
    parser.add_argument("--out", type=Path, default=DEMO_JSONL,
                        help="a .jsonl file (tmem JSONL) or a folder (GroupMemBench layout); default data/demo.jsonl")


def main(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    data = generate(args.seed, args.messages, args.domains)
    if args.out.suffix == ".jsonl":
        write_jsonl(data, args.out)
    else:
        write_groupmembench(data, args.out)
    scopes = ", ".join(dict.fromkeys(m.scope for m in data.messages))
    print(f"{len(data.messages):,} messages, {len(data.questions):,} questions in {scopes} -> {args.out} "
          f"({time.perf_counter() - started:.2f} s)")
    return 0
