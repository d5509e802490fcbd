"""EverMemBench (Hu et al., 2026; EverMemBench-Dynamic layout) -> the common representation (paper App. A.2-A.3).

Layout: PATH holds `profiles.json` and one folder per topic (`01/`, `02/`, ...), each with `dialogue.json` and
`qa_<topic>.json` (the older `dataset/<id>/dialogue_en.json` + `qa_<id>.json` layout is read the same way).
`dialogue.json` maps date -> group -> list of messages `{speaker, time, dialogue, message_index}` (null = no
messages), optionally under a top-level "dialogues" key, or is a list of `{date, dialogues}` rows. The QA file is
a list (or `{"qars": [...]}`) of `{id, Q, A, R, options}`: R = reference entries `{date, group, message_index}`,
options = `{"A": ..., "B": ...}` for multiple choice, else null. `profiles.json` is a list of participant
objects (or an object keyed by name) joined to messages by speaker name.

Mapping (App. A.3, "dated topic-group dialogue batches"): each topic folder is a memory scope; channel = the
group; topic = "<topic>/<group>", so the topic-wise stages work inside one topic-group stream and Eq. 4 orders
within the same topic and group; author = speaker; role = the profile's role (`role`, `occupation`, `position`,
`title`, or `identity_layer.occupation`); message id = "<date>/<group>/<message_index>". No phase, stage or
reply-to exists in the source, so they stay empty. Question text = Q (plus its options, which belong to the
question); gold answer = A (an option letter is expanded to "B. text"); R references are gold evidence only,
one unit per reference; references that do not resolve are reported, never silently dropped.
Question type = the record's `type`/`question_type` when present, else multiple_choice / open_ended.
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tmem.corpora.common import (
    Files,
    Format,
    Imported,
    Progress,
    boundary,
    bounded,
    child,
    confined,
    expect,
    files_under,
    key_name,
    optional_str,
    parse_timestamp,
    read_json,
    required_str,
    stage_file,
)
from tmem.types import CorpusData, CorpusError, Gold, Message, Question

ROLE_FIELDS = ("role", "occupation", "position", "title")
MAX_OPTIONS = 100  # choices of one multiple-choice question (the benchmark has four)


def load_profiles(path: Path) -> dict[str, str]:
    """{speaker name: role} from profiles.json; participants without a role are left out (role stays empty)."""
    raw = read_json(path)
    items = list(raw.items()) if isinstance(raw, dict) else list(enumerate(expect(raw, list, str(path), "top level")))
    roles = {}
    for key, item in items:
        at = f"{path} [{key_name(key, str(path), 'name') if isinstance(key, str) else key}]"
        item = expect(item, dict, at, "profile")
        identity = item.get("identity_layer") if isinstance(item.get("identity_layer"), dict) else {}
        name = (optional_str(item, "name", at) or optional_str(item, "speaker", at)
                or optional_str(identity, "name", at) or (key if isinstance(key, str) else None))
        if not name:
            raise CorpusError(f"{at}: required field 'name' is missing")
        role = next((r for f in ROLE_FIELDS if (r := optional_str(item, f, at))), None)
        role = role or optional_str(identity, "occupation", at)
        if role:
            roles[name] = role
    return roles


def day_batches(raw: object, path: Path) -> list[tuple[str, dict]]:
    """[(date, {group: messages})] from any of the three dialogue layouts."""
    if isinstance(raw, list):
        rows = [expect(r, dict, f"{path} [row {i}]", "row") for i, r in enumerate(raw)]
        return [(required_str(r, "date", f"{path} [row {i}]"), expect(r.get("dialogues"), dict,
                 f"{path} [row {i}]", "dialogues")) for i, r in enumerate(rows)]
    raw = expect(raw, dict, str(path), "top level")
    days = expect(raw["dialogues"], dict, str(path), "dialogues") if "dialogues" in raw else raw
    return [(key_name(date, str(path), "date"), expect(groups, dict, f"{path} [{date:.60}]", "date"))
            for date, groups in days.items()]


def message_time(value: object, date: str, at: str) -> datetime:
    """'2025-01-09 09:32:15' as is; a bare '09:32[:15]' on the batch's date."""
    if isinstance(value, str) and len(value.strip()) <= 8 and ":" in value:
        return parse_timestamp(f"{date}T{value.strip()}", at, "time")
    return parse_timestamp(value, at, "time")


def load_dialogues(path: Path, scope: str, roles: dict[str, str], progress: Progress) -> list[Message]:
    messages, seen = [], {}
    for date, groups in day_batches(read_json(path), path):
        for group, batch in groups.items():
            group = key_name(group, f"{path} [{date}]", "group")  # in every message's id, channel and topic
            batch = expect(batch if batch is not None else [], list, f"{path} [{date}]", group)
            for i, record in enumerate(batch):
                at = f"{path} [{date} / {group} #{i}]"
                record = expect(record, dict, at, "message")
                index = required_str(record, "message_index", at)
                mid = f"{date}/{group}/{index}"
                if mid in seen:
                    raise CorpusError(f"{at}: field 'message_index': duplicate {index!r} in {date} / {group}")
                seen[mid] = at
                speaker = required_str(record, "speaker", at)
                messages.append(Message(id=mid, scope=scope, text=required_str(record, "dialogue", at),
                                        timestamp=message_time(record.get("time"), date, at), author=speaker,
                                        role=roles.get(speaker), channel=group, topic=f"{scope}/{group}"))
            progress.add(len(batch))
    messages.sort(key=lambda m: m.timestamp)
    return messages


def question_text(record: dict, at: str) -> tuple[str, dict]:
    options = record.get("options") or {}
    options = expect(options, dict, at, "options")
    text = required_str(record, "Q", at)
    if options:
        if len(options) > MAX_OPTIONS:
            raise CorpusError(f"{at}: field 'options': {len(options):,} options, more than {MAX_OPTIONS}; refused")
        for key in options:
            bounded(key, at, "options")
        text += "\nOptions: " + "; ".join(f"{k}. {_option_text(v, at)}" for k, v in sorted(options.items()))
    return bounded(text, at, "Q"), options


def _option_text(value: object, at: str) -> str:
    """An option's text: a string or a number, bounded like the question (printed inside it)."""
    if isinstance(value, (dict, list)):
        raise CorpusError(f"{at}: field 'options': an option must be a string, got {type(value).__name__}")
    return bounded(str(value) if not isinstance(value, str) else value, at, "Q")


def resolve_references(refs: object, ids: set[str], at: str, notes: list[str]) -> tuple[tuple[str, ...], ...]:
    units = []
    for j, ref in enumerate(expect(refs if refs is not None else [], list, at, "R")):
        mid = None
        if isinstance(ref, dict) and {"date", "group", "message_index"} <= ref.keys():
            mid = f"{ref['date']}/{ref['group']}/{ref['message_index']}"
        if mid in ids:
            units.append((mid,))
        else:
            notes.append(f"{at}: R[{j}] does not resolve to a message, left out of gold evidence: {ref!r:.120}")
    return tuple(units)


def load_qa(path: Path, scope: str, ids: set[str], notes: list[str],
            seen: dict[str, str] | None = None) -> tuple[list, list]:
    """Questions and gold of one QA file; `seen` ({question id: where}) spans the topic's QA files."""
    raw = read_json(path)
    items = expect(raw.get("qars") if isinstance(raw, dict) else raw, list, str(path), "qars")
    questions, golds = [], []
    seen = {} if seen is None else seen
    for i, record in enumerate(items):
        at = f"{path} [qar {i}]"
        record = expect(record, dict, at, "qar")
        qid = required_str(record, "id", at)
        if qid in seen:
            raise CorpusError(f"{at}: field 'id': duplicate question id {qid!r} (first at {seen[qid]})")
        seen[qid] = at
        text, options = question_text(record, at)
        qtype = (optional_str(record, "type", at) or optional_str(record, "question_type", at)
                 or ("multiple_choice" if options else "open_ended"))
        answer = required_str(record, "A", at)
        if answer.strip().upper() in options:
            answer = f"{answer.strip().upper()}. {options[answer.strip().upper()]}"
        questions.append(Question(qid, scope, text, None, qtype))
        golds.append((scope, Gold(qid, answer, resolve_references(record.get("R"), ids, at, notes))))
    return questions, golds


def profiles_file(root: Path) -> Path | None:
    """profiles.json in the input folder or up to two folders above it, never above the input's boundary."""
    limit = boundary()
    for folder in [root, *root.parents[:2]]:
        if limit is not None and not folder.absolute().is_relative_to(limit):
            break
        if (folder / "profiles.json").is_file():
            return folder / "profiles.json"
    return None


@confined(levels_up=2)
def load_evermembench(path: str | Path) -> Imported:
    root = Path(path)
    dialogues = [root] if root.is_file() else files_under(root, "dialogue*.json")
    if not dialogues:
        raise CorpusError(f"{root}: no dialogue*.json files found")
    profile_file = profiles_file(root)
    roles = load_profiles(profile_file) if profile_file else {}
    notes = [] if profile_file else ["profiles.json not found: roles are left empty"]
    messages, questions, golds, scopes = [], [], [], set()
    progress = Progress("evermembench messages")
    for file in dialogues:
        scope = file.parent.name
        if scope in scopes:
            raise CorpusError(f"{file}: a second dialogue file for topic {scope!r}")
        scopes.add(scope)
        topic_messages = load_dialogues(file, scope, roles, progress)
        messages += topic_messages
        seen: dict[str, str] = {}
        for qa in sorted(file.parent.glob("qa_*.json")):
            qs, gs = load_qa(qa, scope, {m.id for m in topic_messages}, notes, seen)
            questions += qs
            golds += gs
    progress.done()
    return Imported(CorpusData(messages, questions, golds), tuple(notes))


def place_evermembench(files: Files, folder: Path, shown: dict[str, str]) -> Path:
    """profiles.json at the root, the dialogue and QA files in one topic folder named from `qa_<topic>.json`
    (without a QA file: from the dialogue file's name)."""
    dialogues = [n for n, _ in files if n.startswith("dialogue") and n.endswith(".json")]
    qas = [n for n, _ in files if n.startswith("qa_") and n.endswith(".json")]
    other = [n for n, _ in files if n not in dialogues and n not in qas and n != "profiles.json"]
    if other:
        raise CorpusError(f"{', '.join(other)}: not an EverMemBench file (dialogue*.json, qa_<topic>.json, "
                          "profiles.json)")
    if len(dialogues) != 1:
        raise CorpusError(f"{', '.join(dialogues) or 'no dialogue*.json'}: plain files take one topic's dialogue "
                          "file; upload a .zip of the dataset folder for several topics")
    topics = sorted({n.removeprefix("qa_").removesuffix(".json") for n in qas})
    if len(topics) > 1:
        raise CorpusError(f"{', '.join(qas)}: QA files of several topics; upload a .zip of the dataset folder")
    topic = topics[0] if topics else Path(dialogues[0]).stem
    topic_folder = child(folder, topic, qas[0] if qas else dialogues[0], "topic")
    for name, content in files:
        stage_file(folder if name == "profiles.json" else topic_folder, name, content, shown)
    return folder


FORMAT = Format(
    "evermembench", load_evermembench,
    "a `.zip` of the dataset folder (`profiles.json` and one folder per topic with `dialogue.json` and "
    "`qa_<topic>.json`), or one topic's `dialogue.json` with its `qa_<topic>.json` and `profiles.json` (the "
    "topic is named from the QA file).", ("json", "zip"), place_evermembench)
