"""Uploads, as the Corpus page makes them (`api.import_corpus(..., uploads=[(name, bytes)])`): a .zip of each
format's folder layout or its plain files; scopes named from the upload, never the temporary folder; errors and
notes that name paths inside the upload; zip safety (absolute paths, `..`, links, size); the staging folder always
deleted; and the page itself under AppTest."""
from __future__ import annotations

import io
import stat
import tempfile
import zipfile
from pathlib import Path

import pytest

from tmem import api
from tmem.corpora.formats import BY_NAME
from tmem.store import CorpusError

FIXTURES = Path(__file__).parent / "fixtures"
RAW = FIXTURES / "irc" / "2024-01-31_00.raw.txt"
CONVERSATION = FIXTURES / "groupmembench" / "data" / "final" / "Finance" / \
    "synthetic_domain_channels_rolevariants_Finance.json"


def zip_of(folder: Path, prefix: str = "") -> bytes:
    """The files under `folder` as a zip, each stored as `prefix` + its path relative to `folder`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, prefix + path.relative_to(folder).as_posix())
    return buffer.getvalue()


def zip_with(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def files(*paths: Path) -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in paths]


@pytest.fixture
def staging(tmp_path, monkeypatch):
    """Temporary folders go here, so a test can check that the upload's staging folder is gone afterwards."""
    folder = tmp_path / "staging"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def scopes(store, corpus: str) -> set[str]:
    return set(store.messages_frame(corpus)["scope"])


# format -> (upload, scopes, messages, questions, evidence units, gold links); the counts equal the CLI's on the
# same fixtures (tests/test_corpora_imports.py GOOD)
ZIPS = {
    "slack": (lambda: [("acme.zip", zip_of(FIXTURES / "slack" / "acme"))], {"acme"}, 8, 0, 0, 0),
    "irc": (lambda: [("logs.zip", zip_of(FIXTURES / "irc"))], {"2024-01-31_00"}, 7, 0, 0, 4),
    "groupmembench": (lambda: [("gmb.zip", zip_of(FIXTURES / "groupmembench"))], {"Finance"}, 6, 3, 0, 2),
    "evermembench": (lambda: [("ever.zip", zip_of(FIXTURES / "evermembench"))], {"01"}, 5, 3, 4, 0),
    "locomo": (lambda: [("mini.zip", zip_of(FIXTURES / "locomo"))], {"conv-a", "conv-b"}, 7, 7, 7, 0),
    "jsonl": (lambda: [("tiny.zip", zip_with({"tiny.jsonl": b'{"id": "m1", "text": "hi", "scope": "s", '
                                                            b'"timestamp": "2025-01-01T10:00:00"}\n'}))],
              {"s"}, 1, 0, 0, 0),
}
PLAIN = {
    "irc": (lambda: files(*sorted((FIXTURES / "irc").iterdir())), {"2024-01-31_00"}, 7, 0, 0, 4),
    "groupmembench": (lambda: files(CONVERSATION, *sorted((FIXTURES / "groupmembench" / "questions" / "Finance")
                                                         .iterdir())), {"Finance"}, 6, 3, 0, 2),
    "evermembench": (lambda: files(FIXTURES / "evermembench" / "01" / "dialogue.json",
                                   FIXTURES / "evermembench" / "01" / "qa_01.json",
                                   FIXTURES / "evermembench" / "profiles.json"), {"01"}, 5, 3, 4, 0),
    "locomo": (lambda: files(FIXTURES / "locomo" / "mini.json"), {"conv-a", "conv-b"}, 7, 7, 7, 0),
}


def check(store, corpus, expected, staging):
    _, scope_names, messages, questions, units, links = expected
    assert store.counts(corpus) == {"scopes": len(scope_names), "messages": messages, "questions": questions,
                                    "evidence_units": units, "gold_links": links}
    assert scopes(store, corpus) == scope_names  # from the upload's names, never "tmem-upload-..."
    assert store.corpus_info(corpus)["source"].startswith("upload: ")
    assert "tmem-upload" not in store.corpus_info(corpus)["notes"]
    assert list(staging.iterdir()) == []  # the staging folder is deleted


@pytest.mark.parametrize("fmt", sorted(ZIPS))
def test_zip_upload_of_each_format(fmt, fresh_store, staging):
    api.import_corpus(fresh_store, "up", fmt, uploads=ZIPS[fmt][0]())
    check(fresh_store, "up", ZIPS[fmt], staging)
    assert fresh_store.corpus_info("up")["format"] == fmt


@pytest.mark.parametrize("fmt", sorted(PLAIN))
def test_plain_file_upload_of_each_format(fmt, fresh_store, staging):
    api.import_corpus(fresh_store, "up", fmt, uploads=PLAIN[fmt][0]())
    check(fresh_store, "up", PLAIN[fmt], staging)


def test_every_format_says_what_to_upload():
    formats = api.import_formats()
    assert list(formats)[0] == "jsonl" and set(formats) == set(BY_NAME) == {
        "jsonl", "locomo", "groupmembench", "evermembench", "slack", "irc"}
    assert all(hint and types for hint, types in formats.values())
    assert formats["slack"][1] == ["zip"] and "annotation.txt" in formats["irc"][0]


def test_evermembench_plain_files_keep_profiles_and_qa(fresh_store, staging):
    api.import_corpus(fresh_store, "ever", "evermembench", uploads=PLAIN["evermembench"][0]())
    frame = fresh_store.messages_frame("ever")
    assert "Product Director" in set(frame["role"])  # profiles.json was joined
    assert {q.id for q in fresh_store.questions("ever")} == {"F_SH_Top001_001", "F_SH_Top001_002",
                                                             "M_UP_Top001_003"}


def test_zip_with_files_at_the_top_is_named_after_the_zip(fresh_store, staging):
    top = FIXTURES / "slack" / "acme"
    api.import_corpus(fresh_store, "ws", "slack", uploads=[("Acme export.zip", zip_of(top))])
    assert scopes(fresh_store, "ws") == {"Acme export"}
    api.import_corpus(fresh_store, "ws", "slack", uploads=[("x.zip", zip_of(top, "acme-ws/"))])
    assert scopes(fresh_store, "ws") == {"acme-ws"}  # a single top folder names the workspace


def test_conversation_file_alone_says_it_has_no_questions(fresh_store, staging):
    notes = api.import_corpus(fresh_store, "g", "groupmembench", uploads=files(CONVERSATION))
    assert fresh_store.counts("g")["questions"] == 0
    assert any("no questions/Finance/ folder" in n and CONVERSATION.name in n for n in notes)
    assert not any("tmem-upload" in n for n in notes)


# ------------------------------------------------------------------------------------------- refused uploads
def _slack_bad_day() -> list[tuple[str, bytes]]:
    members = {f"acme/{p.relative_to(FIXTURES / 'slack' / 'acme').as_posix()}": p.read_bytes()
               for p in (FIXTURES / "slack" / "acme").rglob("*") if p.is_file()}
    members["acme/general/2024-03-05.json"] = b'[{"type": "message", "user": "U01ANA", "ts": "1.0", "files": 3}]'
    return [("acme.zip", zip_with(members))]


REFUSED = {
    "slack-plain-files": ("slack", lambda: files(*sorted((FIXTURES / "slack" / "acme").glob("*.json"))),
                          r"uploaded as its \.zip"),
    "irc-without-annotation": ("irc", lambda: files(RAW),
                               r"2024-01-31_00\.annotation\.txt: missing; upload each \.raw\.txt together"),
    "irc-zip-without-annotation": ("irc", lambda: [("l.zip", zip_with({"2024-01-31_00.raw.txt": RAW.read_bytes()}))],
                                   r"^l\.zip/2024-01-31_00\.raw\.txt: the annotation file .* is missing"),
    "zip-and-files": ("irc", lambda: [("a.zip", zip_with({"x": b"1"})), ("b.raw.txt", b"")],
                      "upload one .zip, or plain files, not both"),
    "two-jsonl": ("jsonl", lambda: [("a.jsonl", b""), ("b.jsonl", b"")], "this format takes one file"),
    "zip-with-two-jsonl": ("jsonl", lambda: [("a.zip", zip_with({"a.jsonl": b"", "b/c.jsonl": b""}))],
                           r"a\.zip: expected one \*\.jsonl file, found 2"),
    "slack-zip-without-export": ("slack", lambda: [("a.zip", zip_with({"notes.txt": b"hi"}))],
                                 r"a\.zip: expected a folder with channels\.json"),
    "not-a-zip": ("slack", lambda: [("a.zip", b"PK not really")], r"a\.zip: not a valid \.zip file"),
    "groupmembench-questions-for-two-domains": (
        "groupmembench", lambda: [("a_Finance.json", b"{}"), ("b_Health.json", b"{}"), ("temporal.jsonl", b"")],
        "question files can go with one conversation file only"),
    "evermembench-two-topics": ("evermembench", lambda: [("dialogue.json", b"{}"), ("qa_01.json", b"[]"),
                                                         ("qa_02.json", b"[]")], "QA files of several topics"),
    "evermembench-stray-file": ("evermembench", lambda: [("dialogue.json", b"{}"), ("notes.txt", b"")],
                                r"notes\.txt: not an EverMemBench file"),
    "bad-record-names-the-upload": ("slack", _slack_bad_day,
                                    r"^acme\.zip/acme/general/2024-03-05\.json \[message 0\]: field 'files' must "
                                    r"be a list, got int"),
    "bad-plain-file-names-it": ("jsonl", lambda: [("mine.jsonl", b'{"id": "m1"}\n')],
                                r"^mine\.jsonl:1: required field 'text' is missing"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_uploads_name_the_upload_and_leave_nothing(case, fresh_store, staging):
    fmt, make, message = REFUSED[case]
    with pytest.raises(CorpusError, match=message) as caught:
        api.import_corpus(fresh_store, "c", fmt, uploads=make())
    assert "tmem-upload" not in str(caught.value)
    assert fresh_store.corpora() == [] and list(staging.iterdir()) == []


def _symlink_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        link = zipfile.ZipInfo("acme/users.json")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    return buffer.getvalue()


UNSAFE = {
    "absolute": (lambda: zip_with({"/etc/cron.d/evil": b"x"}), "has an absolute path"),
    "windows-absolute": (lambda: zip_with({"C:/evil.json": b"x"}), "has an absolute path"),
    "dot-dot": (lambda: zip_with({"acme/../../evil.json": b"x"}), r"points outside the zip \('\.\.'\)"),
    "backslash-dot-dot": (lambda: zip_with({"acme\\..\\..\\evil.json": b"x"}), r"points outside the zip"),
    "symlink": (_symlink_zip, "is a symbolic link"),
    "bomb": (lambda: zip_with({"acme/channels.json": b"[" + b" " * 5_000_000 + b"]"}),
             "expands to 5,000,002 bytes, over the upload limit of 1,000,000 bytes"),
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_unsafe_zips_are_refused_before_anything_is_written(case, fresh_store, staging, monkeypatch, tmp_path):
    monkeypatch.setenv("TMEM_MAX_UPLOAD_BYTES", "1000000")
    make, message = UNSAFE[case]
    with pytest.raises(CorpusError, match=message):
        api.import_corpus(fresh_store, "c", "slack", uploads=[("evil.zip", make())])
    assert list(staging.iterdir()) == [] and fresh_store.corpora() == []
    assert not (tmp_path / "evil.json").exists() and not (tmp_path.parent / "evil.json").exists()


def test_a_zip_of_more_entries_than_the_limit_is_refused_before_extracting(fresh_store, staging, monkeypatch):
    """Issue 44: a zip of 199,999 empty files was extracted whole (205-388 s). The entry count is bounded like the
    upload's bytes: 20,000 by default, TMEM_MAX_UPLOAD_FILES to raise it; nothing is written past it."""
    from tmem import limits

    many = zip_with({f"acme/c{i}/2024-01-01.json": b"" for i in range(limits.MAX_UPLOAD_FILES + 1)})
    with pytest.raises(CorpusError, match=r"many.zip: 20,001 members, more than the 20,000 an upload may hold "
                                          r"\(set TMEM_MAX_UPLOAD_FILES to raise it\)"):
        api.import_corpus(fresh_store, "c", "slack", uploads=[("many.zip", many)])
    assert list(staging.iterdir()) == [] and fresh_store.corpora() == []
    monkeypatch.setenv("TMEM_MAX_UPLOAD_FILES", "5")
    six = zip_with({f"acme/c{i}/2024-01-01.json": b"[]" for i in range(6)})
    with pytest.raises(CorpusError, match="6 members, more than the 5"):
        api.import_corpus(fresh_store, "c", "slack", uploads=[("six.zip", six)])


def test_size_is_counted_while_extracting_too(fresh_store, staging, monkeypatch):
    """Extraction counts the bytes it writes, so a zip stops at the limit even past the header check."""
    from tmem.corpora import upload

    monkeypatch.setenv("TMEM_MAX_UPLOAD_BYTES", "1000000")
    monkeypatch.setattr(upload, "check_declared_size", lambda infos, label: None)  # as if the headers lied
    bomb = zip_with({f"acme/{i}/2024-01-01.json": b" " * 400_000 for i in range(3)})
    with pytest.raises(CorpusError, match="bomb.zip: expands to more than the upload limit of 1,000,000 bytes"):
        api.import_corpus(fresh_store, "c", "slack", uploads=[("bomb.zip", bomb)])
    assert list(staging.iterdir()) == []


def test_a_failed_upload_leaves_the_previous_corpus(fresh_store, staging):
    api.import_corpus(fresh_store, "c", "slack", uploads=ZIPS["slack"][0]())
    before = fresh_store.counts("c"), fresh_store.corpus_info("c")
    with pytest.raises(CorpusError):
        api.import_corpus(fresh_store, "c", "slack", uploads=_slack_bad_day())
    assert (fresh_store.counts("c"), fresh_store.corpus_info("c")) == before


# ------------------------------------------------------------------------------------------ the page itself
def _upload_through_page(at, fmt: str, name: str, uploads: list[tuple[str, bytes]]):
    at.selectbox(key="import_fmt").set_value(fmt).run()
    at.text_input[0].set_value(name)  # the form's fields: name, then path
    at.file_uploader(key=f"upload_{fmt}").set_value([(n, c, "application/octet-stream") for n, c in uploads])
    next(b for b in at.button if b.label == "Import").click().run()
    return at


@pytest.mark.app
@pytest.mark.parametrize("fmt,uploads", [("slack", ZIPS["slack"][0]), ("irc", PLAIN["irc"][0])])
def test_page_uploads_and_selects_the_corpus(app, staging, fmt, uploads):
    at = _upload_through_page(app("pages/corpus.py", corpus="golden"), fmt, "up", uploads())
    assert not at.exception and not at.error
    assert at.selectbox(key="corpus").value == "up"
    assert {m.label: m.value for m in at.metric}["messages"] == str(ZIPS[fmt][2])
    assert list(staging.iterdir()) == []


@pytest.mark.app
def test_page_says_what_each_format_expects(app):
    at = app("pages/corpus.py", corpus="golden")
    for fmt in ("slack", "irc", "evermembench"):
        at.selectbox(key="import_fmt").set_value(fmt).run()
        captions = " ".join(c.value for c in at.caption)
        assert f"Upload for {fmt}:" in captions and BY_NAME[fmt].upload_hint[:30] in captions
        assert at.file_uploader(key=f"upload_{fmt}").allowed_type == [f".{t}" for t in BY_NAME[fmt].upload_types]


@pytest.mark.app
def test_page_shows_upload_errors_escaped(app, staging):
    at = _upload_through_page(app("pages/corpus.py", corpus="golden"), "slack", "bad", _slack_bad_day())
    shown = " ".join(e.value for e in at.error)
    assert "Import failed" in shown and "field 'files' must be a list" in shown
    assert r"acme\.zip/acme/general/2024\-03\-05\.json \[message 0\]" in shown  # md(): the file name stays text
    assert "bad" not in at.selectbox(key="corpus").options
    assert list(staging.iterdir()) == []
