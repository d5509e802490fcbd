"""GroupMemBench (Yang et al., 2026) official layout -> the common representation (paper App. A.1, A.3).

Conversations: one JSON file per domain (officially `data/final/<Domain>/synthetic_domain_channels_rolevariants_
<Domain>.json`), an object keyed by channel whose values are time-ordered message lists
`{msg_node, content, author, role, timestamp, reply_to, phase_name, topic, stage?, phase_order?, phase_progress?,
is_noise, decision_type, ...}`. Questions: `questions/<Domain>/<type>.jsonl`, one `{id, question, answer,
asking_user_id}` per line. PATH is the dataset root (or any folder above the conversation files), or one
conversation file (its `questions/` folder is looked for up to three levels up).

Mapping (Table 4): each domain is one memory scope; id = msg_node, text = content with HTML entities unescaped,
author, role, channel = the channel key, topic, phase = phase_name, stage / phase_order / phase_progress when
present, reply_to. Generator annotations (is_noise, is_decision_point, decision_*, message_type, tone tags) are
not mapped: they are not conversation metadata, and `decision_change_metadata` never becomes gold.
Question type = the file name; gold answer = `answer`. tmem extensions (written by `tmem demo`): optional
`evidence` (a list of units, each a message id or a list of alternative ids) and `superseded`; evidence that names
an unknown message is an error.
"""
from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path

from tmem.corpora import splits
from tmem.corpora.common import (
    Files,
    Format,
    Imported,
    Progress,
    boundary,
    child,
    confined,
    expect,
    files_under,
    key_name,
    optional_number,
    optional_str,
    parse_json,
    parse_timestamp,
    read_json,
    read_text,
    required_str,
    stage_file,
)
from tmem.corpora.gold_edges import gold_links  # gold structuring edges: evaluation tables only
from tmem.corpora.jsonl import parse_evidence
from tmem.types import CorpusData, CorpusError, Gold, Message, Question


def domain_name(path: Path) -> str:
    """'.../Finance/synthetic_domain_channels_rolevariants_Finance.json' -> 'Finance'."""
    if path.stem.endswith("_" + path.parent.name) or path.stem == path.parent.name:
        return path.parent.name
    return path.stem.rsplit("_", 1)[-1]


def conversation_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    files = [p for p in files_under(root, "*.json")
             if "questions" not in p.relative_to(root).parts and p.name != splits.MARKER]
    official = [p for p in files if p.name.startswith("synthetic_domain_channels")]
    files = official or files
    if not files:
        raise CorpusError(f"{root}: no conversation files (*.json) found")
    return files


def questions_dir(root: Path) -> Path | None:
    """`questions/` beside the input or up to three folders above it, never above the input's boundary (an
    upload's staging folder)."""
    start = root if root.is_dir() else root.parent
    limit = boundary()
    for folder in [start, *list(start.parents)[:3]]:
        if limit is not None and not folder.absolute().is_relative_to(limit):
            break
        if (folder / "questions").is_dir():
            return folder / "questions"
    return None


def parse_message(record: object, scope: str, channel: str, at: str) -> Message:
    record = expect(record, dict, at, "message")
    return Message(
        id=required_str(record, "msg_node", at), scope=scope,
        text=html.unescape(required_str(record, "content", at)),
        timestamp=parse_timestamp(record.get("timestamp"), at),
        author=optional_str(record, "author", at), role=optional_str(record, "role", at), channel=channel,
        topic=optional_str(record, "topic", at), phase=optional_str(record, "phase_name", at),
        stage=optional_number(record, "stage", at), phase_order=optional_number(record, "phase_order", at),
        phase_progress=optional_number(record, "phase_progress", at, float),
        reply_to=optional_str(record, "reply_to", at))


def load_domain(path: Path, scope: str, progress: Progress) -> list[Message]:
    channels = expect(read_json(path), dict, str(path), "top level")
    messages, seen = [], {}
    for channel, records in channels.items():
        channel = key_name(channel, str(path), "channel")  # copied into every message of the channel
        for i, record in enumerate(expect(records, list, f"{path} [{channel}]", channel)):
            at = f"{path} [{channel} #{i}]"
            message = parse_message(record, scope, channel, at)
            if message.id in seen:
                raise CorpusError(f"{at}: field 'msg_node': duplicate message id {message.id!r} "
                                  f"(first at {seen[message.id]})")
            seen[message.id] = at
            messages.append(message)
        progress.add(len(records))
    messages.sort(key=lambda m: m.timestamp)  # stable: ties keep the channel order
    return messages


def load_question_file(path: Path, scope: str) -> tuple[list[Question], list[tuple[str, Gold]]]:
    questions, golds = [], []
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        at = f"{path}:{number}"
        record = expect(parse_json(line, str(path), number), dict, at, "line")
        qid = required_str(record, "id", at)
        questions.append(Question(qid, scope, required_str(record, "question", at),
                                  optional_str(record, "asking_user_id", at), path.stem))
        evidence = parse_evidence(record.get("evidence"), at)
        golds.append((scope, Gold(qid, optional_str(record, "answer", at), evidence,
                                  optional_str(record, "superseded", at))))
    return questions, golds


def load_questions(folder: Path, scope: str, message_ids: set[str]) -> tuple[list, list]:
    questions, golds, first = [], [], {}
    for path in sorted(folder.glob("*.jsonl")):
        qs, gs = load_question_file(path, scope)
        for q in qs:
            if q.id in first:
                raise CorpusError(f"{path}: field 'id': duplicate question id {q.id!r} (also in {first[q.id]})")
            first[q.id] = path.name
        for (_, gold), q in zip(gs, qs):
            unknown = sorted(gold.evidence_ids - message_ids)
            if unknown:
                raise CorpusError(f"{path} [{q.id}]: field 'evidence': unknown message id(s) {', '.join(unknown)}")
        questions += qs
        golds += gs
    return questions, golds


@confined(levels_up=3)
def load_groupmembench(path: str | Path) -> Imported:
    root = Path(path)
    qdir = questions_dir(root)
    messages, questions, golds, notes, domains = [], [], [], [], {}
    progress = Progress("groupmembench messages")
    for file in conversation_files(root):
        scope = domain_name(file)
        if scope in domains:
            raise CorpusError(f"{file}: a second conversation file for domain {scope!r} (first: {domains[scope]})")
        domains[scope] = file
        domain_messages = load_domain(file, scope, progress)
        ids = {m.id for m in domain_messages}
        dangling = [m.id for m in domain_messages if m.reply_to and m.reply_to not in ids]
        if dangling:
            notes.append(f"{scope}: {len(dangling)} reply_to link(s) name no message in the domain and were "
                         f"cleared (first: {dangling[0]})")
            domain_messages = [replace(m, reply_to=None) if m.reply_to and m.reply_to not in ids else m
                               for m in domain_messages]
        messages += domain_messages
        if qdir is not None and child(qdir, scope, str(file), "domain").is_dir():
            qs, gs = load_questions(qdir / scope, scope, ids)
            questions += qs
            golds += gs
        else:
            notes.append(f"{scope}: no questions/{scope}/ folder found beside or above {file} (up to three "
                         "levels), so the domain has no questions")
    progress.done()
    if qdir is not None:
        for folder in sorted(p for p in qdir.iterdir() if p.is_dir() and p.name not in domains):
            notes.append(f"{folder}: no conversation file for domain {folder.name!r}; its questions were not loaded")
    links, link_notes = gold_links(root, domains, messages)
    return Imported(CorpusData(messages, questions, golds, links), tuple(notes + link_notes), splits.read_split(root))


def place_groupmembench(files: Files, folder: Path, shown: dict[str, str]) -> Path:
    """Conversation `.json` files go to data/final/<Domain>/, question `<type>.jsonl` files to
    questions/<Domain>/ of the one conversation file's domain."""
    conversations = [(n, c) for n, c in files if n.endswith(".json")]
    questions = [(n, c) for n, c in files if n.endswith(".jsonl")]
    other = [n for n, _ in files if not n.endswith((".json", ".jsonl"))]
    if other:
        raise CorpusError(f"{', '.join(other)}: not a GroupMemBench conversation (.json) or question (.jsonl) file")
    if not conversations:
        raise CorpusError(f"{', '.join(n for n, _ in files)}: no conversation file (.json) in the upload")
    if questions and len(conversations) > 1:
        raise CorpusError(f"{', '.join(n for n, _ in conversations)}: question files can go with one conversation "
                          "file only; upload a .zip of the dataset folder for several domains")
    domain = ""
    for name, content in conversations:
        domain = domain_name(Path(name))
        stage_file(child(folder / "data" / "final", domain, name, "domain"), name, content, shown)
    for name, content in questions:
        stage_file(folder / "questions" / domain, name, content, shown)
    return folder


FORMAT = Format(
    "groupmembench", load_groupmembench,
    "a `.zip` of the dataset folder (`data/final/<Domain>/…json` and `questions/<Domain>/<type>.jsonl`), or one "
    "domain's conversation `.json` together with its question `<type>.jsonl` files. A conversation file alone "
    "imports without questions.", ("json", "jsonl", "zip"), place_groupmembench)
