"""Slack workspace export: channels, users, mentions, threads, system notices, files, bots, bad input."""
import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from tmem.corpora.slack import load_slack, parse_ts, resolve_markup
from tmem.store import CorpusError

FIXTURE = Path(__file__).parent / "fixtures" / "slack" / "acme"


@pytest.fixture(scope="module")
def acme():
    return load_slack(FIXTURE)


def test_messages_and_mapping(acme):
    by_id = {m.id: m for m in acme.data.messages}
    assert len(by_id) == 8 and {m.scope for m in acme.data.messages} == {"acme"}
    root = by_id["general/1709543100.000200"]
    assert root.text == ("Morning all! @here the launch review moved to Thursday & the doc is here "
                         "(https://example.com/review)")
    assert (root.author, root.role, root.channel) == ("Ana Silva", "Product Manager", "#general")
    assert root.timestamp == datetime(2024, 3, 4, 9, 5, 0, 200)
    reply = by_id["general/1709543400.000300"]
    assert reply.text == "@Ana Silva thanks, I'll update #launch too"
    assert reply.reply_to == root.id and reply.role is None  # an empty job title stays empty
    assert by_id["general/1709543460.000400"].author == "cho"  # no real name: the user name
    assert by_id["general/1709629200.000100"].text == "[shared file: launch-checklist.pdf]"
    assert by_id["general/1709629260.000200"].author == "deploybot"
    assert by_id["general/1709629320.5"].author == "U09GONE"
    assert by_id["launch/1709550000.000100"].text == "Launch date stays March 21, see #general"
    assert by_id["launch/1709550060.000100"].reply_to is None  # its thread parent is not in the export
    times = [m.timestamp for m in acme.data.messages]
    assert times == sorted(times)
    assert all(m.topic is None and m.phase is None for m in acme.data.messages)


def test_notes_count_skipped_and_dangling(acme):
    assert any("1 thread replies" in n for n in acme.notes)
    assert any("1 system notices" in n for n in acme.notes)


def test_markup_and_ts():
    users = {"U1": ("Ana", None)}
    assert resolve_markup("<@U1|ana> <@U2> <!channel> <mailto:a@b.c|a@b.c> 1 &lt; 2", users, {}) == \
        "@Ana @U2 @channel a@b.c 1 < 2"
    assert parse_ts("1700000000", "x") == datetime(2023, 11, 14, 22, 13, 20)
    with pytest.raises(CorpusError, match="field 'ts'"):
        parse_ts("17e8", "x")


def test_bad_exports(tmp_path):
    with pytest.raises(CorpusError, match="unzip the export first"):
        load_slack(FIXTURE / "users.json")
    with pytest.raises(CorpusError, match="channels.json is missing"):
        load_slack(tmp_path)
    export = tmp_path / "ws"
    shutil.copytree(FIXTURE, export)
    day = export / "general" / "2024-03-05.json"
    records = json.loads(day.read_text())
    records.append(dict(records[0]))
    day.write_text(json.dumps(records))
    with pytest.raises(CorpusError, match=r"2024-03-05.json \[message 3\]: field 'ts': duplicate message ts"):
        load_slack(export)
    day.write_text(json.dumps([{"type": "message", "user": "U01ANA", "text": ["not", "a string"], "ts": "1.0"}]))
    with pytest.raises(CorpusError, match=r"\[message 0\]: field 'text' must be a string"):
        load_slack(export)


@pytest.mark.parametrize("files,message", [
    (3, r"2024-03-05.json \[message 0\]: field 'files' must be a list, got int"),
    ([{"name": 5.5}], r"2024-03-05.json \[message 0\] files\[0\]: field 'name' must be a string"),
])
def test_bad_files_field_names_file_record_and_field(tmp_path, files, message):
    export = tmp_path / "ws"
    shutil.copytree(FIXTURE, export)
    day = export / "general" / "2024-03-05.json"
    day.write_text(json.dumps([{"type": "message", "user": "U01ANA", "ts": "1.0", "files": files}]))
    with pytest.raises(CorpusError, match=message):
        load_slack(export)
