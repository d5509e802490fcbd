"""Write a generated demo corpus in GroupMemBench's layout with a `gold_edges.jsonl` sidecar of typed gold edges
taken from the generator's own plan (tmem.demo.planned): data to *score* structuring on (`python -m tmem links`,
docs/evaluation.md), never to fit it on — `python -m tmem fit-relation` refuses a generated corpus (the folder
carries the generator's mark, tmem.demo.provenance).

  python scripts/demo_gold_edges.py --seed 8 --messages 6000 --domains 2 --out /tmp/demo8
  python -m tmem import groupmembench /tmp/demo8 --corpus demo-seed8 --db /tmp/x.duckdb
  python -m tmem links --corpus demo-seed8 --db /tmp/x.duckdb

The edges follow the paper's relations (Sec. 4.3); the rules are in tmem/demo/planned.py. Chatter that replies to
nothing has no gold edge unless --chatter-roots marks it ROOT (the shipped demo's gold, data/demo.jsonl, does):
those roots are 77 % of the demo's messages.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from tmem.demo import write_groupmembench  # noqa: E402
from tmem.demo.generator import planned_sidecar  # noqa: E402
from tmem.demo.provenance import write_mark  # noqa: E402
from tmem.types import CorpusData  # noqa: E402


def build(seed: int, messages: int, domains: int, chatter_roots: bool = False) -> tuple[CorpusData, list[dict]]:
    """The corpus `generate(seed, messages, domains)` makes and the sidecar's lines (tmem.demo.generator)."""
    return planned_sidecar(seed, messages, domains, chatter_roots)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=8, help="generator seed (default 8; the shipped demo is 7)")
    parser.add_argument("--messages", type=int, default=6000)
    parser.add_argument("--domains", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True, help="folder to write (GroupMemBench layout)")
    parser.add_argument("--chatter-roots", action="store_true",
                        help="also mark chatter that replies to nothing as a gold ROOT (as the shipped demo does)")
    args = parser.parse_args()
    data, edges = build(args.seed, args.messages, args.domains, args.chatter_roots)
    write_groupmembench(data, args.out)
    with (args.out / "gold_edges.jsonl").open("w", encoding="utf-8") as handle:  # with the notes of the plan
        handle.writelines(json.dumps(e) + "\n" for e in edges)
    write_mark(args.out, args.seed)  # fit-relation refuses a corpus imported from here
    kinds = {r: sum(e["relation"] == r for e in edges) for r in ("UPDATE", "EXPAND", "ROOT")}
    print(f"{len(data.messages)} messages, {len(edges)} gold edges {kinds} -> {args.out} "
          "(generated: scored, never fitted on)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
