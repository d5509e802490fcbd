"""Every UPDATE edge of the demo's forests, and which join a message that states no state (scripts/
demo_update_sides.py; docs/evaluation.md, `links`, sixth iteration; the issue's "no UPDATE between two messages of
which neither states a state"). Each side is read with tmem.models.relation.slots.states_a_state. The demo is
scored here, never fitted.
"""
from __future__ import annotations

from tmem.models.relation.slots import states_a_state
from tmem.models.relation.values import cues
from tmem.pipeline import run as pipeline
from tmem.types import UPDATE


def update_sides(store, roles, config) -> list[tuple[str, str]]:
    """(parent text, child text) of every UPDATE edge of every stored demo question's forest."""
    scopes: dict = {}
    sides = []
    for q in store.questions("demo"):
        if q.scope not in scopes:
            scopes[q.scope] = pipeline.open_scope(store, "demo", q.scope)
        scope = scopes[q.scope]
        sides += [(scope.by_id[e.parent_id].text, scope.by_id[e.child_id].text)
                  for e in pipeline.run_question(q, scope, config, roles, corpus="demo").edges
                  if e.relation == UPDATE]
    return sides


def states_none(sides: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The edges of which one side states no state (relation.slots.states_a_state)."""
    return [(p, c) for p, c in sides if not (states_a_state(cues(p)) and states_a_state(cues(c)))]
