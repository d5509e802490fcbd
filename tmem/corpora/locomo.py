"""LoCoMo (Maharana et al., ACL 2024; `locomo10.json`) -> the common representation (paper Sec. 3, App. A.3).

Layout: a JSON list of conversations `{sample_id, conversation: {speaker_a, speaker_b, session_<n>_date_time,
session_<n>: [{speaker, dia_id, text, blip_caption?, ...}]}, qa: [{question, answer, evidence, category,
adversarial_answer?}]}`. Mapping decisions (documented in docs/corpora.md):

- each conversation (`sample_id`) is one memory scope; message id = `dia_id` ("D3:5"); author = `speaker`;
- text = `clean_text` if the turn has one, else `text`; a shared image's `blip_caption` is appended as
  " [shared image: ...]" (LoCoMo's own baselines show the caption the same way);
- time: LoCoMo dates sessions, not turns. A turn's own `date_time` is used when present (LoCoMo-family files);
  otherwise turn i (0-based) of a session gets session time + i minutes — deterministic, and it keeps turn order;
- role, channel, topic, phase, stage and reply_to stay empty: LoCoMo has none of them (a session is a time slice,
  not a channel);
- `evidence` ids become gold evidence, one unit per id (App. A.4). Malformed ids are repaired where the intent is
  unambiguous ("D8:6; D9:17" -> two ids, "D:11:26" -> "D11:26", "D30:05" -> "D30:5"); ids that still do not
  resolve are reported in the notes and left out of the gold evidence, never silently;
- categories: 1 multi_hop, 2 temporal, 3 open_domain, 4 single_hop, 5 adversarial. Category 5 gold answer is the
  abstention sentence; its `adversarial_answer` (the answer the false premise invites) is not gold and not stored.

LoCoMo-family variants (released files that reuse the layout): a file may hold one conversation object instead of
a list; its sessions may sit at the top level instead of under `conversation`; without `sample_id` the scope is
the file name (without `.json`). Dates may also be ISO 8601, day-first dotted (`03.01.2024, 09:15:00`),
`2024/01/03 09:15`, `3 January 2024, 9:15 am` or `January 3, 2024 9:15 am`; slashed day/month forms are refused
as ambiguous. The import notes say which of these assumptions were made.
"""
from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from tmem.corpora.common import (
    Format,
    Imported,
    confined,
    expect,
    in_range,
    optional_str,
    parse_timestamp,
    place_single,
    read_json,
    required_str,
    short,
)
from tmem.types import CorpusData, CorpusError, Gold, Message, Question

CATEGORIES = {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop", 5: "adversarial"}
ABSTENTION = "There is no information available in the conversation to answer this question."
TURN_STEP = timedelta(minutes=1)
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_LOCOMO_TIME = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]\.?m\.?)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$",
                          re.IGNORECASE)
_MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"), start=1)}
_DIA_ID = re.compile(r"^D(\d+):(\d+)$")
_CLOCK = r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*([ap]\.?m\.?)?"
# LoCoMo-family date forms: (pattern, order of the date groups, what the notes call it)
_FAMILY_TIMES = (
    (re.compile(rf"^(\d{{1,2}})\.(\d{{1,2}})\.(\d{{4}}),?\s+{_CLOCK}$", re.I), "dmy", "day-first dotted dates"),
    (re.compile(rf"^(\d{{4}})/(\d{{1,2}})/(\d{{1,2}}),?\s+{_CLOCK}$", re.I), "ymd", "year-first slashed dates"),
    (re.compile(rf"^(\d{{1,2}})\s+([A-Za-z]+)\.?,?\s+(\d{{4}}),?\s+(?:at\s+)?{_CLOCK}$", re.I), "dMy",
     "day-month-name dates"),
    (re.compile(rf"^([A-Za-z]+)\.?\s+(\d{{1,2}}),?\s+(\d{{4}}),?\s+(?:at\s+)?{_CLOCK}$", re.I), "Mdy",
     "month-name-first dates"),
)


def parse_locomo_time(value: object, at: str, field: str, seen: set[str] | None = None) -> datetime:
    """'1:56 pm on 8 May, 2023' (locale-independent), ISO 8601, or a LoCoMo-family form (parse_family_time);
    `seen` collects the names of the family forms used, for the import notes."""
    match = _LOCOMO_TIME.match(value) if isinstance(value, str) else None
    if not match:
        family = parse_family_time(value, at, field, seen) if isinstance(value, str) else None
        return family or parse_timestamp(value, at, field)
    hour, minute, half, day, month, year = match.groups()
    if month.lower() not in _MONTHS or not 1 <= int(hour) <= 12:
        raise CorpusError(f"{at}: field {field!r}: cannot parse date {value!r}")
    hour24 = int(hour) % 12 + (12 if half.lower().startswith("p") else 0)
    try:
        return in_range(datetime(int(year), _MONTHS[month.lower()], int(day), hour24, int(minute)), value, at, field)
    except ValueError:
        raise CorpusError(f"{at}: field {field!r}: cannot parse date {value!r}") from None


def month_number(name: str) -> int:
    """'January' / 'Jan' / 'Sept' -> 1 / 1 / 9; 0 (an invalid month) for anything else."""
    name = name.lower()
    return _MONTHS.get(name) or next((n for m, n in _MONTHS.items() if len(name) >= 3 and m.startswith(name)), 0)


def parse_family_time(value: str, at: str, field: str, seen: set[str] | None) -> datetime | None:
    """A LoCoMo-family date form (see _FAMILY_TIMES), or None when `value` has none of them."""
    for pattern, order, name in _FAMILY_TIMES:
        match = pattern.match(value.strip())
        if not match:
            continue
        date_parts = dict(zip(order, match.groups()[:3]))
        hour, minute, second, half = match.groups()[3:]
        month = date_parts["m"] if "m" in date_parts else month_number(date_parts["M"])
        hour = int(hour)
        if half:
            hour = hour % 12 + (12 if half.lower().startswith("p") else 0) if 1 <= hour <= 12 else 99
        try:
            parsed = datetime(int(date_parts["y"]), int(month or 0), int(date_parts["d"]), hour, int(minute),
                              int(second or 0))
        except ValueError:
            raise CorpusError(f"{at}: field {field!r}: {value[:60]!r} looks like {name} but is not a valid "
                              "date and time") from None
        if seen is not None:
            seen.add(name)
        return in_range(parsed, value, at, field)
    return None


def repair_evidence(raw: str) -> list[str]:
    """Split "D8:6; D9:17" / "D9:1 D4:4" and normalise "D:11:26" -> "D11:26", "D30:05" -> "D30:5"."""
    ids = []
    for part in re.split(r"[;,\s]+", raw.strip()):
        part = re.sub(r"^D:(\d)", r"D\1", part)
        match = _DIA_ID.match(part)
        ids.append(f"D{int(match.group(1))}:{int(match.group(2))}" if match else part)
    return [i for i in ids if i]


def load_sessions(conversation: dict, scope: str, at: str,
                  forms: set[str] | None = None) -> tuple[list[Message], int]:
    """The conversation's turns, and how many of them got a derived time (no `date_time` of their own);
    `forms` collects the LoCoMo-family date forms met."""
    sessions = sorted((int(m.group(1)), key) for key in conversation if (m := _SESSION_KEY.match(key)))
    messages: list[Message] = []
    derived = 0
    for _, key in sessions:
        date_key = f"{key}_date_time"
        start = parse_locomo_time(conversation[date_key], at, date_key, forms) if conversation.get(date_key) else None
        for i, turn in enumerate(expect(conversation[key], list, at, key)):
            messages.append(parse_turn(turn, scope, start, i, f"{at} {key}[{i}]", date_key, forms))
            derived += not turn.get("date_time")
    return messages, derived


def parse_turn(turn: object, scope: str, start: datetime | None, index: int, at: str, date_key: str,
               forms: set[str] | None = None) -> Message:
    turn = expect(turn, dict, at, "turn")
    text = optional_str(turn, "clean_text", at) or required_str(turn, "text", at)
    caption = optional_str(turn, "blip_caption", at)
    if caption:
        text = f"{text} [shared image: {caption}]"
    if turn.get("date_time"):
        timestamp = parse_locomo_time(turn["date_time"], at, "date_time", forms)
    elif start is None:
        raise CorpusError(f"{at}: the turn has no 'date_time' and field {date_key!r} is missing")
    else:
        timestamp = start + index * TURN_STEP  # a session late on 31 Dec 2199 would run into 2200
        timestamp = in_range(timestamp, f"{timestamp:%Y-%m-%d %H:%M} (derived: {date_key} + {index} min)", at,
                             "date_time")
    return Message(id=required_str(turn, "dia_id", at), scope=scope, text=text, timestamp=timestamp,
                   author=required_str(turn, "speaker", at))


def load_questions(items: list, scope: str, message_ids: set[str], at: str,
                   notes: list[str]) -> tuple[list[Question], list[tuple[str, Gold]]]:
    questions, golds = [], []
    for i, item in enumerate(items):
        q_at = f"{at} qa[{i}]"
        item = expect(item, dict, q_at, "qa item")
        category = item.get("category")
        if isinstance(category, bool) or not isinstance(category, int) or category not in CATEGORIES:
            raise CorpusError(f"{q_at}: field 'category' must be one of 1-5, got {short(category)}")
        qid = f"{scope}_q{i + 1}"
        questions.append(Question(qid, scope, required_str(item, "question", q_at), None, CATEGORIES[category]))
        answer = ABSTENTION if category == 5 else required_str(item, "answer", q_at)
        units = resolve_evidence(item.get("evidence"), message_ids, q_at, qid, notes)
        golds.append((scope, Gold(qid, answer, units)))
    return questions, golds


def resolve_evidence(raw: object, message_ids: set[str], at: str, qid: str,
                     notes: list[str]) -> tuple[tuple[str, ...], ...]:
    units: list[tuple[str, ...]] = []
    for value in expect(raw if raw is not None else [], list, at, "evidence"):
        value = expect(value, str, at, "evidence")
        if value in message_ids:
            units.append((value,))
            continue
        repaired = repair_evidence(value)
        found = [i for i in repaired if i in message_ids]
        missing = [i for i in repaired if i not in message_ids]
        units += [(i,) for i in found]
        outcome = f"repaired to {', '.join(found)}" if found else "unresolved"
        if missing:
            outcome += f"; not a turn id, left out of gold evidence: {', '.join(missing)}"
        notes.append(f"{qid}: malformed evidence {value!r} {outcome}")
    return tuple(dict.fromkeys(units))


def sessions_of(conv: dict, at: str) -> dict:
    """The object holding `session_<n>` lists: `conversation` (LoCoMo), or the record itself (family files that
    put the sessions at the top level)."""
    if "conversation" not in conv and any(_SESSION_KEY.match(key) for key in conv):
        return conv
    return expect(conv.get("conversation"), dict, at, "conversation")


def scope_of(conv: dict, path: Path, single: bool, at: str, notes: list[str]) -> str:
    """`sample_id`; a file holding one conversation without one is named after the file."""
    if conv.get("sample_id") in (None, "") and single:
        notes.append(f"no 'sample_id': the conversation's scope is named after the file, {path.stem!r}")
        return path.stem
    return required_str(conv, "sample_id", at)


@confined()
def load_locomo(path: str | Path) -> Imported:
    path = Path(path)
    raw = read_json(path)
    single = isinstance(raw, dict)
    conversations = [raw] if single else expect(raw, list, str(path), "top level")
    messages, questions, golds, notes, scopes, derived, forms = [], [], [], [], set(), 0, set()
    for n, conv in enumerate(conversations):
        at = f"{path} [conversation {n}]"
        conv = expect(conv, dict, at, "conversation")
        scope = scope_of(conv, path, single, at, notes)
        if scope in scopes:
            raise CorpusError(f"{at}: field 'sample_id': duplicate conversation {scope!r}")
        scopes.add(scope)
        turns, derived_turns = load_sessions(sessions_of(conv, at), scope, at, forms)
        derived += derived_turns
        ids = [m.id for m in turns]
        if len(set(ids)) < len(ids):
            dup = next(i for i, count in Counter(ids).items() if count > 1)
            raise CorpusError(f"{at}: field 'dia_id': duplicate turn id {dup!r}")
        qs, gs = load_questions(expect(conv.get("qa", []), list, at, "qa"), scope, set(ids), at, notes)
        messages += turns
        questions += qs
        golds += gs
    if derived:
        notes.append(f"{derived:,} of {len(messages):,} turn times are derived, not in the source: LoCoMo dates "
                     f"sessions, so turn i of a session is stamped session time + i minutes")
    if forms:
        notes.append(f"LoCoMo-family date forms read: {', '.join(sorted(forms))} (dotted dates are day-first: "
                     "03.01.2024 is 3 January 2024)")
    empty = sum(1 for _, g in golds if not g.evidence)
    if empty:
        notes.append(f"{empty} question(s) have no gold evidence (empty or unresolvable evidence list)")
    return Imported(CorpusData(messages, questions, golds), tuple(notes))


FORMAT = Format(
    "locomo", load_locomo, "one LoCoMo `.json` file such as `locomo10.json` (or a `.zip` holding one).",
    ("json", "zip"), place_single, zip_member="*.json")
