"""The importers' registry (tmem.corpora.formats): every format once, by its own module's `FORMAT`; an unknown
name is one clear error; the defaults each `Format` carries."""
from pathlib import Path

import pytest

from tmem.corpora import formats
from tmem.corpora.common import place_single
from tmem.types import CorpusError


def test_every_importer_is_listed_once_the_projects_format_first():
    names = [f.name for f in formats.FORMATS]
    assert names[0] == "jsonl" and len(names) == len(set(names)) == 6
    assert formats.names() == sorted(names)
    assert all(f.read.__module__ == f"tmem.corpora.{f.name}" for f in formats.FORMATS)  # defined in its module


def test_an_unknown_format_is_one_clear_error():
    with pytest.raises(CorpusError, match=r"unknown import format 'csv' \(one of evermembench, groupmembench, irc, "
                                          r"jsonl, locomo, slack\)"):
        formats.get("csv")


def test_default_corpus_names_and_zip_members():
    assert formats.get("jsonl").default_corpus(Path("x/team-a.jsonl")) == "team-a"
    assert formats.get("locomo").default_corpus(Path("x/locomo10.json")) == "locomo"
    slack = formats.get("slack")
    assert (slack.zip_member, slack.zip_member_folder) == ("channels.json", True)
    assert formats.get("groupmembench").zip_member is None  # its reader searches the zip's folder itself


def test_a_one_file_format_takes_one_file(tmp_path):
    shown: dict[str, str] = {}
    path = place_single([("a.jsonl", b"{}")], tmp_path, shown)
    assert path.read_bytes() == b"{}" and shown == {str(tmp_path / "a.jsonl"): "a.jsonl"}
    with pytest.raises(CorpusError, match="this format takes one file"):
        place_single([("a.jsonl", b""), ("b.jsonl", b"")], tmp_path, shown)
