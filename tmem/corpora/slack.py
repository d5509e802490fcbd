"""Slack workspace export -> the common representation (a real-world group-chat format; no questions).

Layout (Slack's "Export data" zip, unpacked): `users.json`, `channels.json` (and `groups.json` for private
channels, if present), and one folder per channel named like the channel, holding daily `YYYY-MM-DD.json` files,
each a JSON list of message objects `{type, user, text, ts, thread_ts?, subtype?, files?, ...}`.
Mapping decisions (docs/corpora.md):

- the whole workspace is one memory scope (named after the export folder): questions may span channels;
- channel = "#" + channel name; message id = "<channel name>/<ts>" (ts is unique within a channel);
- author = the user's real name (profile.real_name, real_name, name, then the id); role = the profile's job
  title, when set; bot messages use their `username` / bot name;
- text: `<@U123>` -> "@Real Name", `<#C1|general>` -> "#general", `<!here>` -> "@here", `<url|label>` ->
  "label (url)", then `&amp; &lt; &gt;` are unescaped; a message with no text but files becomes
  "[shared file: name]";
- timestamp = `ts` (Unix seconds, UTC); reply_to = the thread's parent id when `thread_ts` differs from `ts`;
- join/leave/topic/purpose/pin notices (system subtypes) are skipped and counted in the notes;
- topic, phase and stage stay empty (a channel's topic banner is not a per-message topic).
"""
from __future__ import annotations

import html
import re
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from tmem import limits
from tmem.corpora.common import (
    Files,
    Format,
    Imported,
    Progress,
    child,
    confined,
    expect,
    in_range,
    optional_str,
    read_json,
    required_str,
)
from tmem.types import CorpusData, CorpusError, Message

SYSTEM_SUBTYPES = frozenset({
    "channel_join", "channel_leave", "channel_topic", "channel_purpose", "channel_name", "channel_archive",
    "channel_unarchive", "group_join", "group_leave", "group_topic", "group_purpose", "group_name",
    "pinned_item", "unpinned_item", "bot_add", "bot_remove", "reminder_add", "message_deleted", "tombstone"})
_DAY_FILE = re.compile(r"^\d{4}-\d{2}-\d{2}\.json$")
_TS = re.compile(r"(\d{1,15})(?:\.(\d{1,6}))?")
_MARKUP = re.compile(r"<([@#!])?([^>|]+)(?:\|([^>]*))?>")
_EPOCH = datetime(1970, 1, 1)


def parse_ts(value: object, at: str, field: str = "ts") -> datetime:
    """Slack's "1577836800.000100" -> naive UTC datetime, without float rounding. The whole string must match:
    a trailing newline would otherwise end up in the message id."""
    match = _TS.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise CorpusError(f"{at}: field {field!r} must be a Slack timestamp like '1577836800.000100', "
                          f"got {str(value)[:60]!r}")
    micros = int((match.group(2) or "0").ljust(6, "0"))
    try:
        stamp = _EPOCH + timedelta(seconds=int(match.group(1)), microseconds=micros)
    except OverflowError:
        stamp = datetime.max
    return in_range(stamp, value, at, field)


def load_users(path: Path) -> dict[str, tuple[str, str | None]]:
    """{user id: (display author, job title or None)}."""
    users = {}
    for i, user in enumerate(expect(read_json(path), list, str(path), "top level")):
        at = f"{path} [user {i}]"
        user = expect(user, dict, at, "user")
        profile = expect(user.get("profile") or {}, dict, at, "profile")
        uid = required_str(user, "id", at)
        name = (optional_str(profile, "real_name", at) or optional_str(user, "real_name", at)
                or optional_str(user, "name", at) or uid)
        users[uid] = (name, optional_str(profile, "title", at))
    return users


def load_channels(root: Path) -> dict[str, str]:
    """{channel id: channel name} from channels.json (required) and groups.json (private channels, optional)."""
    channels = {}
    for name in ("channels.json", "groups.json"):
        path = root / name
        if not path.exists():
            if name == "channels.json":
                raise CorpusError(f"{root}: channels.json is missing (is this a Slack export folder?)")
            continue
        for i, channel in enumerate(expect(read_json(path), list, str(path), "top level")):
            at = f"{path} [channel {i}]"
            channel = expect(channel, dict, at, "channel")
            name = required_str(channel, "name", at)
            child(root, name, at, "name")  # the name is a folder of the export: never a path elsewhere
            channels[required_str(channel, "id", at)] = name
    return channels


def resolve_markup(text: str, users: dict, channels: dict[str, str]) -> str:
    def replace(match: re.Match) -> str:
        sigil, target, label = match.groups()
        if sigil == "@":
            return "@" + (users[target][0] if target in users else label or target)
        if sigil == "#":
            return "#" + (label or channels.get(target, target))
        if sigil == "!":
            return "@" + (label.lstrip("@") if label else target.split("^")[0])
        return f"{label} ({target})" if label and label != target.removeprefix("mailto:") else label or target
    # A mention grows ("<@U1>" becomes a name of up to limits.MAX_NAME_CHARS): resolution stops once the text is
    # past the message limit, which cap_messages then cuts, so a message of mentions cannot take gigabytes.
    limit, pieces, size, end = limits.message_chars(), [], 0, 0
    for match in _MARKUP.finditer(text):
        pieces += [text[end:match.start()], replace(match)]
        size += len(pieces[-2]) + len(pieces[-1])
        end = match.end()
        if size > limit:
            break
    pieces.append(text[end:] if size <= limit else "")
    return html.unescape("".join(pieces))


def parse_message(record: dict, channel: str, scope: str, users: dict, channels: dict, at: str) -> Message | None:
    if optional_str(record, "subtype", at) in SYSTEM_SUBTYPES:
        return None
    ts = required_str(record, "ts", at)
    text = resolve_markup(optional_str(record, "text", at) or "", users, channels).strip()
    files = expect(record["files"], list, at, "files") if record.get("files") is not None else []
    if not text:
        names = [optional_str(f, "name", f"{at} files[{j}]") or optional_str(f, "title", f"{at} files[{j}]")
                 for j, f in enumerate(files) if isinstance(f, dict)]
        text = "; ".join(f"[shared file: {n}]" for n in names if n)
    if not text:
        return None
    uid = optional_str(record, "user", at)
    author, role = users.get(uid, (None, None)) if uid else (None, None)
    author = author or uid or optional_str(record, "username", at) or optional_str(record, "bot_id", at)
    thread = optional_str(record, "thread_ts", at)
    return Message(id=f"{channel}/{ts}", scope=scope, text=text, timestamp=parse_ts(ts, at), author=author,
                   role=role, channel=f"#{channel}",
                   reply_to=f"{channel}/{thread}" if thread and thread != ts else None)


def load_channel(folder: Path, channel: str, scope: str, users: dict, channels: dict,
                 progress: Progress) -> tuple[list[Message], int]:
    messages, skipped, seen = [], 0, {}
    for day in sorted(p for p in folder.iterdir() if _DAY_FILE.match(p.name)):
        for i, record in enumerate(expect(read_json(day), list, str(day), "top level")):
            at = f"{day} [message {i}]"
            message = parse_message(expect(record, dict, at, "message"), channel, scope, users, channels, at)
            if message is None:
                skipped += 1
                continue
            if message.id in seen:
                raise CorpusError(f"{at}: field 'ts': duplicate message ts in #{channel} "
                                  f"(first at {seen[message.id]})")
            seen[message.id] = at
            messages.append(message)
            progress.add()
    return messages, skipped


@confined()
def load_slack(path: str | Path) -> Imported:
    root = Path(path)
    if not root.is_dir():
        raise CorpusError(f"{root}: a Slack export is a folder (unzip the export first)")
    users = load_users(root / "users.json") if (root / "users.json").exists() else {}
    channels = load_channels(root)
    scope = root.resolve().name
    messages, notes, skipped = [], [], 0
    progress = Progress("slack messages")
    for channel in sorted(set(channels.values())):
        folder = child(root, channel, f"{root / 'channels.json'} [#{channel}]", "name")
        if not folder.is_dir():
            notes.append(f"#{channel}: listed in channels.json but has no folder, skipped")
            continue
        found, dropped = load_channel(folder, channel, scope, users, channels, progress)
        messages += found
        skipped += dropped
    progress.done()
    ids = {m.id for m in messages}
    dangling = sum(1 for m in messages if m.reply_to and m.reply_to not in ids)
    if dangling:
        notes.append(f"{dangling} thread replies whose parent is not in the export keep no reply_to")
        messages = [m if not m.reply_to or m.reply_to in ids else replace(m, reply_to=None) for m in messages]
    if skipped:
        notes.append(f"{skipped} system notices (joins, topic changes, ...) or empty messages skipped")
    if not users:
        notes.append("users.json is missing: authors are user ids")
    messages.sort(key=lambda m: (m.timestamp, m.id))
    return Imported(CorpusData(messages), tuple(notes))


def place_slack(files: Files, folder: Path, shown: dict[str, str]) -> Path:
    raise CorpusError(f"{', '.join(n for n, _ in files)}: a Slack export is uploaded as its .zip (plain files "
                      "lose the per-channel folders)")


FORMAT = Format(
    "slack", load_slack, "the export `.zip` as Slack's \"Export data\" makes it (`users.json`, `channels.json`, one "
    "folder per channel). The workspace scope is named after the zip (or its single top folder).", ("zip",),
    place_slack, zip_member="channels.json", zip_member_folder=True,
    zip_member_what="a folder with channels.json (Slack's export)")
