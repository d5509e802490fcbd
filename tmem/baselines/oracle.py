"""Oracle bound for attribution (issue 40): `oracle-evidence` gives the answer model exactly the gold evidence
messages (every acceptable message of every unit, in time order). It is not a memory system and never a
result: it bounds what the answer model can do with perfect retrieval, so Failures and Compare can say how much
of a failure is retrieval and how much is the answer. (`oracle-forest`, T-Mem's evidence linked by the gold
edges, is a variant of T-Mem's own structuring: tmem.pipeline.methods.)"""
from __future__ import annotations

from tmem.baselines.base import Built, Item, System, message_meta
from tmem.models.base import RelationResult
from tmem.types import EXPAND, NONE, UPDATE, RelationChoice


class OracleEvidence(System):
    name = "oracle-evidence"
    label = "oracle: the gold evidence messages (an upper bound, not a system)"
    source = "oracle"
    needs_llm = False
    derived = False
    uses_gold = True
    config = {"context": "every acceptable message of every gold evidence unit, in time order"}

    def ingest(self, scope, tools) -> Built:
        return Built({}, {})

    def retrieve(self, question, scope, memory, tools, gold=None) -> list[Item]:
        if gold is None:
            return []
        messages = sorted((scope.by_id[i] for i in gold.evidence_ids if i in scope.by_id),
                          key=lambda m: (m.timestamp, m.id))
        return [Item(m.text, (m.id,), "message", False, None, message_meta(m)) for m in messages]



class GoldRelation:
    """The relation role of `oracle-forest`: each child's parent is its gold parent when that message is among the
    candidates (T-Mem's evidence), with the gold relation (an untyped gold edge is labelled EXPAND); otherwise the
    child is a root. Not a model: an upper bound on structuring, for attribution."""

    backend = "oracle:gold-edges"
    offline = True

    def __init__(self, edges: list[tuple[str, str | None, str | None]]):
        self.parent = {c: (p, r) for c, p, r in edges if p is not None}

    def label_pairs(self, question, child, candidates, scope) -> RelationResult:
        parent, relation = self.parent.get(child.id, (None, None))
        relation = relation if relation in (UPDATE, EXPAND) else EXPAND
        choices = tuple(RelationChoice(c.id, relation, 1.0, "gold edge") if c.id == parent else
                        RelationChoice(c.id, NONE, 1.0, "not the gold parent") for c in candidates)
        return RelationResult(choices=choices)


def gold_relation(store, scope) -> GoldRelation:
    """The gold edges of the scope as a relation role; ValueError where the corpus has none."""
    if store is None:
        raise ValueError("oracle-forest reads the corpus's gold edges from the database; none was given")
    edges = store.gold_edges(scope.corpus, scope.name)
    if not any(p is not None for _, p, _ in edges):
        raise ValueError(f"oracle-forest: scope {scope.name!r} of corpus {scope.corpus!r} has no gold edges")
    return GoldRelation(edges)
