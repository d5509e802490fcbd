"""Every UPDATE edge of the demo's forests, and how many join a message that states no state (docs/evaluation.md,
`links`, sixth iteration; the issue's "no UPDATE between two messages of which neither states a state").

  python scripts/demo_update_sides.py [--db /tmp/demo.duckdb] [--embedder lexical|minilm]

Runs every stored demo question with the default variant and the offline roles, and reads each side of each UPDATE
with tmem.models.relation.slots.states_a_state (tmem/evaluation/relation/update_sides.py). The demo is scored
here, never fitted.
"""
from __future__ import annotations

import argparse
import sys
import time

from tmem.api import open_store, resolve_config
from tmem.evaluation.relation.update_sides import states_none, update_sides
from tmem.models.embedders import make_embedder
from tmem.models.offline import offline_roles
from tmem.models.relation.values import cues


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="/tmp/tmem-demo-updates.duckdb",
                        help="DuckDB file; the demo is loaded into it when missing.")
    parser.add_argument("--embedder", default="lexical", choices=("lexical", "minilm"))
    args = parser.parse_args()
    started = time.perf_counter()
    store = open_store(args.db)
    sides = update_sides(store, offline_roles(make_embedder(args.embedder)), resolve_config("full"))
    asking = sum(cues(p).challenge for p, _ in sides)
    print(f"{len(store.questions('demo'))} demo questions ({args.embedder}): {len(sides)} UPDATE edges, "
          f"{len(states_none(sides))} with a side that states no state, {asking} of a parent that asks, in "
          f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
