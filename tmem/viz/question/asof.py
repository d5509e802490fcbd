"""State as of a moment: for each UPDATE chain of an evidence forest, which state held at time t and which later
messages superseded it ("what was the plan on 3 June?").

The paper's typed edges make this a reading of the forest, not a new model call: an UPDATE edge m_i -> m_j means
m_j advances or replaces the state in m_i (Eq. 5), and parents always precede children in time (Sec. 4.3). So an
UPDATE chain s_0 -> s_1 -> ... -> s_k is a sequence of states; at time t the state that holds is the last s_i
stated at or before t, everything after it supersedes it later, everything before it was already superseded.
EXPAND children support a state without replacing it and are not states. Pure functions over ForestNodes.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd

from tmem.types import UPDATE, ForestNode
from tmem.viz.question.evidence_card import message_name
from tmem.viz.question.forest_view import changed_words, cited_ids, first_words

NOT_YET, CURRENT, SUPERSEDED = "not stated yet", "held then, still current", "held then, superseded later"


@dataclass(frozen=True)
class ChainState:
    """One UPDATE chain at one moment."""

    states: tuple[ForestNode, ...]  # the chain, oldest state first
    held: ForestNode | None  # the state that held at the moment (None: the chain had not started)
    earlier: tuple[ForestNode, ...]  # states already superseded at the moment
    later: tuple[ForestNode, ...]  # states stated after the moment: each supersedes `held`

    @property
    def status(self) -> str:
        return NOT_YET if self.held is None else (SUPERSEDED if self.later else CURRENT)


def update_chains(nodes: Sequence[ForestNode]) -> list[tuple[ForestNode, ...]]:
    """Every maximal path of UPDATE edges (a state that two messages update gives two chains sharing a prefix),
    in the order of their first state."""
    by_index = {n.index: n for n in nodes}
    updates: dict[int, list[ForestNode]] = defaultdict(list)
    for n in nodes:
        if n.relation == UPDATE and n.parent_index in by_index:
            updates[n.parent_index].append(n)
    starts = [n for n in nodes if updates.get(n.index) and not (n.relation == UPDATE and n.parent_index in by_index)]
    chains: list[tuple[ForestNode, ...]] = []

    def walk(path: tuple[ForestNode, ...]) -> None:
        kids = sorted(updates.get(path[-1].index, []), key=lambda k: (k.timestamp, k.index))
        if not kids:
            chains.append(path)
        for kid in kids:
            walk(path + (kid,))

    for start in sorted(starts, key=lambda n: (n.timestamp, n.index)):
        walk((start,))
    return chains


def state_as_of(chain: Sequence[ForestNode], moment: datetime) -> ChainState:
    """The state of one chain at `moment` (a state stated exactly at the moment already holds)."""
    stated = [i for i, s in enumerate(chain) if s.timestamp <= moment]
    if not stated:
        return ChainState(tuple(chain), None, (), tuple(chain))
    k = stated[-1]
    return ChainState(tuple(chain), chain[k], tuple(chain[:k]), tuple(chain[k + 1:]))


def states_as_of(nodes: Sequence[ForestNode], moment: datetime) -> list[ChainState]:
    return [state_as_of(chain, moment) for chain in update_chains(nodes)]


def moments(nodes: Sequence[ForestNode]) -> list[tuple[datetime, str]]:
    """The moments worth picking, oldest first: each time a chain state was stated, with its message ids (the table
    changes only then; an hourly slider gave a 90-minute chat two positions, none on its states)."""
    ids: dict[datetime, list[str]] = defaultdict(list)
    for chain in update_chains(nodes):
        for s in chain:
            if s.message_id not in ids[s.timestamp]:
                ids[s.timestamp].append(s.message_id)
    return [(t, ", ".join(ids[t])) for t in sorted(ids)]


def relevant_chain(nodes: Sequence[ForestNode], wanted: frozenset[str] | set[str] = frozenset()
                   ) -> tuple[ForestNode, ...] | None:
    """The UPDATE chain the question is about: the one holding most of the `wanted` messages (gold evidence, else
    the answer's chain), latest change first on a tie; without any, the chain that changed last; None: no chain."""
    chains = update_chains(nodes)
    if not chains:
        return None
    return max(chains, key=lambda c: (sum(s.message_id in wanted for s in c), c[-1].timestamp, len(c)))


def question_ids(trace, gold) -> frozenset[str]:
    """The messages a question is about, for picking its chain: its gold evidence, else what its answers cite."""
    from_gold = gold.evidence_ids if gold is not None else frozenset()
    return from_gold or cited_ids(trace)


def opening_moment(nodes: Sequence[ForestNode], wanted: frozenset[str] | set[str] = frozenset()) -> datetime | None:
    """Where State as of opens: just before the latest change of the relevant chain (the state that change
    replaced, shown with what replaced it), not after every change, where nothing is superseded yet."""
    chain = relevant_chain(nodes, wanted)
    return None if chain is None else chain[-2].timestamp


def moment_label(moment: datetime, ids: str, nodes: Sequence[ForestNode]) -> str:
    """A slider step's label: the time and the messages stated then, each by its id or, for a machine-made id,
    by its author (the time is already there)."""
    by_id = {n.message_id: n for n in nodes}
    names = [message_name(i, by_id[i].author, None) if i in by_id else i for i in ids.split(", ")]
    return f"{moment:%Y-%m-%d %H:%M} · {', '.join(names)}"


def snap(moment: datetime, times: Sequence[datetime]) -> datetime | None:
    """The last of `times` at or before `moment` (the same states hold at both), or None before the first."""
    earlier = [t for t in times if t <= moment]
    return max(earlier) if earlier else None


def moment_bounds(nodes: Sequence[ForestNode]) -> tuple[datetime, datetime] | None:
    """The first and last time a chain state was stated (the span worth picking a moment in), or None."""
    times = [s.timestamp for chain in update_chains(nodes) for s in chain]
    return (min(times), max(times)) if times else None


def moment_param(moment: datetime) -> str:
    """The `asof` query parameter of a moment: ISO 8601, naive UTC like the timestamps (`2025-03-08T14:00:00`),
    exact to the microsecond when it has any, so a link restores the very moment (a state stated seconds after a
    rounded moment would otherwise flip)."""
    return moment.isoformat()


def moment_from_param(text: str | None, bounds: tuple[datetime, datetime] | None) -> datetime | None:
    """The moment a link names, when it parses (ISO date or date and time; an offset is read as UTC time) and lies
    within `bounds`; else None (an old or hand-edited link is ignored, never an error)."""
    if not text or bounds is None:
        return None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment if bounds[0] <= moment <= bounds[1] else None


def _when(node: ForestNode) -> str:
    return f"{node.timestamp:%Y-%m-%d %H:%M}"


def _name(node: ForestNode) -> str:
    return message_name(node.message_id, node.author, node.timestamp)


def state_strip(chain: Sequence[ForestNode], decisions: Mapping[str, tuple[float, str]], built_by: str,
                quality: str = "") -> pd.DataFrame:
    """One decision's states over time, oldest first: what each state says (the words that changed from the state
    before), who set it and when, and the edge that made it a state (`decisions`: child id -> (confidence, reason)
    of the relation role; `built_by`: the role; `quality`: its measured UPDATE precision, when known)."""
    rows = []
    for k, s in enumerate(chain):
        before = chain[k - 1] if k else None
        confidence, _ = decisions.get(s.message_id, (None, ""))
        edge = "first state" if before is None else f"UPDATE of {_name(before)}" + (
            f" (confidence {confidence:.2f})" if confidence is not None else "")
        rows.append({"step": k + 1, "state": changed_words(s.text, before.text if before else None),
                     "set by": s.author or "—", "when": _when(s), "message": _name(s), "edge": edge,
                     "built by": built_by if before is not None else "—",
                     "role's UPDATE precision": (quality or "—") if before is not None else "—"})
    return pd.DataFrame(rows, columns=["step", "state", "set by", "when", "message", "edge", "built by",
                                       "role's UPDATE precision"])


def asof_table(nodes: Sequence[ForestNode], moment: datetime,
               topics: Mapping[str, str | None] | None = None) -> pd.DataFrame:
    """One row per UPDATE chain: the state that held at `moment` (id, time, author, first words), its status, and
    the later messages that superseded it; "—" where there is nothing."""
    topics = topics or {}
    rows = []
    for i, c in enumerate(states_as_of(nodes, moment), 1):
        held = c.held
        rows.append({"chain": f"U{i}", "topic": topics.get(c.states[0].message_id) or "—",
                     "status": c.status if held else f"{NOT_YET} (first state {_when(c.states[0])})",
                     "state then": first_words(held.text, 14, 110) if held else "—",
                     "message": _name(held) if held else "—", "stated": _when(held) if held else "—",
                     "author": (held.author or "—") if held else "—",
                     "superseded by": (", ".join(f"{_name(s)} ({_when(s)})" for s in c.later) if held else "")
                     or "—",
                     "earlier states": len(c.earlier), "states": len(c.states)})
    return pd.DataFrame(rows, columns=["chain", "topic", "status", "state then", "message", "stated", "author",
                                       "superseded by", "earlier states", "states"])
