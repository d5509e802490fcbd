"""The offline relation roles by name (`structuring.relation_rule`): the fitted role, the state-seeking rule and the
cue-overlap baseline (tmem/models/relation_learned.py, tmem/models/relation_offline.py)."""
from __future__ import annotations

from tmem.models.relation_learned import FittedRelation
from tmem.models.relation_offline import CueOverlapRelation, StateRelation

RELATION_RULES = {"fitted": FittedRelation, "state": StateRelation, "cue-overlap": CueOverlapRelation}


def offline_relation(rule: str = "state", embedder=None):
    """The offline relation role named by `structuring.relation_rule`, given the scope's embedder."""
    if rule not in RELATION_RULES:
        raise ValueError(f"unknown offline relation rule {rule!r}; known: {', '.join(RELATION_RULES)}")
    return RELATION_RULES[rule]().with_embedder(embedder)
