"""Typed gold edges of a generated demo corpus, taken from the generator's own plan: the dev data that
scripts/demo_gold_edges.py writes beside a generated corpus for `python -m tmem fit-relation` (docs/evaluation.md,
section "`python -m tmem links`"). The corpus is the one `generate` makes (the recording subclass changes nothing
of the output); the edges follow the paper's relations (Sec. 4.3), as scripts/demo_gold_edges.py's docstring lists.
The shipped demo (seed 7) is never fitted on: the script's default seed is another.
"""
from __future__ import annotations

from tmem.demo.generator import DomainGenerator
from tmem.demo.vocabulary import DOMAINS
from tmem.types import CorpusData

UPDATES = {"update", "update_plain", "partial", "partial_plain", "revise"}
QUESTIONS_OF = {"challenge", "trouble"}


class _Recording(DomainGenerator):
    """The generator, noting each draft's kind and the decision it belongs to (the output is unchanged)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.kinds: dict[int, tuple[str, object]] = {}
        self.deciding = None

    def decide(self, d) -> None:
        self.deciding = d
        super().decide(d)
        self.deciding = None

    def say(self, kind, t, topic, author=None, reply=None, **ctx) -> int:
        index = super().say(kind, t, topic, author, reply, **ctx)
        self.kinds[index] = (kind, self.deciding)
        return index


def _edges(gen: _Recording, ids: dict[int, str], chatter_roots: bool = False) -> list[dict]:
    out = []

    def edge(child: int, parent: int | None, relation: str, note: str) -> None:
        out.append({"scope": gen.scope, "child": ids[child], "parent": None if parent is None else ids[parent],
                    "relation": relation, "note": note})

    for index, draft in enumerate(gen.drafts):
        kind, d = gen.kinds.get(index, ("filler", None))
        if d is not None and index == d.proposal:
            edge(index, None, "ROOT", "proposal")
        elif d is not None and kind in ("discuss", "confirm"):
            edge(index, d.proposal, "EXPAND", kind)
        elif d is not None and kind in UPDATES | {"rollback", "rollback_plain"}:
            first_revision = d.earlier[0] if d.kind == "rollback" and d.earlier else None
            parent = first_revision if kind.startswith("rollback") else d.confirm
            edge(index, parent, "UPDATE", kind)
        elif d is not None and kind in QUESTIONS_OF and draft.reply is None:
            questioned = d.earlier[0] if kind == "trouble" and d.kind == "rollback" else d.confirm
            edge(index, questioned, "EXPAND", kind)
        elif draft.reply is not None:
            edge(index, draft.reply, "EXPAND", f"{kind} reply")
        elif chatter_roots and kind not in ("propose", "discuss", "confirm"):
            edge(index, None, "ROOT", f"{kind} (no reply)")
    return out


def build(seed: int, messages: int, domains: int, chatter_roots: bool = False) -> tuple[CorpusData, list[dict]]:
    """The corpus `generate(seed, messages, domains)` makes, and its gold edges ({scope, child, parent, relation,
    note}); with `chatter_roots`, chatter that replies to nothing is a gold ROOT too."""
    parts, edges = [], []
    for i, scope in enumerate(list(DOMAINS)[:domains]):
        gen = _Recording(scope, seed, messages // domains + (i < messages % domains))
        data = gen.corpus()
        order = sorted(range(len(gen.drafts)), key=lambda j: (gen.drafts[j].time, j))  # as corpus() numbers them
        ids = {j: f"Msg_{n}" for n, j in enumerate(order, start=1)}
        parts.append(data)
        edges += _edges(gen, ids, chatter_roots)
    data = CorpusData([m for p in parts for m in p.messages], [q for p in parts for q in p.questions],
                      [g for p in parts for g in p.golds])
    return data, edges
