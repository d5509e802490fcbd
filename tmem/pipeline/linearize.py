"""Evidence Forest Linearization (paper Sec. 4.4, Eq. 8) and the flat presentation (App. I, Sec. 5.4).

Trees are ordered by root timestamp; nodes follow a preorder traversal with siblings in chronological order. Each
node becomes the tuple (i, pi_i, r_i, d_i, t_i, a_i, x_i). In the serialized text every message body is a JSON
string literal, so message text can neither break out of its line nor forge structure: it stays data.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import networkx as nx

from tmem.types import ROOT, ForestNode, Message

BEGIN, END = "<<<BEGIN RETRIEVED MESSAGES>>>", "<<<END RETRIEVED MESSAGES>>>"


def _time_key(graph: nx.DiGraph, node: str) -> tuple:
    return (graph.nodes[node]["timestamp"], node)


def linearize_forest(graph: nx.DiGraph, messages: Mapping[str, Message]) -> tuple[ForestNode, ...]:
    """L(F_q): roots by time, preorder, siblings by time; indices are 1-based and a root's parent index is 0."""
    roots = sorted((n for n in graph.nodes if graph.in_degree(n) == 0), key=lambda n: _time_key(graph, n))
    rows: list[ForestNode] = []
    index_of: dict[str, int] = {}
    for tree, root in enumerate(roots, start=1):
        stack = [(root, 0)]
        while stack:
            node, depth = stack.pop()
            parents = list(graph.predecessors(node))
            parent = parents[0] if parents else None
            index_of[node] = len(rows) + 1
            m = messages[node]
            rows.append(ForestNode(index_of[node], index_of[parent] if parent else 0,
                                   graph.edges[parent, node]["relation"] if parent else ROOT, depth, tree,
                                   node, m.timestamp, m.author, m.text))
            children = sorted(graph.successors(node), key=lambda n: _time_key(graph, n), reverse=True)
            stack += [(c, depth + 1) for c in children]
    return tuple(rows)


def _metadata(m: Message) -> str:
    parts = [f"time={m.timestamp.isoformat(timespec='minutes')}", f"author={m.author or '?'}"]
    if m.role:
        parts.append(f"role={m.role}")
    if m.channel:
        parts.append(f"channel={m.channel}")
    return " ".join(json.dumps(p, ensure_ascii=False)[1:-1] for p in parts)


def forest_lines(nodes: Sequence[ForestNode], messages: Mapping[str, Message],
                 texts: Mapping[str, str] | None = None) -> list[tuple[str | None, str]]:
    """The forest prompt's passages as (message id or None for a marker line, line): TREE headers, indentation by
    depth, one node per line. The ids let a cut at B say which messages it shortened (tmem.pipeline.compression)."""
    texts = texts or {}
    lines: list[tuple[str | None, str]] = [(None, BEGIN)]
    tree = 0
    for n in nodes:
        if n.tree != tree:
            tree = n.tree
            lines.append((None, f"TREE {tree}"))
        body = json.dumps(texts.get(n.message_id, n.text), ensure_ascii=False)
        lines.append((n.message_id, f"{'  ' * n.depth}[{n.index}] parent={n.parent_index} {n.relation} "
                                    f"depth={n.depth} {_metadata(messages[n.message_id])} text={body}"))
    lines.append((None, END))
    return lines


def serialize_forest(nodes: Sequence[ForestNode], messages: Mapping[str, Message],
                     texts: Mapping[str, str] | None = None) -> str:
    """The forest prompt's passages (`forest_lines` joined)."""
    return "\n".join(line for _, line in forest_lines(nodes, messages, texts))


FLAT_ORDERS = ("rank", "chronological")


def order_flat(evidence: Sequence[Message], order: str = "rank") -> list[Message]:
    """The flat list's order. 'rank' keeps the evidence order: anchors by retrieval rank, then the recovered messages
    (App. I: "messages in retrieval-rank order"). 'chronological' sorts by time, ties kept in rank order (Sec. 5.4:
    BM25 (Expand) "uses a flat chronological list")."""
    if order not in FLAT_ORDERS:
        raise ValueError(f"unknown flat order {order!r}; known: {', '.join(FLAT_ORDERS)}")
    return sorted(evidence, key=lambda m: m.timestamp) if order == "chronological" else list(evidence)


def flat_lines(ordered: Sequence[Message], texts: Mapping[str, str] | None = None) -> list[tuple[str | None, str]]:
    """The flat prompt's passages as (message id or None for a marker line, line): messages in the order given
    (`order_flat`), numbered from 1."""
    texts = texts or {}
    body = [(m.id, f"[{i}] {_metadata(m)} text={json.dumps(texts.get(m.id, m.text), ensure_ascii=False)}")
            for i, m in enumerate(ordered, start=1)]
    return [(None, BEGIN), *body, (None, END)]


def serialize_flat(ordered: Sequence[Message], texts: Mapping[str, str] | None = None) -> str:
    """The flat prompt's passages (`flat_lines` joined)."""
    return "\n".join(line for _, line in flat_lines(ordered, texts))
