"""Writers for a generated corpus (tmem.demo): the project's JSONL format and GroupMemBench's folder layout."""
from __future__ import annotations

import html
import json
from pathlib import Path

from tmem.corpora.gold_edges import PLANNED
from tmem.demo.vocabulary import QUESTION_TYPES
from tmem.types import CorpusData, Gold, Message, Question


def message_record(m: Message) -> dict:
    record = {"kind": "message", "scope": m.scope, "id": m.id, "text": m.text, "timestamp": m.timestamp.isoformat(),
              "author": m.author, "role": m.role, "channel": m.channel, "topic": m.topic, "phase": m.phase,
              "stage": m.stage, "phase_order": m.phase_order, "phase_progress": m.phase_progress,
              "reply_to": m.reply_to}
    return {k: v for k, v in record.items() if v is not None}


def question_record(q: Question, g: Gold) -> dict:
    record = {"kind": "question", "scope": q.scope, "id": q.id, "text": q.text, "asking_user": q.asking_user,
              "type": q.type, "gold_answer": g.answer, "gold_evidence": [list(u) for u in g.evidence] or None,
              "superseded": g.superseded}
    return {k: v for k, v in record.items() if v is not None}


def write_jsonl(data: CorpusData, path: Path) -> None:
    """The project's JSONL format (tmem/corpora/jsonl.py): messages, then questions with their gold, then links."""
    golds = {(s, g.question_id): g for s, g in data.golds}
    lines = [message_record(m) for m in data.messages]
    lines += [question_record(q, golds[(q.scope, q.id)]) for q in data.questions]
    lines += [{"kind": "link", "scope": scope, "child_id": child, "parent_id": parent,
               **({"relation": rest[0]} if rest and rest[0] else {})} for scope, child, parent, *rest in data.links]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in lines)


def write_groupmembench(data: CorpusData, root: Path) -> None:
    """GroupMemBench's layout: data/final/<Domain>/synthetic_domain_channels_rolevariants_<Domain>.json (channel ->
    messages, content HTML-escaped) and questions/<Domain>/<type>.jsonl (+ tmem's evidence / superseded); the gold
    links, if any, as the typed-edge sidecar gold_edges.jsonl (tmem.corpora.gold_edges), each line's `origin` saying the
    generator planned it."""
    golds = {(s, g.question_id): g for s, g in data.golds}
    for scope in dict.fromkeys(m.scope for m in data.messages):
        channels: dict[str, list] = {}
        for m in (m for m in data.messages if m.scope == scope):
            channels.setdefault(m.channel, []).append(
                {"msg_node": m.id, "content": html.escape(m.text, quote=False), "author": m.author, "role": m.role,
                 "timestamp": m.timestamp.isoformat(), "reply_to": m.reply_to, "phase_name": m.phase,
                 "topic": m.topic, "stage": m.stage, "phase_order": m.phase_order, "phase_progress": m.phase_progress})
        out = root / "data" / "final" / scope / f"synthetic_domain_channels_rolevariants_{scope}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(channels, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        for qtype in QUESTION_TYPES:
            rows = [q for q in data.questions if q.scope == scope and q.type == qtype]
            lines = []
            for q in rows:
                g = golds[(scope, q.id)]
                record = {"id": q.id, "question": q.text, "answer": g.answer, "asking_user_id": q.asking_user,
                          "evidence": [list(u) for u in g.evidence], "superseded": g.superseded}
                lines.append(json.dumps({k: v for k, v in record.items() if v not in (None, [])}, ensure_ascii=False))
            qfile = root / "questions" / scope / f"{qtype}.jsonl"
            qfile.parent.mkdir(parents=True, exist_ok=True)
            qfile.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if data.links:
        edges = [{"scope": scope, "child": child, "parent": None if parent == child else parent, "relation": rest[0],
                  "origin": PLANNED} for scope, child, parent, *rest in data.links if rest and rest[0]]
        (root / "gold_edges.jsonl").write_text("".join(json.dumps(e) + "\n" for e in edges), encoding="utf-8")
