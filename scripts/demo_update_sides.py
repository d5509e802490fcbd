"""Every UPDATE edge of the demo's forests, and how many join a message that states no state (docs/evaluation.md,
`links`, sixth iteration; the issue's "no UPDATE between two messages of which neither states a state").

  python scripts/demo_update_sides.py [--db /tmp/demo.duckdb] [--embedder lexical|minilm]

Runs every stored demo question with the default variant and the offline roles, and reads each side of each UPDATE
with tmem.models.relation_slots.states_a_state. The demo is scored here, never fitted.
"""
from __future__ import annotations

import argparse
import sys
import time

from tmem.api import open_scope, open_store, resolve_config
from tmem.models.embedders import make_embedder
from tmem.models.offline import offline_roles
from tmem.models.relation_slots import states_a_state
from tmem.models.state_values import cues
from tmem.pipeline import run as pipeline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="/tmp/tmem-demo-updates.duckdb",
                        help="DuckDB file; the demo is loaded into it when missing.")
    parser.add_argument("--embedder", default="lexical", choices=("lexical", "minilm"))
    args = parser.parse_args()
    started = time.perf_counter()
    store = open_store(args.db)
    roles = offline_roles(make_embedder(args.embedder))
    config = resolve_config("full")
    questions = store.questions("demo")
    scopes: dict = {}
    total = no_state = asking = 0
    for q in questions:
        if q.scope not in scopes:
            scopes[q.scope] = open_scope(store, "demo", q.scope)
        scope = scopes[q.scope]
        for edge in pipeline.run_question(q, scope, config, roles, corpus="demo").edges:
            if edge.relation != "UPDATE":
                continue
            parent, child = cues(scope.by_id[edge.parent_id].text), cues(scope.by_id[edge.child_id].text)
            total += 1
            no_state += not (states_a_state(parent) and states_a_state(child))
            asking += parent.challenge
    print(f"{len(questions)} demo questions ({args.embedder}): {total} UPDATE edges, {no_state} with a side that "
          f"states no state, {asking} of a parent that asks, in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
