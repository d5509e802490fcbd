"""Ubuntu IRC importer: real dev+test logs (exact counts) and a fixture with a midnight wrap, an action line,
a system line, a U+2028 inside a message, self-links and reversed / duplicate / system-line links."""
from datetime import datetime
from pathlib import Path

import pytest
from conftest import BENCHMARKS

from tmem.corpora.irc import load_irc
from tmem.store import CorpusError

FIXTURE = Path(__file__).parent / "fixtures" / "irc"
IRC = BENCHMARKS / "ubuntu-irc-disentanglement"


@pytest.fixture(scope="module")
def real():
    if not IRC.exists():
        pytest.skip("../shared/benchmarks/ubuntu-irc-disentanglement not present")
    return load_irc(IRC)


def test_real_counts(real):
    data = real.data
    assert len({m.scope for m in data.messages}) == 20
    # 27,500 lines = 25,534 timestamped lines (<nick> messages and "* nick" actions) + 1,966 "===" system lines
    assert len(data.messages) == 25534
    # 6,410 non-self annotation links, of which 12 touch a "===" line (reported, not loaded); 838 self-links mark
    # conversation starts and are kept as gold roots (parent = child)
    parents = [link for link in data.links if link[1] != link[2]]
    assert len(parents) == 6398 and len(data.links) - len(parents) == 838 and len(real.notes) == 12
    assert all("not a message" in n for n in real.notes)
    assert not data.questions


def test_real_ids_times_and_links(real):
    first = next(m for m in real.data.messages if m.scope == "2004-11-15_03")
    assert (first.id, first.author, first.timestamp) == ("0", "|trey|", datetime(2004, 11, 15, 12, 18))
    assert first.text == "usual, quite stable though  :)"
    ids = {(m.scope, m.id) for m in real.data.messages}
    assert all((s, c) in ids and (s, p) in ids and int(p) < int(c) for s, c, p in real.data.links if c != p)
    assert all(m.reply_to is None for m in real.data.messages)  # reply links are gold only
    # the file's first 9 lines are stamped 12:18: spread over the minute in log order, 60/9 s apart
    first_minute = [m.timestamp for m in real.data.messages if m.scope == "2004-11-15_03"][:10]
    assert [(t.minute, t.second) for t in first_minute] == [(18, 0), (18, 6), (18, 13), (18, 20), (18, 26), (18, 33),
                                                            (18, 40), (18, 46), (18, 53), (19, 0)]
    by_id = {(m.scope, m.id): m.timestamp for m in real.data.messages}
    assert all(by_id[s, p] < by_id[s, c] for s, c, p in real.data.links if c != p)  # gold parents are earlier
    # a 12-hour clock: line 1,001 of 2005-08-08_01 reads [01:00] right after [12:59], i.e. 13:00 the same day
    assert by_id["2005-08-08_01", "1000"].replace(second=0, microsecond=0) == datetime(2005, 8, 8, 13, 0)


def test_fixture(tmp_path):
    result = load_irc(FIXTURE / "2024-01-31_00.raw.txt")
    messages = {m.id: m for m in result.data.messages}
    assert sorted(messages, key=int) == ["0", "2", "3", "4", "5", "6", "7"]  # line 1 is a === system line
    assert messages["0"].timestamp == datetime(2024, 1, 31, 23, 58)
    assert messages["3"].timestamp == datetime(2024, 2, 1, 0, 1)  # the clock wrapped past midnight
    assert (messages["4"].author, messages["4"].text) == ("bob", "bob looks at the logs")
    # "4" and "5" share the minute 00:02: log order spreads them over it (0 s and 30 s), so "5" is later than "4"
    assert (messages["4"].timestamp, messages["5"].timestamp) == (datetime(2024, 2, 1, 0, 2),
                                                                  datetime(2024, 2, 1, 0, 2, 30))
    assert messages["6"].text == "carol: that worked\u2028thanks"  # U+2028 does not split the line
    assert messages["7"].author == "dave" and {m.scope for m in messages.values()} == {"2024-01-31_00"}
    assert sorted(result.data.links) == sorted([("2024-01-31_00", "2", "0"), ("2024-01-31_00", "3", "2"),
                                                ("2024-01-31_00", "5", "3"), ("2024-01-31_00", "6", "5"),
                                                ("2024-01-31_00", "0", "0"), ("2024-01-31_00", "7", "7")])
    assert len(result.notes) == 1 and "link 1-2" in result.notes[0]


def test_missing_annotation_and_bad_names(tmp_path):
    (tmp_path / "2024-01-01_00.raw.txt").write_text("[10:00] <a> hi\n")
    with pytest.raises(CorpusError, match="annotation file 2024-01-01_00.annotation.txt is missing"):
        load_irc(tmp_path)
    (tmp_path / "2024-01-01_00.annotation.txt").write_text("0 x -\n")
    with pytest.raises(CorpusError, match=r"2024-01-01_00.annotation.txt:1: expected 'LINE LINE -'"):
        load_irc(tmp_path)
    bad = tmp_path / "sub"
    bad.mkdir()
    (bad / "chat.raw.txt").write_text("[10:00] <a> hi\n")
    with pytest.raises(CorpusError, match="must start with the log date"):
        load_irc(bad / "chat.raw.txt")
