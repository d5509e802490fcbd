"""The project's own JSONL format: one JSON object per line, in the common representation (paper Table 4).

    {"kind": "message", "scope": "s1", "id": "m1", "text": "...", "timestamp": "2025-07-01T10:00:00",
     "author": "User_1", "role": "PM", "channel": "#launch", "topic": "launch date", "phase": "Planning",
     "stage": 1, "phase_order": 2, "phase_progress": 0.5, "reply_to": "m0"}
    {"kind": "question", "scope": "s1", "id": "q1", "text": "...", "asking_user": "User_2", "type": "temporal",
     "gold_answer": "...", "gold_evidence": [["m1"], ["m7", "m8"]], "superseded": "..."}
    {"kind": "link", "scope": "s1", "child_id": "m2", "parent_id": "m1", "relation": "UPDATE"}  (relation optional)

`kind` defaults to "message"; `scope` defaults to "default". Only id, text and timestamp are required for a
message; every other field may be omitted (left empty, never invented). `gold_evidence` is a list of evidence
units, each a list of message ids any one of which establishes the unit (a bare id is a one-message unit).
Gold fields go to evaluation tables only. Blank lines and lines starting with `#` are skipped.

References are checked like the other importers check theirs: a question or link in a scope with no messages, gold
evidence or a link naming an unknown message is an error (gold data that points nowhere would skew evaluation);
a `reply_to` naming no message of its scope is cleared and reported in the notes (conversation metadata, as in
groupmembench and slack). Files over the import limit are refused; large files print a progress line on stderr.

Two readers, one result: `load_jsonl` lets DuckDB parse the plain message lines of a file in bulk
(tmem/store/jsonl.py) and reads every other line here (`Reader`, line by line, as `parse_jsonl_lines` reads a whole
file); a file DuckDB would read differently, or any problem, sends the whole file to the Python reader, which names
the first bad line and field. Messages come back as typed columns (`MessageColumns`), not a million objects.
"""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tmem import limits
from tmem.corpora.common import (
    Format,
    Imported,
    Progress,
    bounded,
    check_size,
    confined,
    open_text,
    optional_number,
    optional_str,
    parse_json,
    parse_timestamp,
    place_single,
    required_str,
    where,
)
from tmem.store.jsonl import lines_at, read_plain_messages
from tmem.store.message_columns import FIELDS, MessageColumns
from tmem.types import EXPAND, ROOT, UPDATE, CorpusData, CorpusError, Gold, Message, Question

DEFAULT_SCOPE = "default"
# who wrote an injected revision-noise chain (tmem.evaluation.noise_chains): on its messages and gold edges; the
# import counts the edges per writer in a note (`NOISE_NOTE`), which `recall` and `run` print beside chain recall
NOISE_WRITER = "noise_writer"
NOISE_NOTE = "noise chains: "
LINK_RELATIONS = (UPDATE, EXPAND, ROOT)  # a typed gold edge (Sec. 4.3); without one a link is a reply link


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
        for i in ids:
            bounded(i, at, "gold_evidence")
        units.append(tuple(ids))
    return tuple(units)


def plain_message(record: dict, default_scope: str = DEFAULT_SCOPE) -> tuple | None:
    """The row (`MessageColumns` field order) of a message record whose every field is of its plain JSON type
    (strings, ints, a float progress, an ISO timestamp without a zone), or None for anything else: `parse_message`
    then reads it (integers in string fields, numeric or zoned timestamps) or names the bad field. For the records
    it accepts it returns exactly what `parse_message` would, at a fraction of the cost (a million lines)."""
    get = record.get
    mid, scope, text, stamp = get("id"), get("scope"), get("text"), get("timestamp")
    if type(mid) is not str or not mid or type(text) is not str or not text or type(stamp) is not str:
        return None
    if scope is None or scope == "":
        scope = default_scope
    elif type(scope) is not str or len(scope) > _NAME:
        return None
    if len(mid) > _NAME:
        return None
    try:
        timestamp = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if timestamp.tzinfo is not None or not limits.time_in_range(timestamp):
        return None
    row = [mid, scope, text, timestamp]
    for field in _PLAIN_STRINGS:
        value = get(field)
        if value is not None and (type(value) is not str or len(value) > _NAME):
            return None
        row.append(value or None)
    for field in ("stage", "phase_order"):
        value = get(field)
        if value is not None and (type(value) is not int or not _INT_LOW <= value <= _INT_HIGH):
            return None
        row.append(value)
    progress, reply_to = get("phase_progress"), get("reply_to")
    if progress is not None and (type(progress) is not float or not limits.finite(progress)):
        return None
    if reply_to is not None and (type(reply_to) is not str or len(reply_to) > _NAME):
        return None
    return (*row, progress, reply_to or None)


_PLAIN_STRINGS = ("author", "role", "channel", "topic", "phase")
_INT_LOW, _INT_HIGH = limits.INT_FIELD_RANGE
_NAME = limits.MAX_NAME_CHARS


class Reader:
    """One pass over JSONL lines in line order: message rows (`FIELDS` order, repeated metadata strings shared),
    questions, gold and links; `check_duplicates` names a repeated message id at its line."""

    def __init__(self, source: str, check_duplicates: bool = True):
        self.source, self.rows, self.lines = source, [], []  # lines: the line number of each row
        self.shared: dict[str, str] = {}  # one object per distinct scope / author / role / channel / topic / phase
        self.seen: dict[str, dict[str, int]] | None = {} if check_duplicates else None  # scope -> id -> line
        self.questions: list[Question] = []
        self.golds: list[tuple[str, Gold]] = []
        self.links: list[tuple] = []  # (at, scope, child, parent[, relation])
        self.seen_questions: dict[tuple[str, str], int] = {}
        self.evidence_refs: list[tuple[str, str, str]] = []  # (at, scope, id)
        self.noise_writers: dict[str, int] = {}  # NOISE_WRITER of the links -> how many
        self.progress = Progress("jsonl messages")

    def read(self, number: int, line: str) -> None:
        if not line.strip() or line.lstrip().startswith("#"):
            return
        record = parse_json(line, self.source, number)
        if not isinstance(record, dict):
            raise CorpusError(f"{where(self.source, number)}: each line must be a JSON object")
        if "\\ud" in line.lower():  # an escaped surrogate: JSON allows half a pair ("\ud800"), text does not
            check_unicode(record, where(self.source, number))
        kind = record.get("kind", "message")
        if kind == "message":
            self.message(number, record)
        elif kind == "question":
            self.question(number, record, where(self.source, number))
        elif kind == "link":
            at = where(self.source, number)
            scope = optional_str(record, "scope", at) or DEFAULT_SCOPE
            link = (at, scope, required_str(record, "child_id", at), required_str(record, "parent_id", at))
            relation = optional_str(record, "relation", at)
            if relation is not None and relation not in LINK_RELATIONS:
                raise CorpusError(f"{at}: field 'relation' must be one of {', '.join(LINK_RELATIONS)}, "
                                  f"got {relation!r}")
            self.links.append(link + ((relation,) if relation else ()))
            if writer := optional_str(record, NOISE_WRITER, at):
                self.noise_writers[writer] = self.noise_writers.get(writer, 0) + 1
        else:
            raise CorpusError(f"{where(self.source, number)}: field 'kind' must be message, question or link, "
                              f"got {kind!r}")

    def message(self, number: int, record: dict) -> None:
        row = plain_message(record) or astuple_shallow(parse_message(record, where(self.source, number)))
        share = self.shared.setdefault
        mid, scope, text, timestamp, *meta, stage, order, fraction, reply = row
        scope = share(scope, scope)
        if self.seen is not None:
            ids = self.seen.get(scope)
            if ids is None:
                ids = self.seen[scope] = {}
            if mid in ids:
                raise CorpusError(f"{where(self.source, number)}: field 'id': duplicate message id {mid!r} "
                                  f"(first on line {ids[mid]})")
            ids[mid] = number
        self.rows.append((mid, scope, text, timestamp, *[v if v is None else share(v, v) for v in meta], stage, order,
                          fraction, reply))
        self.lines.append(number)
        self.progress.add()

    def question(self, number: int, record: dict, at: str) -> None:
        scope = optional_str(record, "scope", at) or DEFAULT_SCOPE
        question = Question(required_str(record, "id", at), scope, required_str(record, "text", at),
                            optional_str(record, "asking_user", at), optional_str(record, "type", at))
        key = (scope, question.id)
        if key in self.seen_questions:
            raise CorpusError(f"{at}: field 'id': duplicate question id {question.id!r} "
                              f"(first on line {self.seen_questions[key]})")
        self.seen_questions[key] = number
        self.questions.append(question)
        evidence = parse_evidence(record.get("gold_evidence"), at)
        self.evidence_refs += [(at, scope, mid) for unit in evidence for mid in unit]
        answer = optional_str(record, "gold_answer", at)
        if answer is not None or evidence:
            self.golds.append((scope, Gold(question.id, answer, evidence, optional_str(record, "superseded", at))))

    def python_rows(self) -> pa.Table:
        """The rows read here as a table: `line`, then the `Message` fields."""
        table = MessageColumns.from_rows(self.rows).table
        return table.add_column(0, "line", pa.array(self.lines, pa.int64()))

    def finish(self, rows: pa.Table) -> Imported:
        """The corpus of `rows` (`line` + fields, in line order) and what was read here, references checked."""
        self.progress.done()
        if not rows.num_rows:
            raise CorpusError(f"{self.source}: no messages found")
        check_references(self.source, self.questions, self.seen_questions, rows, self.evidence_refs, self.links)
        rows, notes = clear_dangling_replies(rows)
        notes = [*noise_notes(self.noise_writers), *notes]
        return Imported(CorpusData(MessageColumns(rows), self.questions, self.golds,
                                   list(dict.fromkeys(link[1:] for link in self.links))), tuple(notes))


def noise_notes(writers: dict[str, int]) -> list[str]:
    """One note per writer of injected noise chains: how many of the gold edges it wrote the text of."""
    return [f"{NOISE_NOTE}{n} injected gold UPDATE edge(s) whose text was written by {writer}"
            for writer, n in writers.items()]


def chain_writers(notes: str | None) -> list[str]:
    """The noise-chain notes among a corpus's stored notes (Store.corpus_info): who wrote its injected chains."""
    return [line for line in (notes or "").split("\n") if line.startswith(NOISE_NOTE)]


def check_unicode(record: dict, at: str) -> None:
    """Refuse a field whose value holds a lone surrogate (it cannot be stored or shown as text)."""
    for field, value in record.items():
        try:
            json.dumps([field, value], ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise CorpusError(f"{at}: field {field!r}: not valid Unicode text (a lone surrogate such as \\ud800)")\
                from None


def astuple_shallow(message: Message) -> tuple:
    return tuple(getattr(message, name) for name in FIELDS)


def parse_jsonl_lines(lines, source: str) -> Imported:
    """Parse JSONL lines (`source` names them in errors) in Python: -> the corpus and its notes."""
    reader = Reader(source)
    for number, line in enumerate(lines, start=1):
        reader.read(number, line)
    return reader.finish(reader.python_rows())


def read_in_bulk(path: Path) -> Imported | None:
    """The corpus of a JSONL file with its plain message lines parsed in DuckDB (tmem/store/jsonl.py) and the rest
    here, or None when the Python reader must read the file from the start: DuckDB could not split it as Python
    does, or a line is bad or an id repeated (the Python reader names the first problem, at its line)."""
    bulk = read_plain_messages(path, DEFAULT_SCOPE)
    if bulk is None:
        return None
    plain, others = bulk
    reader = Reader(str(path), check_duplicates=False)
    reader.progress.add(plain.num_rows)
    try:
        for number, line in lines_at(path, others):
            reader.read(number, line)
    except CorpusError:
        return None
    rows = plain
    if reader.rows:
        rows = pa.concat_tables([plain, reader.python_rows()]).sort_by("line")
    if rows.group_by(["scope", "id"]).aggregate([]).num_rows != rows.num_rows:
        return None  # a repeated message id
    return reader.finish(rows)


def known_pairs(rows: pa.Table, wanted: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (scope, message id) pairs of `wanted` that name a message of `rows`."""
    if not wanted:
        return set()
    scopes, ids = zip(*wanted)
    asked = pa.table({"scope": pa.array(scopes, pa.string()), "id": pa.array(ids, pa.string())})
    found = rows.select(["scope", "id"]).join(asked, keys=["scope", "id"], join_type="left semi")  # hashes `asked`
    return set(zip(found.column("scope").to_pylist(), found.column("id").to_pylist()))


def check_references(source: str, questions: list[Question], seen_questions: dict, rows: pa.Table,
                     evidence_refs: list[tuple[str, str, str]], links: list[tuple]) -> None:
    """Questions and links must name a scope with messages; gold evidence and links must name known messages."""
    scopes = set(pc.unique(rows.column("scope")).to_pylist())
    known = known_pairs(rows, {(s, mid) for _, s, mid in evidence_refs}
                        | {(s, mid) for _, s, child, parent, *_ in links for mid in (child, parent)})
    for question in questions:
        if question.scope not in scopes:
            raise CorpusError(f"{source}:{seen_questions[(question.scope, question.id)]}: field 'scope': "
                              f"question {question.id!r} names scope {question.scope!r}, which has no messages")
    for at, scope, mid in evidence_refs:
        if (scope, mid) not in known:
            raise CorpusError(f"{at}: field 'gold_evidence': unknown message id {mid!r} in scope {scope!r}")
    for at, scope, child, parent, *_ in links:
        if scope not in scopes:
            raise CorpusError(f"{at}: field 'scope': the link names scope {scope!r}, which has no messages")
        for field, mid in (("child_id", child), ("parent_id", parent)):
            if (scope, mid) not in known:
                raise CorpusError(f"{at}: field {field!r}: unknown message id {mid!r} in scope {scope!r}")


def clear_dangling_replies(rows: pa.Table) -> tuple[pa.Table, list]:
    """A reply_to naming no message of its scope is cleared and reported (as groupmembench and slack do)."""
    replies = rows.select(["scope", "reply_to"]).append_column("row", pa.array(range(rows.num_rows), pa.int64()))
    replies = replies.filter(pc.is_valid(replies.column("reply_to")))
    if not replies.num_rows:
        return rows, []
    dangling = replies.join(rows.select(["scope", "id"]), keys=["scope", "reply_to"], right_keys=["scope", "id"],
                            join_type="left anti")
    if not dangling.num_rows:
        return rows, []
    gone = sorted(dangling.column("row").to_pylist())
    first = rows.slice(gone[0], 1).to_pylist()[0]
    note = (f"{len(gone)} reply_to link(s) name no message in their scope and were cleared (first: message "
            f"{first['id']!r} on line {first['line']}, reply_to {first['reply_to']!r})")
    mask = np.zeros(rows.num_rows, dtype=bool)
    mask[gone] = True
    column = rows.column("reply_to")
    cleared = pc.if_else(pa.array(mask), pa.nulls(rows.num_rows, pa.string()), column)
    return rows.set_column(rows.schema.get_field_index("reply_to"), "reply_to", cleared), [note]


@confined()
def load_jsonl(path: str | Path) -> Imported:
    """Import one JSONL file: -> the corpus and its notes (cleared reply_to links)."""
    path = Path(path)
    check_size(path)
    imported = read_in_bulk(path)
    if imported is not None:
        return imported
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


FORMAT = Format(
    "jsonl", load_jsonl, "one `.jsonl` file in the project's format (or a `.zip` holding one).", ("jsonl", "zip"),
    place_single, zip_member="*.jsonl", corpus_from_file=True)
