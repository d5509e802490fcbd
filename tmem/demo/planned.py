"""The generator's planned edges: typed gold structuring edges (UPDATE / EXPAND / ROOT, paper Sec. 4.3) read off the
plan the generator followed (tmem.demo.generator records each draft's kind and the decision it belongs to).

They are the demo's gold links, for display and scoring only (the Structuring page, `python -m tmem links`): the
generator wrote both the messages and these edges, so a relation role fitted on them would learn the generator's
templates, not structuring. `python -m tmem fit-relation` refuses a generated corpus (tmem.demo.provenance).

The edges follow the plan:
- a proposal starts a tree (ROOT); a discussion of it and its confirmation EXPAND the proposal;
- a challenge of a decision (or the trouble report of a revision) EXPANDs the state it questions;
- a revision UPDATEs the state it changes: the confirmed decision (revise, partial or not), or, for a rollback,
  the first revision it takes back (the rollback's first revision UPDATEs the confirmation);
- any other reply EXPANDs what it replies to (pile-ons, acknowledgements, chatter replies);
- with `chatter_roots` (the demo's gold), a message that replies to nothing and belongs to no decision is a ROOT:
  a forest that hangs chatter under a decision is wrong, and only scoring it shows that.
"""
from __future__ import annotations

from dataclasses import dataclass

PLANNED_EDGES = "the generator's planned edges (generated demo corpus; scored, never fitted on)"

UPDATES = frozenset({"update", "update_plain", "partial", "partial_plain", "revise", "rollback", "rollback_plain"})
QUESTIONS_OF = frozenset({"challenge", "trouble"})
DECISION_KINDS = frozenset({"propose", "discuss", "confirm"})


@dataclass(frozen=True)
class PlannedEdge:
    """One gold edge: `child` is a draft index; `parent` None for a ROOT; `note` says which plan step made it."""

    child: int
    parent: int | None
    relation: str
    note: str


def planned_edge(index: int, kind: str, d, reply: int | None, chatter_roots: bool) -> PlannedEdge | None:
    """The gold edge of draft `index` of `kind` (the generator's template kind), made while deciding `d` (a
    tmem.demo.questions.Decision, None outside a decision) and replying to draft `reply`; None: no gold edge."""
    if d is not None and index == d.proposal:
        return PlannedEdge(index, None, "ROOT", "proposal")
    if d is not None and kind in ("discuss", "confirm"):
        return PlannedEdge(index, d.proposal, "EXPAND", kind)
    if d is not None and kind in UPDATES:
        first_revision = d.earlier[0] if d.kind == "rollback" and d.earlier else None
        return PlannedEdge(index, first_revision if kind.startswith("rollback") else d.confirm, "UPDATE", kind)
    if d is not None and kind in QUESTIONS_OF and reply is None:
        questioned = d.earlier[0] if kind == "trouble" and d.kind == "rollback" else d.confirm
        return PlannedEdge(index, questioned, "EXPAND", kind)
    if reply is not None:
        return PlannedEdge(index, reply, "EXPAND", f"{kind} reply")
    if chatter_roots and kind not in DECISION_KINDS:
        return PlannedEdge(index, None, "ROOT", f"{kind} (no reply)")
    return None


def planned_edges(gen, chatter_roots: bool = True) -> list[PlannedEdge]:
    """Every draft's gold edge, in draft order (`gen`: a DomainGenerator after `corpus()` or `plan()` ran)."""
    out = []
    for index, draft in enumerate(gen.drafts):
        kind, d = gen.kinds.get(index, ("filler", None))
        edge = planned_edge(index, kind, d, draft.reply, chatter_roots)
        if edge is not None:
            out.append(edge)
    return out


def planned_links(gen, order: list[int], chatter_roots: bool = True) -> list[tuple]:
    """The planned edges as a corpus's typed gold links (scope, child id, parent id, relation), in message order;
    a ROOT is a self-link, as the store keeps it. `order`: draft indexes in message order (Msg_1 first)."""
    ids = {i: f"Msg_{n}" for n, i in enumerate(order, start=1)}
    rank = {i: n for n, i in enumerate(order)}
    return [(gen.scope, ids[e.child], ids[e.child if e.parent is None else e.parent], e.relation)
            for e in sorted(planned_edges(gen, chatter_roots), key=lambda e: rank[e.child])]
