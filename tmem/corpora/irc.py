"""Ubuntu IRC disentanglement (Kummerfeld et al., ACL 2019) -> messages plus human reply links (gold only).

Input: a `<name>.raw.txt` file, or a folder searched recursively for them (e.g. the dataset root with dev/ and
test/); each raw file needs its `<name>.annotation.txt` beside it. Mapping decisions (docs/corpora.md):

- each file is one memory scope, named by its file stem ("2005-07-06_14"): files are disjoint log chunks;
- message id = the 0-based line number as a string, so annotation line numbers are message ids;
- `[HH:MM] <nick> text` -> author nick, text; `[HH:MM] * nick does x` (an action) -> author nick, text
  "nick does x"; `=== ...` system lines (joins, quits, nick changes) are skipped;
- time = the date in the file name + HH:MM (no seconds in the source); when the clock goes back by more than an
  hour it has wrapped and advances by whole 12-hour turns until it no longer goes back: 23:59 -> 00:00 is the next
  day (24-hour logs), 12:59 -> 01:00 is 13:00 (the older logs use a 12-hour clock); the n messages logged in one
  minute are spread over it in log order (the i-th at i·60/n seconds), so "earlier" follows the log: otherwise a
  reply in the same minute as its parent (about half of all gold links) could never have that parent;
- annotation `a b -`: a == b marks a conversation start, stored as a self-link (a gold root); otherwise the
  earlier line is the parent
  and the later the child, stored in `gold_links` only (never `reply_to`, which retrieval may read). Links that
  touch a system line are reported and skipped;
- role, channel, topic, phase fields stay empty.
"""
from __future__ import annotations

import re
from dataclasses import replace
from datetime import date, datetime, timedelta
from itertools import groupby
from pathlib import Path

from tmem.corpora.common import (
    Files,
    Format,
    Imported,
    Progress,
    bounded,
    confined,
    files_under,
    in_range,
    read_text,
    stage_file,
)
from tmem.corpora.splits import folder_split
from tmem.types import CorpusData, CorpusError, Message

_LINE = re.compile(r"^\[(\d{2}):(\d{2})\] +(?:<([^>]+)> ?(.*)|\* (\S+)(.*))$")
_FILE_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")
# a clock that goes back by more than this has wrapped round; smaller steps back are left as logged
CLOCK_JITTER_MINUTES = 60
MAX_LINE_NOTES = 100  # unreadable lines named one by one per file; the rest are counted
_LINK = re.compile(r"^\s*(\d{1,9})\s+(\d{1,9})(\s+-)?\s*$")


def file_date(path: Path) -> date:
    match = _FILE_DATE.match(path.name)
    if not match:
        raise CorpusError(f"{path}: the file name must start with the log date YYYY-MM-DD")
    try:
        day = date(*map(int, match.groups()))
    except ValueError as exc:  # 2005-13-45: the name has the form of a date but is none
        raise CorpusError(f"{path}: the file name's date {match.group(0)!r} is not a date ({exc})") from None
    return in_range(datetime.combine(day, datetime.min.time()), match.group(0), str(path), "file name").date()


def lines(path: Path) -> list[str]:
    """Lines split on newline only: `str.splitlines` also splits on U+2028, U+0085 etc., which occur inside IRC
    messages and would shift the line numbers that serve as message ids."""
    text = read_text(path)
    return [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")] if text else []


def parse_raw(path: Path, scope: str) -> tuple[list[Message], list[str]]:
    """Messages of one raw log, and notes on lines that are neither messages nor system lines."""
    day = datetime.combine(file_date(path), datetime.min.time())
    messages, notes, previous, shift, unread = [], [], None, 0, 0
    for number, line in enumerate(lines(path)):
        if not line.strip() or line.startswith("==="):
            continue
        match = _LINE.match(line)
        if not match:
            unread += 1
            if unread <= MAX_LINE_NOTES:
                notes.append(f"{path}:{number + 1}: not an IRC message or system line, skipped: {line[:60]!r}")
            continue
        hh, mm, nick, text, actor, action = match.groups()
        if int(hh) > 23 or int(mm) > 59:
            raise CorpusError(f"{path}:{number + 1}: field 'time': [{hh}:{mm}] is not a time of day")
        minutes = int(hh) * 60 + int(mm) + shift
        while previous is not None and minutes < previous - CLOCK_JITTER_MINUTES:
            # the clock wrapped: at midnight (24-hour logs) or from 12:59 to 01:00 (the older 12-hour logs)
            shift += 12 * 60
            minutes += 12 * 60
        previous = minutes
        author, text = (nick, text) if nick is not None else (actor, f"{actor}{action}")
        at = f"{path}:{number + 1}"
        stamp = day + timedelta(minutes=minutes)  # the clock's turns may carry the last day past the year limit
        messages.append(Message(id=str(number), scope=scope, text=text, author=bounded(author, at, "nick"),
                                timestamp=in_range(stamp, f"{stamp:%Y-%m-%d %H:%M}", at, "time")))
    if unread > MAX_LINE_NOTES:
        notes.append(f"{path}: {unread - MAX_LINE_NOTES:,} more lines that are not IRC messages or system lines "
                     "were skipped")
    return spread_within_minutes(messages), notes


def spread_within_minutes(messages: list[Message]) -> list[Message]:
    """The log orders messages inside a minute; the clock does not. The i-th of n messages stamped with the same
    minute gets i·60/n seconds (microseconds rounded down), which keeps log order and stays inside the minute."""
    out: list[Message] = []
    for _, same_minute in groupby(messages, key=lambda m: m.timestamp):
        group = list(same_minute)
        out += [replace(m, timestamp=m.timestamp + timedelta(microseconds=i * 60_000_000 // len(group)))
                for i, m in enumerate(group)]
    return out


def parse_annotation(path: Path, scope: str, message_ids: set[str]) -> tuple[list[tuple[str, str, str]], list[str]]:
    links, notes, seen, skipped = [], [], set(), 0
    for number, line in enumerate(lines(path), start=1):
        if not line.strip():
            continue
        match = _LINK.match(line)
        if not match:
            raise CorpusError(f"{path}:{number}: expected 'LINE LINE -', got {line[:60]!r}")
        a, b = int(match.group(1)), int(match.group(2))
        if a == b:  # a conversation start: kept as a gold root (a self-link), not a parent
            if str(a) in message_ids and (str(a), str(a)) not in seen:
                seen.add((str(a), str(a)))
                links.append((scope, str(a), str(a)))
            continue
        parent, child = str(min(a, b)), str(max(a, b))
        if parent not in message_ids or child not in message_ids:
            skipped += 1
            if skipped <= MAX_LINE_NOTES:
                notes.append(f"{path}:{number}: link {a}-{b} touches a line that is not a message "
                             "(a === system line, or past the end), skipped")
        elif (child, parent) not in seen:
            seen.add((child, parent))
            links.append((scope, child, parent))
    if skipped > MAX_LINE_NOTES:
        notes.append(f"{path}: {skipped - MAX_LINE_NOTES:,} more links touching a line that is not a message "
                     "were skipped")
    return links, notes


def raw_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files = files_under(path, "*.raw.txt")
    if not files:
        raise CorpusError(f"{path}: no *.raw.txt files found")
    return files


@confined()
def load_irc(path: str | Path) -> Imported:
    messages: list[Message] = []
    links: list[tuple[str, str, str]] = []
    notes: list[str] = []
    scopes: dict[str, Path] = {}
    files = raw_files(Path(path))
    progress = Progress("irc files", len(files), min_items=1)
    for raw in files:
        scope = raw.name.removesuffix(".raw.txt")
        if scope in scopes:
            raise CorpusError(f"{raw}: duplicate log name {scope!r} (also {scopes[scope]})")
        scopes[scope] = raw
        file_messages, file_notes = parse_raw(raw, scope)
        annotation = raw.with_name(f"{scope}.annotation.txt")
        if not annotation.exists():
            raise CorpusError(f"{raw}: the annotation file {annotation.name} is missing")
        file_links, link_notes = parse_annotation(annotation, scope, {m.id for m in file_messages})
        messages += file_messages
        links += file_links
        notes += file_notes + link_notes
        progress.add()
    progress.done()
    return Imported(CorpusData(messages, links=links), tuple(notes), folder_split(path))


def place_irc(files: Files, folder: Path, shown: dict[str, str]) -> Path:
    for name, content in files:
        if not name.endswith((".raw.txt", ".annotation.txt")):
            raise CorpusError(f"{name}: not an IRC log (<name>.raw.txt) or its annotation (<name>.annotation.txt)")
        stage_file(folder, name, content, shown)
    raws = {n.removesuffix(".raw.txt") for n, _ in files if n.endswith(".raw.txt")}
    missing = sorted(f"{r}.annotation.txt" for r in raws
                     if f"{r}.annotation.txt" not in {n for n, _ in files})
    if missing:
        raise CorpusError(f"{', '.join(missing)}: missing; upload each .raw.txt together with its .annotation.txt")
    return folder


FORMAT = Format(
    "irc", load_irc, "each `<name>.raw.txt` together with its `<name>.annotation.txt` (any number of pairs), or a "
    "`.zip` of them. Each log is one scope, named by its file name.", ("txt", "zip"), place_irc)
