"""Gold structuring edges of a GroupMemBench-layout corpus: derived from the generator's annotations, and an
optional hand-annotated sidecar `gold_edges.jsonl` in the folder the user imported (docs/corpora.md).

They go to the store's `gold_links` evaluation table only (parent = child marks a gold root); the generator
fields stay out of `messages`, so no pipeline role ever reads them (tests/test_leakage.py).

Derived edges, per message record:
- `decision_type: "changed"`: UPDATE to the earlier message of the domain that states the changed decision
  (`decision_change_metadata.original_decision`, a dict or a str-encoded dict, found by normalised containment,
  the latest such message); when it names none, UPDATE to `reply_to`; otherwise no gold edge (noted);
- else a `reply_to`: EXPAND to it (a reply elaborates, answers or confirms what it replies to);
- else `is_decision_point: true`: ROOT (a decision stated without a reply starts its own tree);
- else `is_noise: true`: ROOT (chatter that replies to nothing neither changes nor supports a state: a forest that
  hangs it under a decision is wrong, and only scoring it shows that).
Other messages have no gold edge and are not scored.

Sidecar lines: {"scope": domain, "child": id, "parent": id | null, "relation": "UPDATE" | "EXPAND" | "ROOT",
"note": "...", "origin": "..."}; a line replaces the derived edge of its child. A parent must be an earlier message
of the scope; ROOT goes with a null parent. Bad lines raise CorpusError naming file, line and field. `origin`
(optional) says who made the edge: the demo generator writes `PLANNED` (its planned edges: gold to score against,
never to fit on), and the import's note counts them as such; a line without it is counted as hand-annotated.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tmem import limits
from tmem.corpora.common import optional_str, parse_json, read_json, read_text, short
from tmem.types import CorpusError, Message

SIDECAR = "gold_edges.jsonl"
RELATIONS = ("UPDATE", "EXPAND", "ROOT")


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.casefold()).strip()


def _change_metadata(value) -> dict:
    """The metadata as a dict; the official files sometimes hold a str-encoded dict, which is parsed only when it
    is short (limits.MAX_METADATA_CHARS): Python's literal parser takes memory far beyond a long string's size."""
    if isinstance(value, str):
        if len(value) > limits.MAX_METADATA_CHARS:
            return {}
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            return {}
    return value if isinstance(value, dict) else {}


def derived_links(path: Path, scope: str, messages: list[Message]) -> tuple[list[tuple], list[tuple]]:
    """(scope, child, parent, relation) edges from one domain file's generator annotations, and (scope, child,
    note) for the changed decisions that got none."""
    channels = read_json(path)
    if not isinstance(channels, dict):
        return [], []
    by_id = {m.id: m for m in messages}
    texts = [(m, _norm(m.text)) for m in messages]  # time-ordered
    links, notes = [], []
    for records in channels.values():
        for record in records if isinstance(records, list) else ():
            if not isinstance(record, dict) or record.get("msg_node") not in by_id:
                continue
            child = by_id[record["msg_node"]]
            reply = record.get("reply_to") if record.get("reply_to") in by_id else None
            if record.get("decision_type") == "changed":
                original = _change_metadata(record.get("decision_change_metadata")).get("original_decision")
                original = _norm(original) if isinstance(original, str) and len(original) <= limits.MAX_METADATA_CHARS \
                    else ""
                stated = [m for m, t in texts if original and m.timestamp < child.timestamp
                          and (original in t or (len(t) > 20 and t in original))]
                parent = stated[-1].id if stated else reply
                if parent is None:
                    notes.append((scope, child.id, f"{path} [{child.id}]: a 'changed' decision whose original "
                                  "decision names no earlier message and that replies to none: no gold edge"))
                else:
                    links.append((scope, child.id, parent, "UPDATE"))
            elif reply is not None:
                links.append((scope, child.id, reply, "EXPAND"))
            elif record.get("is_decision_point") is True or record.get("is_noise") is True:
                links.append((scope, child.id, child.id, "ROOT"))
    return links, notes


PLANNED = "planned by the demo generator"  # a sidecar line's `origin` when tmem.demo wrote it


def read_sidecar(path: Path, messages_by_scope: dict[str, dict[str, Message]]) -> tuple[list[tuple], int]:
    """(typed gold edges of a sidecar, validated against the loaded messages; how many of them the demo generator
    planned: `origin` PLANNED)."""
    out, planned = [], 0
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        at = f"{path}:{number}"
        record = parse_json(line, str(path), number)  # bad syntax and deep nesting named at the line
        if not isinstance(record, dict):
            raise CorpusError(f"{at}: a line must be a JSON object")
        scope, child, parent, relation = (record.get(k) for k in ("scope", "child", "parent", "relation"))
        for field, value in (("scope", scope), ("child", child), ("parent", parent), ("relation", relation)):
            if not isinstance(value, str) and not (field == "parent" and value is None):
                raise CorpusError(f"{at}: field {field!r} must be a string, got {short(value)}")
        if scope not in messages_by_scope:
            raise CorpusError(f"{at}: field 'scope': {short(scope)} is not a loaded domain "
                              f"({', '.join(sorted(messages_by_scope))})")
        ids = messages_by_scope[scope]
        if child not in ids:
            raise CorpusError(f"{at}: field 'child': no message {short(child)} in {scope!r}")
        if relation not in RELATIONS:
            raise CorpusError(f"{at}: field 'relation': must be one of {', '.join(RELATIONS)}, got {short(relation)}")
        if (relation == "ROOT") != (parent is None):
            raise CorpusError(f"{at}: field 'parent': must be null exactly when the relation is ROOT")
        if parent is not None:
            if parent not in ids:
                raise CorpusError(f"{at}: field 'parent': no message {short(parent)} in {scope!r}")
            if ids[parent].timestamp >= ids[child].timestamp:
                raise CorpusError(f"{at}: field 'parent': {parent!r} is not earlier than {child!r}")
        out.append((scope, child, parent or child, relation))
        planned += optional_str(record, "origin", at) == PLANNED
    return out, planned


def sidecar_note(sidecar: Path, edges: int, planned: int) -> str:
    """What the sidecar's edges are: planned by the generator (a generated corpus: scored, never fitted on) or
    annotated by hand."""
    parts = [f"{planned} gold edge(s) {PLANNED} (a generated corpus: scored, never fitted on)"] if planned else []
    parts += [f"{edges - planned} hand-annotated gold edge(s)"] if edges > planned or not edges else []
    return f"{sidecar}: " + "; ".join(parts)


def gold_links(root: Path, domains: dict[str, Path], messages: list[Message]) -> tuple[list[tuple], list[str]]:
    """All gold edges of an import: derived per domain file, then the sidecar (only inside `root`, a folder)."""
    by_scope: dict[str, dict[str, Message]] = {}
    for m in messages:
        by_scope.setdefault(m.scope, {})[m.id] = m
    edges: dict[tuple[str, str], tuple] = {}
    notes: list[tuple] = []
    for scope, path in domains.items():
        links, link_notes = derived_links(path, scope, sorted(by_scope.get(scope, {}).values(),
                                                              key=lambda m: m.timestamp))
        edges.update({(link[0], link[1]): link for link in links})
        notes += link_notes
    sidecar = root / SIDECAR if root.is_dir() else None
    if sidecar is not None and sidecar.is_file():
        typed, planned = read_sidecar(sidecar, by_scope)
        edges.update({(link[0], link[1]): link for link in typed})
        notes = [n for n in notes if (n[0], n[1]) not in edges]  # the sidecar annotated those children
        notes.append(("", "", sidecar_note(sidecar, len(typed), planned)))
    return list(edges.values()), [n[2] for n in notes]
