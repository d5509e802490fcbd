"""Hardening: the path traversal, ten inputs that must not end in a traceback, the accepted oddities, and the
bounds. Each bad input must end in one line naming the file (and the record and field where there is one), exit
code 1 from the CLI, and an unchanged database."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from zips import zip_folder

from tmem import api, limits
from tmem.cli import main
from tmem.corpora.imports import load
from tmem.corpora.slack import load_slack
from tmem.store import Store
from tmem.types import CorpusError

FIXTURES = Path(__file__).parent / "fixtures"
SLACK = FIXTURES / "slack" / "acme"
SECRET_TEXT = "the secret outside the input"


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def secret_folder(tmp_path: Path) -> Path:
    """A folder outside the input that looks like a Slack channel."""
    folder = tmp_path / "elsewhere" / "secret"
    folder.mkdir(parents=True)
    (folder / "2024-03-04.json").write_text(json.dumps(
        [{"type": "message", "user": "U01ANA", "text": SECRET_TEXT, "ts": "1709543100.000200"}]))
    return folder


def slack_export(tmp_path: Path, channel_name: str) -> Path:
    export = tmp_path / "export" / "acme"
    shutil.copytree(SLACK, export)
    channels = json.loads((export / "channels.json").read_text())
    channels.append({"id": "C09EVIL", "name": channel_name})
    (export / "channels.json").write_text(json.dumps(channels))
    return export


# ------------------------------------------------------------------------------------------- path traversal
@pytest.mark.parametrize("kind", ["absolute", "dot-dot"])
def test_slack_channel_names_cannot_point_outside_the_export_cli(kind, tmp_path, capsys):
    secret = secret_folder(tmp_path)
    name = str(secret) if kind == "absolute" else "../../elsewhere/secret"
    export = slack_export(tmp_path, name)
    db = tmp_path / "t.duckdb"
    code, err = run_cli(capsys, "import", "slack", str(export), "--db", str(db))
    assert_one_line_error(code, err, "channels.json", "field 'name'", "refused")
    assert Store(db).corpora() == []


def test_slack_channel_names_cannot_point_outside_the_upload(tmp_path, fresh_store):
    secret_folder(tmp_path)
    export = slack_export(tmp_path, "../../../elsewhere/secret")
    with pytest.raises(CorpusError, match="field 'name'.*refused"):
        api.import_corpus(fresh_store, "c", "slack", uploads=[("acme.zip", zip_folder(export))])
    assert fresh_store.corpora() == []


def test_symlinked_channel_folder_is_refused(tmp_path):
    secret = secret_folder(tmp_path)
    export = slack_export(tmp_path, "innocent")
    (export / "innocent").symlink_to(secret, target_is_directory=True)
    with pytest.raises(CorpusError, match="symbolic link; refused"):
        load_slack(export)


def test_symlinked_day_file_is_refused(tmp_path):
    secret = secret_folder(tmp_path)
    export = slack_export(tmp_path, "innocent")
    (export / "innocent").mkdir()
    (export / "innocent" / "2024-03-04.json").symlink_to(secret / "2024-03-04.json")
    with pytest.raises(CorpusError, match="symbolic link; refused"):
        load("slack", export)


def test_upload_never_looks_above_its_staging_folder(tmp_path, fresh_store, monkeypatch):
    """A conversation file uploaded alone must not pick up questions/ (GroupMemBench) or profiles.json
    (EverMemBench) from folders that happen to sit above the staging folder."""
    import tempfile

    staging = tmp_path / "a" / "b" / "staging"
    staging.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    for folder in (tmp_path, tmp_path / "a", tmp_path / "a" / "b"):
        shutil.copytree(FIXTURES / "groupmembench" / "questions", folder / "questions")
        shutil.copy(FIXTURES / "evermembench" / "profiles.json", folder / "profiles.json")
    conversation = next((FIXTURES / "groupmembench" / "data").rglob("*.json"))
    notes = api.import_corpus(fresh_store, "g", "groupmembench",
                              uploads=[(conversation.name, conversation.read_bytes())])
    assert fresh_store.counts("g")["questions"] == 0
    assert any("no questions/Finance/ folder" in n for n in notes)
    dialogue = FIXTURES / "evermembench" / "01" / "dialogue.json"
    notes = api.import_corpus(fresh_store, "e", "evermembench", uploads=[("dialogue.json", dialogue.read_bytes())])
    assert "profiles.json not found: roles are left empty" in notes


def test_server_paths_are_off_in_the_app_unless_allowed(tmp_path, fresh_store, monkeypatch):
    path = tmp_path / "allowed" / "tiny.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"id": "m1", "text": "hi", "timestamp": "2025-01-01T10:00"}))
    monkeypatch.delenv("TMEM_IMPORT_DIRS", raising=False)
    with pytest.raises(CorpusError, match="importing a path on the server is off.*TMEM_IMPORT_DIRS"):
        api.import_corpus(fresh_store, "t", "jsonl", str(path))
    monkeypatch.setenv("TMEM_IMPORT_DIRS", str(tmp_path / "other"))
    with pytest.raises(CorpusError, match="not inside a folder TMEM_IMPORT_DIRS allows"):
        api.import_corpus(fresh_store, "t", "jsonl", str(tmp_path / "other" / ".." / "allowed" / "tiny.jsonl"))
    monkeypatch.setenv("TMEM_IMPORT_DIRS", str(path.parent))
    api.import_corpus(fresh_store, "t", "jsonl", str(path))
    assert fresh_store.counts("t")["messages"] == 1


def test_a_data_named_folder_in_an_upload_cannot_climb(fresh_store):
    """Upload file names become staging folders (GroupMemBench domain, EverMemBench topic): never '..'."""
    with pytest.raises(CorpusError, match="not usable as a folder name"):
        api.import_corpus(fresh_store, "e", "evermembench",
                          uploads=[("dialogue.json", b"{}"), ("qa_...json", b"[]")])


# ------------------------------------------------------------------------- the ten former tracebacks
def jsonl(tmp_path: Path, **fields) -> Path:
    record = {"id": "m1", "text": "hi", "timestamp": "2025-01-01T10:00"} | fields
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return path


def locomo_with_category(tmp_path: Path, category) -> Path:
    data = json.loads((FIXTURES / "locomo" / "mini.json").read_text())
    data[0]["qa"][0]["category"] = category
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return path


def evermembench_with_batch(tmp_path: Path, batch) -> Path:
    root = tmp_path / "ever"
    shutil.copytree(FIXTURES / "evermembench", root)
    dialogue = json.loads((root / "01" / "dialogue.json").read_text())
    dialogue["dialogues"]["2025-01-09"]["Group 2"] = batch
    (root / "01" / "dialogue.json").write_text(json.dumps(dialogue))
    return root


def slack_with(tmp_path: Path, **fields) -> Path:
    export = tmp_path / "acme"
    shutil.copytree(SLACK, export)
    day = export / "general" / "2024-03-04.json"
    records = json.loads(day.read_text())
    records[1].update(fields)  # record 0 is a join notice, skipped before its fields are read
    day.write_text(json.dumps(records))
    return export


def irc_named(tmp_path: Path, stem: str, line: str | None = None) -> Path:
    raw = (FIXTURES / "irc" / "2024-01-31_00.raw.txt").read_text()
    if line is not None:
        raw = raw.replace(raw.splitlines()[3], line)
    (tmp_path / f"{stem}.raw.txt").write_text(raw)
    shutil.copy(FIXTURES / "irc" / "2024-01-31_00.annotation.txt", tmp_path / f"{stem}.annotation.txt")
    return tmp_path / f"{stem}.raw.txt"


CASES = {  # name -> (format, make input, what the one error line must name)
    "locomo category list": ("locomo", lambda t: locomo_with_category(t, [1, 2]),
                             ["bad.json", "qa[0]", "field 'category'"]),
    "evermembench batch not a list": ("evermembench", lambda t: evermembench_with_batch(t, 7),
                                      ["dialogue.json", "2025-01-09", "'Group 2'"]),
    "evermembench batch an object": ("evermembench", lambda t: evermembench_with_batch(t, {"a": 1}),
                                     ["dialogue.json", "2025-01-09", "'Group 2'"]),
    "slack subtype list": ("slack", lambda t: slack_with(t, subtype=["channel_join"]),
                           ["2024-03-04.json", "message 1", "field 'subtype'"]),
    "timestamp overflowing with its zone": ("jsonl", lambda t: jsonl(t, timestamp="9999-12-31T23:59:59-05:00"),
                                            ["bad.jsonl:1", "field 'timestamp'"]),
    "slack 20-digit ts": ("slack", lambda t: slack_with(t, ts="12345678901234567890.000100"),
                          ["2024-03-04.json", "message 1", "field 'ts'"]),
    "stage 10**30": ("jsonl", lambda t: jsonl(t, stage=10 ** 30), ["bad.jsonl:1", "field 'stage'", "out of range"]),
    "folder where a file is expected": ("jsonl", lambda t: (t / "dir.jsonl").mkdir() or t / "dir.jsonl",
                                        ["dir.jsonl", "is a folder"]),
    "locomo folder": ("locomo", lambda t: (t / "x.json").mkdir() or t / "x.json", ["x.json", "is a folder"]),
    "irc impossible date": ("irc", lambda t: irc_named(t, "2005-13-45_00"), ["2005-13-45_00.raw.txt", "not a date"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_former_tracebacks_are_one_line_errors(case, tmp_path, capsys):
    fmt, make, needles = CASES[case]
    db = tmp_path / "t.duckdb"
    assert main(["import", "jsonl", str(FIXTURES.parent.parent / "data" / "demo.jsonl"), "--db", str(db),
                 "--corpus", "before"]) == 0
    before = Store(db)
    counts = before.counts("before")
    before.close()
    capsys.readouterr()
    code, err = run_cli(capsys, "import", fmt, str(make(tmp_path)), "--db", str(db), "--corpus", "before")
    assert_one_line_error(code, err, *needles)
    after = Store(db)
    assert after.corpora() == ["before"] and after.counts("before") == counts  # the database is unchanged


def test_deep_json_is_refused(tmp_path, capsys):
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "deep.jsonl").write_text(deep + "\n")
    (tmp_path / "deep.json").write_text(deep)
    code, err = run_cli(capsys, "import", "jsonl", str(tmp_path / "deep.jsonl"), "--db", str(tmp_path / "d.duckdb"))
    assert_one_line_error(code, err, "deep.jsonl:1", "nested deeper than")
    code, err = run_cli(capsys, "import", "locomo", str(tmp_path / "deep.json"), "--db", str(tmp_path / "d.duckdb"))
    assert_one_line_error(code, err, "deep.json", "nested deeper than")
    moderately = "[" * (limits.MAX_JSON_DEPTH + 1) + "]" * (limits.MAX_JSON_DEPTH + 1)
    (tmp_path / "m.json").write_text(moderately)
    with pytest.raises(CorpusError, match="nested deeper than"):
        load("locomo", tmp_path / "m.json")


@pytest.mark.parametrize("content", [b"not a database at all", None])
def test_db_that_is_not_a_duckdb_file(content, tmp_path, capsys):
    db = tmp_path / "x.duckdb"
    if content is None:
        db.mkdir()
    else:
        db.write_bytes(content)
    code, err = run_cli(capsys, "import", "jsonl", str(FIXTURES.parent.parent / "data" / "demo.jsonl"),
                        "--db", str(db))
    assert_one_line_error(code, err, str(db), "cannot be opened", "--db")


# --------------------------------------------------------------------------------------- accepted oddities
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_phase_progress_is_refused(value, tmp_path):
    path = tmp_path / "bad.jsonl"
    record = '{"id": "m1", "text": "hi", "timestamp": "2025-01-01T10:00", "phase_progress": ' + value + "}"
    path.write_text(record + "\n")
    with pytest.raises(CorpusError, match=r"bad.jsonl:1: field 'phase_progress' must be a finite number"):
        load("jsonl", path)


def test_irc_impossible_clock_is_refused(tmp_path):
    raw = irc_named(tmp_path, "2024-01-31_00", "[99:99] <nick> hello")
    with pytest.raises(CorpusError, match=r"2024-01-31_00.raw.txt:4: field 'time': \[99:99\] is not a time of day"):
        load("irc", raw)


def test_slack_ts_with_a_trailing_newline_is_refused(tmp_path):
    with pytest.raises(CorpusError, match=r"message 1\]: field 'ts' must be a Slack timestamp"):
        load("slack", slack_with(tmp_path, ts="1709543100.000200\n"))


@pytest.mark.parametrize("k", ["-5", "0"])
def test_ask_refuses_a_non_positive_k(k, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["ask", "--k", k, "--question", "x"])
    assert exc.value.code == 2 and "--k" in capsys.readouterr().err


def test_timestamps_outside_the_accepted_years_are_refused(tmp_path):
    for value in ("1066-10-14T09:00", "9999-12-31T00:00", 1e12):
        with pytest.raises(CorpusError, match="bad.jsonl:1: field 'timestamp'"):
            load("jsonl", jsonl(tmp_path, timestamp=value))


# ------------------------------------------------------------------------------------------------- bounds
def test_long_message_text_is_truncated_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_MAX_MESSAGE_CHARS", "100")
    imported = load("jsonl", jsonl(tmp_path, text="x" * 1000))
    text = imported.data.messages[0].text
    assert text.startswith("x" * 100) and "truncated by tmem: 900 more characters" in text and len(text) < 200
    assert any("1 message text(s) longer than 100 characters were truncated (first: default / m1" in n
               for n in imported.notes)


def test_a_bad_limit_setting_is_an_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TMEM_MAX_MESSAGE_CHARS", "lots")
    with pytest.raises(ValueError, match=r"\$TMEM_MAX_MESSAGE_CHARS must be a whole number"):
        load("jsonl", jsonl(tmp_path))


def test_plain_upload_total_is_bounded(fresh_store, monkeypatch):
    monkeypatch.setenv("TMEM_MAX_UPLOAD_BYTES", "1000")
    with pytest.raises(CorpusError, match="over the upload limit of 1,000 bytes"):
        api.import_corpus(fresh_store, "c", "jsonl", uploads=[("big.jsonl", b" " * 2000)])
    assert limits.MAX_UPLOAD_BYTES == 512 * 1024 ** 2


def test_control_characters_are_stripped_for_terminals():
    assert limits.strip_control("ok\x1b]52;c;ZXZpbA==\x07 \x1b[31mred\x9b\ttab\nline") == \
        "ok\ufffd]52;c;ZXZpbA==\ufffd \ufffd[31mred\ufffd\ttab\nline"


def test_ask_prints_chat_text_without_terminal_escapes(tmp_path, capsys):
    """Message text is data: an escape sequence in it (here: set the window title, colour) must not reach the
    terminal when `ask` prints the forest."""
    path = tmp_path / "esc.jsonl"
    evil = "the launch moved to Friday \x1b]0;pwned\x07 \x1b[31mred\x1b[0m"
    path.write_text("\n".join(json.dumps({"id": f"m{i}", "text": evil if i == 1 else f"launch note {i}",
                                          "timestamp": f"2025-01-0{i + 1}T10:00", "scope": "s"}) for i in range(3)))
    db = str(tmp_path / "esc.duckdb")
    assert main(["import", "jsonl", str(path), "--db", db, "--corpus", "esc"]) == 0
    capsys.readouterr()
    assert main(["ask", "--db", db, "--corpus", "esc", "--scope", "s", "--text", "When is the launch?",
                 "--no-save"]) == 0
    out = capsys.readouterr().out
    assert "launch moved to Friday" in out, "the message is printed (else this test checks nothing)"
    assert "\x1b" not in out and "\x07" not in out and "\ufffd]0;pwned" in out


def test_an_input_reached_through_a_link_still_imports(tmp_path):
    """Only links *inside* the input are refused; the input itself may sit behind one (a mounted data folder)."""
    real = tmp_path / "mnt" / "acme"
    shutil.copytree(SLACK, real)
    (tmp_path / "data").symlink_to(tmp_path / "mnt", target_is_directory=True)
    imported = load("slack", tmp_path / "data" / "acme")
    assert len(imported.data.messages) == 8


def test_answers_are_capped_with_a_mark(tmp_path, capsys):
    """The offline flat answer repeats a message: a 15,000-character one (under the import cap) is cut at
    limits.MAX_ANSWER_CHARS, visibly, in the printout and in the stored trace."""
    path = tmp_path / "long.jsonl"
    long_text = "the budget moved " + "budget " * 2140
    path.write_text("\n".join(json.dumps({"id": f"m{i}", "text": long_text if i == 0 else f"note {i}",
                                          "timestamp": f"2025-01-0{i + 1}T10:00", "scope": "s"}) for i in range(3)))
    db = str(tmp_path / "long.duckdb")
    assert main(["import", "jsonl", str(path), "--db", db, "--corpus", "long"]) == 0
    assert main(["ask", "--db", db, "--corpus", "long", "--scope", "s", "--text", "What about the budget?",
                 "--json"]) == 0
    trace = json.loads(capsys.readouterr().out.splitlines()[-1])
    texts = [a["text"] for a in trace["answers"]]
    assert len(long_text) > limits.MAX_ANSWER_CHARS and texts  # the premise: the message is longer than the cap
    assert all(len(t) <= limits.MAX_ANSWER_CHARS + 60 for t in texts)
    assert any("truncated by tmem" in t for t in texts), texts[0][:80]


def test_trace_size_is_bounded(monkeypatch):
    monkeypatch.setattr(limits, "MAX_TRACE_BYTES", 10)
    with pytest.raises(ValueError, match="question 'q1' is 22 bytes, over the 10-byte limit; it was not stored"):
        limits.check_trace_size('{"x": "0123456789abc"}', "q1")
    assert limits.check_trace_size("{}", "q1") == "{}"
