"""Bounds on what an import reads and keeps: every name field bounded where it is read, regular files only, the
size limit enforced while reading, import notes bounded, and the smaller refusals (a BOM, a symlinked folder,
timestamps rolling past the year limit, a deep sidecar). Each case must end in one CorpusError naming the file."""
from __future__ import annotations

import ast
import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from tmem import limits
from tmem.corpora import common, files
from tmem.corpora.imports import load, summary
from tmem.types import CorpusError

FIXTURES = Path(__file__).parent / "fixtures"
LONG = "x" * (limits.MAX_NAME_CHARS + 1)


@pytest.fixture
def no_hang():
    """Fail instead of hanging (a FIFO opened for reading waits for a writer forever)."""
    def fail(*_):
        raise TimeoutError("the import hung")
    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def write_jsonl(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def message(**fields) -> dict:
    return {"id": "m1", "text": "hi", "timestamp": "2025-01-01T10:00"} | fields


# ---------------------------------------------------------------------------------------------- regular files
def test_a_device_is_refused(no_hang):
    with pytest.raises(CorpusError, match=r"/dev/zero: is a device; only regular files"):
        load("jsonl", "/dev/zero")


def test_a_fifo_is_refused_without_hanging(tmp_path, no_hang):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(CorpusError, match=r"pipe.jsonl: is a FIFO"):
        load("jsonl", fifo)


def test_a_fifo_inside_a_dataset_folder_is_refused(tmp_path, no_hang):
    root = tmp_path / "irc"
    root.mkdir()
    shutil.copy(FIXTURES / "irc" / "2024-01-31_00.annotation.txt", root / "2024-01-31_00.annotation.txt")
    os.mkfifo(root / "2024-01-31_00.raw.txt")
    with pytest.raises(CorpusError, match=r"2024-01-31_00.raw.txt: is a FIFO"):
        load("irc", root)


def test_the_size_limit_holds_while_reading(tmp_path, monkeypatch):
    """A file that grows after its size was checked: the reader stops at the limit instead of reading on."""
    path = write_jsonl(tmp_path / "grows.jsonl", *(message(id=f"m{i}") for i in range(50)))
    real_check = files.check_size
    monkeypatch.setattr(files, "check_size", lambda *args: None)  # as if the file had grown since the check
    monkeypatch.setenv("TMEM_MAX_IMPORT_BYTES", "200")
    with pytest.raises(CorpusError, match="over the import limit of 200 bytes"):
        common.read_bytes(path)
    with pytest.raises(CorpusError, match="over the import limit of 200 bytes"):
        with common.open_text(path) as handle:
            list(handle)
    monkeypatch.setattr(files, "check_size", real_check)
    with pytest.raises(CorpusError, match="over the import limit"):
        load("jsonl", path)


# ------------------------------------------------------------------------------------------ bounded fields
@pytest.mark.parametrize("field", ["id", "scope", "author", "role", "channel", "topic", "phase", "reply_to"])
def test_jsonl_name_fields_are_bounded(field, tmp_path):
    path = write_jsonl(tmp_path / "long.jsonl", message(id="m0"), message(**{field: LONG}))
    with pytest.raises(CorpusError, match=rf"long.jsonl:2: field '{field}' is 1,001 characters, over the limit"):
        load("jsonl", path)


def test_jsonl_question_fields_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_MAX_MESSAGE_CHARS", "50")
    base = {"kind": "question", "id": "q1", "text": "what?"}
    write_jsonl(tmp_path / "q.jsonl", message(), base | {"type": LONG})
    with pytest.raises(CorpusError, match=r"q.jsonl:2: field 'type' is 1,001"):
        load("jsonl", tmp_path / "q.jsonl")
    write_jsonl(tmp_path / "q.jsonl", message(), base | {"gold_answer": "a" * 51})
    with pytest.raises(CorpusError, match=r"q.jsonl:2: field 'gold_answer' is 51 .*TMEM_MAX_MESSAGE_CHARS"):
        load("jsonl", tmp_path / "q.jsonl")
    write_jsonl(tmp_path / "q.jsonl", message(), base | {"gold_evidence": [LONG]})
    with pytest.raises(CorpusError, match=r"q.jsonl:2: field 'gold_evidence' is 1,001"):
        load("jsonl", tmp_path / "q.jsonl")


def test_a_name_at_the_limit_is_accepted(tmp_path):
    name = "y" * limits.MAX_NAME_CHARS
    path = write_jsonl(tmp_path / "ok.jsonl", message(channel=name))
    assert load("jsonl", path).data.messages[0].channel == name


def test_evermembench_group_name_is_bounded(tmp_path):
    root = tmp_path / "ever"
    shutil.copytree(FIXTURES / "evermembench", root)
    dialogue = json.loads((root / "01" / "dialogue.json").read_text())
    day = dialogue["dialogues"]["2025-01-09"]
    day[LONG] = day.pop(next(iter(day)))
    (root / "01" / "dialogue.json").write_text(json.dumps(dialogue))
    with pytest.raises(CorpusError, match=r"dialogue.json \[2025-01-09\]: field 'group' is 1,001 characters"):
        load("evermembench", root)


def test_groupmembench_channel_name_is_bounded(tmp_path):
    root = tmp_path / "gmb"
    shutil.copytree(FIXTURES / "groupmembench", root)
    conversation = next(p for p in root.rglob("*.json"))
    channels = json.loads(conversation.read_text())
    channels[LONG] = channels.pop(next(iter(channels)))
    conversation.write_text(json.dumps(channels))
    with pytest.raises(CorpusError, match=rf"{conversation.name}: field 'channel' is 1,001 characters"):
        load("groupmembench", root)


def test_irc_nick_is_bounded(tmp_path):
    raw = (FIXTURES / "irc" / "2024-01-31_00.raw.txt").read_text().splitlines()
    raw[3] = f"[10:00] <{LONG}> hello"
    (tmp_path / "2024-01-31_00.raw.txt").write_text("\n".join(raw) + "\n")
    shutil.copy(FIXTURES / "irc" / "2024-01-31_00.annotation.txt", tmp_path / "2024-01-31_00.annotation.txt")
    with pytest.raises(CorpusError, match=r"2024-01-31_00.raw.txt:4: field 'nick' is 1,001"):
        load("irc", tmp_path / "2024-01-31_00.raw.txt")


def test_long_decision_metadata_is_never_given_to_the_literal_parser(monkeypatch):
    from tmem.corpora import gold_edges

    def refuse(text):
        raise AssertionError(f"literal_eval called on {len(text):,} characters")

    monkeypatch.setattr(ast, "literal_eval", refuse)
    long = "{'original_decision': '" + "z" * limits.MAX_METADATA_CHARS + "'}"
    assert gold_edges._change_metadata(long) == {}
    monkeypatch.undo()
    assert gold_edges._change_metadata("{'original_decision': 'freeze'}") == {"original_decision": "freeze"}
    assert gold_edges._change_metadata("[" * 5000 + "]" * 5000) == {}  # too deep for the parser: no crash


def test_slack_mentions_stop_growing_past_the_message_limit(monkeypatch):
    from tmem.corpora.slack import resolve_markup

    monkeypatch.setenv("TMEM_MAX_MESSAGE_CHARS", "1000")
    users = {"U1": ("n" * 500, None)}
    text = resolve_markup("<@U1> " * 10_000, users, {})  # unbounded, 5 MB
    assert 1000 < len(text) <= 1000 + 502  # one mention past the limit, then cap_messages cuts it
    assert resolve_markup("hi <@U1> there", {"U1": ("Ana", None)}, {}) == "hi @Ana there"


# --------------------------------------------------------------------------------------------------- notes
def test_notes_are_bounded_with_a_count_of_the_rest():
    notes = [f"note {i} " + "w" * 2000 for i in range(limits.MAX_NOTES + 250)]
    kept = common.bound_notes(notes)
    assert len(kept) == limits.MAX_NOTES + 1
    assert kept[-1].startswith("… 250 more notes not stored")
    assert all(len(n) <= limits.MAX_NOTE_CHARS + 60 for n in kept)
    assert common.bound_notes(["a", "b"]) == ("a", "b")


def test_irc_garbage_lines_give_a_bounded_number_of_notes(tmp_path):
    raw = (FIXTURES / "irc" / "2024-01-31_00.raw.txt").read_text() + "garbage\n" * 5000
    (tmp_path / "2024-01-31_00.raw.txt").write_text(raw)
    shutil.copy(FIXTURES / "irc" / "2024-01-31_00.annotation.txt", tmp_path / "2024-01-31_00.annotation.txt")
    notes = load("irc", tmp_path / "2024-01-31_00.raw.txt").notes
    named = [n for n in notes if "not an IRC message or system line, skipped" in n]
    assert len(named) == 100
    assert sum("4,900 more lines that are not IRC messages" in n for n in notes) == 1


# ------------------------------------------------------------------------------------------- smaller items
def test_an_irc_log_with_a_bom_is_refused_like_the_other_formats(tmp_path):
    raw = FIXTURES / "irc" / "2024-01-31_00.raw.txt"
    (tmp_path / raw.name).write_bytes(b"\xef\xbb\xbf" + raw.read_bytes())
    shutil.copy(FIXTURES / "irc" / "2024-01-31_00.annotation.txt", tmp_path / "2024-01-31_00.annotation.txt")
    with pytest.raises(CorpusError, match=r"2024-01-31_00.raw.txt: starts with a byte-order mark"):
        load("irc", tmp_path / raw.name)
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps(message()).encode() + b"\n")
    with pytest.raises(CorpusError, match=r"bom.jsonl"):
        load("jsonl", tmp_path / "bom.jsonl")


def test_an_irc_log_rolling_past_2199_is_refused(tmp_path):
    (tmp_path / "2199-12-31_23.raw.txt").write_text("[23:59] <a> last\n[00:01] <b> first of 2200\n")
    (tmp_path / "2199-12-31_23.annotation.txt").write_text("0 1 -\n")
    with pytest.raises(CorpusError, match=r"2199-12-31_23.raw.txt:2: field 'time': timestamp '2200-01-01 00:01'"):
        load("irc", tmp_path / "2199-12-31_23.raw.txt")


def test_a_locomo_session_running_into_2200_is_refused(tmp_path):
    data = json.loads((FIXTURES / "locomo" / "mini.json").read_text())
    conversation = data[0]["conversation"]
    conversation["session_1_date_time"] = "11:59 pm on 31 December, 2199"
    for turn in conversation["session_1"]:
        turn.pop("date_time", None)
    (tmp_path / "late.json").write_text(json.dumps(data))
    with pytest.raises(CorpusError, match=r"late.json.*session_1\[1\].*'date_time'.*2200-01-01 00:00"):
        load("locomo", tmp_path / "late.json")


def test_a_symlinked_folder_in_a_groupmembench_dataset_is_refused(tmp_path):
    root = tmp_path / "gmb"
    shutil.copytree(FIXTURES / "groupmembench", root)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(FIXTURES / "groupmembench", elsewhere)
    conversations = next(p.parent for p in root.rglob("*.json")).parent
    (conversations / "Linked").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(CorpusError, match=r"Linked: is a symbolic link to a folder; refused"):
        load("groupmembench", root)


def test_a_deep_gold_edges_sidecar_names_its_file(tmp_path):
    root = tmp_path / "gmb"
    shutil.copytree(FIXTURES / "groupmembench", root)
    (root / "gold_edges.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(CorpusError, match=r"gold_edges.jsonl:1: JSON nested deeper"):
        load("groupmembench", root)


def test_the_import_summary_strips_control_characters(fresh_store, tmp_path):
    from tmem.corpora.imports import import_corpus

    path = write_jsonl(tmp_path / "c.jsonl", message(),
                       {"kind": "question", "id": "q1", "text": "what?", "type": "evil\x1b]52;c;aGk=\x07"})
    name, imported = import_corpus(fresh_store, "jsonl", path)
    lines = summary(fresh_store, name, imported)
    assert not any("\x1b" in line or "\x07" in line for line in lines)
    assert any("evil\ufffd]52;c;aGk=\ufffd: 1" in line for line in lines)


@pytest.mark.integration
def test_run_and_links_print_no_control_characters(tmp_path, capsys):
    """Question types and ids come from the data: `run`'s accuracy table and `links --questions` show them with
    control characters replaced, as `import` and `ask` do."""
    from tmem.cli import main

    evil = "evil\x1b]52;c;aGk=\x07"
    records = [message(id=f"m{i}", text=f"the launch moves to day {i}", timestamp=f"2025-01-01T10:0{i}",
                       author=f"u{i % 2}") for i in range(4)]
    records += [{"kind": "link", "child_id": "m1", "parent_id": "m0"},
                {"kind": "question", "id": f"q{evil}", "text": "when is the launch?", "type": evil,
                 "gold_answer": "day 3", "gold_evidence": ["m3"]}]
    path = write_jsonl(tmp_path / "evil.jsonl", *records)
    db = str(tmp_path / "t.duckdb")
    assert main(["import", "jsonl", str(path), "--db", db]) == 0
    assert main(["run", "--db", db, "--corpus", "evil", "--variants", "full", "--out", str(tmp_path / "run"),
                 "--quiet", "--no-store"]) in (0, 1)
    assert main(["links", "--db", db, "--corpus", "evil", "--questions", "--variant", "full"]) == 0
    out = capsys.readouterr()
    assert "evil\ufffd]52" in out.out
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out + out.err


@pytest.mark.integration
def test_no_command_prints_a_control_character_from_the_data_or_the_flags(tmp_path, capsys):
    """Issue 44: raw control characters reached the terminal from the new commands: the `annotate` confirmation
    (OSC 52 intact), `gold --rescore` / `--list`, `run`'s last line, `report --gold`. One filter now sits on every
    line a command prints (tmem.cli.TerminalLines over limits.strip_control)."""
    import re

    from tmem.cli import main

    evil = "evil\x1b]52;c;aGk=\x07\x9b31m"
    records = [message(id=f"m{i}", text=f"the launch moves to day {i}", timestamp=f"2025-01-01T10:0{i}",
                       author=f"u{i % 2}") for i in range(4)]
    records += [{"kind": "question", "id": f"q{evil}", "text": "when is the launch?", "type": "temporal",
                 "gold_answer": "day 3", "gold_evidence": ["m3"]}]
    path = write_jsonl(tmp_path / "evil.jsonl", *records)
    db = str(tmp_path / "t.duckdb")
    out = tmp_path / f"run{evil}"
    fixes = tmp_path / "fixes.jsonl"
    fixes.write_text(json.dumps({"scope": "default", "question": f"q{evil}", "answer": "day 2", "reason": evil}))
    assert main(["import", "jsonl", str(path), "--db", db]) == 0
    assert main(["run", "--db", db, "--corpus", "evil", "--variants", "flat", "--out", str(out), "--quiet"]) == 0
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    assert main(["annotate", "--db", db, "--run", run_id, "--question", f"q{evil}", "--label", f"label {evil}",
                 "--note", evil, "--author", "me"]) == 0
    assert main(["annotate", "--db", db, "--run", run_id, "--list", "--export", str(tmp_path / "a.csv")]) == 0
    assert main(["gold", "--db", db, "--corpus", "evil", "--add", str(fixes), "--name", f"v{evil}"]) == 0
    assert main(["gold", "--db", db, "--corpus", "evil", "--list"]) == 0
    assert main(["gold", "--db", db, "--rescore", run_id, "--version", f"v{evil}"]) == 0
    assert main(["report", "--db", db, "--run", run_id, "--out", str(tmp_path / "site"), "--gold", f"v{evil}",
                 "--pages", "none"]) == 0
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert "evil\ufffd]52;c;aGk=\ufffd\ufffd31m" in text  # the data is shown, its control characters replaced
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), [c for c in text if ord(c) < 32 and c != "\n"]
