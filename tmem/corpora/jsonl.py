"""The project's own JSONL format: one JSON object per line, in the common representation (paper Table 4).

    {"kind": "message", "scope": "s1", "id": "m1", "text": "...", "timestamp": "2025-07-01T10:00:00",
     "author": "User_1", "role": "PM", "channel": "#launch", "topic": "launch date", "phase": "Planning",
     "stage": 1, "phase_order": 2, "phase_progress": 0.5, "reply_to": "m0"}
    {"kind": "question", "scope": "s1", "id": "q1", "text": "...", "asking_user": "User_2", "type": "temporal",
     "gold_answer": "...", "gold_evidence": [["m1"], ["m7", "m8"]], "superseded": "..."}
    {"kind": "link", "scope": "s1", "child_id": "m2", "parent_id": "m1"}

`kind` defaults to "message"; `scope` defaults to "default". Only id, text and timestamp are required for a
message; every other field may be omitted (left empty, never invented). `gold_evidence` is a list of evidence
units, each a list of message ids any one of which establishes the unit (a bare id is a one-message unit).
Gold fields go to evaluation tables only. Blank lines and lines starting with `#` are skipped.

References are checked like the other importers check theirs: a question or link in a scope with no messages, gold
evidence or a link naming an unknown message is an error (gold data that points nowhere would skew evaluation);
a `reply_to` naming no message of its scope is cleared and reported in the notes (conversation metadata, as in
groupmembench and slack). Files over the import limit are refused; large files print a progress line on stderr.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tmem.corpora.common import (
    Imported,
    Progress,
    confined,
    open_text,
    optional_number,
    optional_str,
    parse_json,
    parse_timestamp,
    required_str,
    where,
)
from tmem.types import CorpusData, CorpusError, Gold, Message, Question

DEFAULT_SCOPE = "default"


def parse_message(record: dict, at: str) -> Message:
    return Message(
        id=required_str(record, "id", at),
        scope=optional_str(record, "scope", at) or DEFAULT_SCOPE,
        text=required_str(record, "text", at),
        timestamp=parse_timestamp(record.get("timestamp"), at),
        author=optional_str(record, "author", at),
        role=optional_str(record, "role", at),
        channel=optional_str(record, "channel", at),
        topic=optional_str(record, "topic", at),
        phase=optional_str(record, "phase", at),
        stage=optional_number(record, "stage", at),
        phase_order=optional_number(record, "phase_order", at),
        phase_progress=optional_number(record, "phase_progress", at, float),
        reply_to=optional_str(record, "reply_to", at),
    )


def parse_evidence(value: object, at: str) -> tuple[tuple[str, ...], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise CorpusError(f"{at}: field 'gold_evidence' must be a list of units")
    units = []
    for unit in value:
        ids = [unit] if isinstance(unit, str) else unit
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
            raise CorpusError(f"{at}: field 'gold_evidence': each unit must be a message id or a list of ids")
        units.append(tuple(ids))
    return tuple(units)


def parse_jsonl_lines(lines, source: str) -> Imported:
    """Parse JSONL lines (`source` names them in errors): -> the corpus and its notes."""
    messages: list[Message] = []
    questions: list[Question] = []
    golds: list[tuple[str, Gold]] = []
    links: list[tuple[str, str, str, str]] = []  # (at, scope, child, parent)
    seen_messages: dict[tuple[str, str], int] = {}
    seen_questions: dict[tuple[str, str], int] = {}
    evidence_refs: list[tuple[str, str, str]] = []  # (at, scope, id)
    progress = Progress("jsonl messages")
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        at = where(source, number)
        record = parse_json(line, source, number)
        if not isinstance(record, dict):
            raise CorpusError(f"{at}: each line must be a JSON object")
        kind = record.get("kind", "message")
        if kind == "message":
            message = parse_message(record, at)
            key = (message.scope, message.id)
            if key in seen_messages:
                raise CorpusError(f"{at}: field 'id': duplicate message id {message.id!r} "
                                  f"(first on line {seen_messages[key]})")
            seen_messages[key] = number
            messages.append(message)
            progress.add()
        elif kind == "question":
            scope = optional_str(record, "scope", at) or DEFAULT_SCOPE
            question = Question(required_str(record, "id", at), scope, required_str(record, "text", at),
                                optional_str(record, "asking_user", at), optional_str(record, "type", at))
            key = (scope, question.id)
            if key in seen_questions:
                raise CorpusError(f"{at}: field 'id': duplicate question id {question.id!r} "
                                  f"(first on line {seen_questions[key]})")
            seen_questions[key] = number
            questions.append(question)
            evidence = parse_evidence(record.get("gold_evidence"), at)
            evidence_refs += [(at, scope, mid) for unit in evidence for mid in unit]
            answer = optional_str(record, "gold_answer", at)
            if answer is not None or evidence:
                golds.append((scope, Gold(question.id, answer, evidence, optional_str(record, "superseded", at))))
        elif kind == "link":
            scope = optional_str(record, "scope", at) or DEFAULT_SCOPE
            links.append((at, scope, required_str(record, "child_id", at), required_str(record, "parent_id", at)))
        else:
            raise CorpusError(f"{at}: field 'kind' must be message, question or link, got {kind!r}")
    progress.done()
    if not messages:
        raise CorpusError(f"{source}: no messages found")
    check_references(source, questions, seen_questions, seen_messages, evidence_refs, links)
    messages, notes = clear_dangling_replies(messages, seen_messages)
    return Imported(CorpusData(messages, questions, golds, list(dict.fromkeys(link[1:] for link in links))),
                    tuple(notes))


def check_references(source: str, questions: list[Question], seen_questions: dict, seen_messages: dict,
                     evidence_refs: list[tuple[str, str, str]], links: list[tuple[str, str, str, str]]) -> None:
    """Questions and links must name a scope with messages; gold evidence and links must name known messages."""
    scopes = {scope for scope, _ in seen_messages}
    for question in questions:
        if question.scope not in scopes:
            raise CorpusError(f"{source}:{seen_questions[(question.scope, question.id)]}: field 'scope': "
                              f"question {question.id!r} names scope {question.scope!r}, which has no messages")
    for at, scope, mid in evidence_refs:
        if (scope, mid) not in seen_messages:
            raise CorpusError(f"{at}: field 'gold_evidence': unknown message id {mid!r} in scope {scope!r}")
    for at, scope, child, parent in links:
        if scope not in scopes:
            raise CorpusError(f"{at}: field 'scope': the link names scope {scope!r}, which has no messages")
        for field, mid in (("child_id", child), ("parent_id", parent)):
            if (scope, mid) not in seen_messages:
                raise CorpusError(f"{at}: field {field!r}: unknown message id {mid!r} in scope {scope!r}")


def clear_dangling_replies(messages: list[Message], seen: dict[tuple[str, str], int]) -> tuple[list[Message], list]:
    """A reply_to naming no message of its scope is cleared and reported (as groupmembench and slack do)."""
    dangling = [m for m in messages if m.reply_to and (m.scope, m.reply_to) not in seen]
    if not dangling:
        return messages, []
    first = dangling[0]
    note = (f"{len(dangling)} reply_to link(s) name no message in their scope and were cleared (first: message "
            f"{first.id!r} on line {seen[(first.scope, first.id)]}, reply_to {first.reply_to!r})")
    gone = {(m.scope, m.id) for m in dangling}
    return [replace(m, reply_to=None) if (m.scope, m.id) in gone else m for m in messages], [note]


@confined()
def load_jsonl(path: str | Path) -> Imported:
    """Import one JSONL file: -> the corpus and its notes (cleared reply_to links)."""
    path = Path(path)
    try:
        with open_text(path) as handle:
            return parse_jsonl_lines(handle, str(path))
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def load_jsonl_lines(lines, source: str) -> CorpusData:
    """The corpus of JSONL lines, without the notes (see `parse_jsonl_lines`)."""
    return parse_jsonl_lines(lines, source).data


def load_jsonl_file(path: str | Path) -> CorpusData:
    """The corpus of one JSONL file, without the notes (see `load_jsonl`)."""
    return load_jsonl(path).data
