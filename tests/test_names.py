"""No path from data: corpus, scope and run names are single safe names in the CLI, the app's import and batch
paths, and the store; every path built from one is resolved and checked inside its base."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tmem import api, limits
from tmem.cli import main
from tmem.evaluation.batch import jobs
from tmem.types import CorpusError

FIXTURES = Path(__file__).parent / "fixtures"
UNSAFE = ["../../../../some/dir/pwn", "a/b", "..", ".hidden", "--out", "tab\there", "x" * 101, "", "a\\b", "end."]


@pytest.mark.parametrize("name", UNSAFE)
def test_unsafe_names_are_refused(name):
    with pytest.raises(ValueError, match="is not a single safe name"):
        limits.safe_name(name, "corpus name")


@pytest.mark.parametrize("name", ["demo", "locomo", "2005-07-06_14", "conv-26", "my corpus (v2)", "Финансы", "_x"])
def test_ordinary_names_pass(name):
    assert limits.safe_name(name, "corpus name") == name


def test_path_under_refuses_what_resolves_outside(tmp_path):
    assert limits.path_under(tmp_path, "run-1") == (tmp_path / "run-1").resolve()
    (tmp_path / "link").symlink_to(tmp_path.parent)
    for parts in (("..", "x"), ("/etc",), ("link", "x"), (".",)):
        with pytest.raises(ValueError, match="would be outside"):
            limits.path_under(tmp_path, *parts)


def test_the_app_import_refuses_a_path_as_corpus_name(fresh_store):
    upload = [("mini.json", (FIXTURES / "locomo" / "mini.json").read_bytes())]
    with pytest.raises(ValueError, match="corpus name '../../../../some/dir/pwn' is not a single safe name"):
        api.import_corpus(fresh_store, "../../../../some/dir/pwn", "locomo", uploads=upload)
    assert fresh_store.corpora() == []


def test_the_cli_import_refuses_a_path_as_corpus_name(tmp_path, capsys):
    db = tmp_path / "t.duckdb"
    code = main(["import", "locomo", str(FIXTURES / "locomo" / "mini.json"), "--db", str(db), "--corpus", "../x"])
    err = capsys.readouterr().err
    assert code == 1 and "corpus name '../x' is not a single safe name" in err and "Traceback" not in err


def test_the_store_refuses_an_unsafe_corpus_name(fresh_store):
    from tmem.corpora.imports import load

    data = load("locomo", FIXTURES / "locomo" / "mini.json").data
    with pytest.raises(ValueError, match="not a single safe name"):
        fresh_store.replace_corpus("a/b", data, format="locomo")


def test_an_unsafe_scope_from_the_data_is_refused(tmp_path):
    from tmem.corpora.imports import load

    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"id": "m1", "scope": "../etc", "text": "hi", "timestamp": "2025-01-01T10:00"}) + "\n")
    with pytest.raises(CorpusError, match=r"s.jsonl: scope name '../etc' is not a single safe name"):
        load("jsonl", path)


def test_a_batch_never_builds_its_run_folder_from_an_unsafe_corpus_name(tmp_path):
    """The repro: a corpus named like a path, then Failures -> Run a batch wrote its folder outside runs/."""
    db = tmp_path / "app" / "t.duckdb"
    db.parent.mkdir()
    with pytest.raises(ValueError, match="not a single safe name"):
        jobs.start_batch(db, "../../../../some/dir/pwn", ["full"], 1, backend={"backend.preset": "offline"})
    with pytest.raises(ValueError, match="not a single safe name"):
        jobs.start_batch(db, "golden", ["full"], 1, backend={"backend.preset": "offline"}, label="../escape")
    assert not (tmp_path / "some").exists() and not list(tmp_path.rglob("app-job.log"))


def test_an_uploaded_file_name_over_255_bytes_is_a_clear_refusal(fresh_store):
    name = "é" * 130 + ".json"  # 265 bytes: staging it used to fail with [Errno 36] and the staging path
    with pytest.raises(CorpusError) as caught:
        api.import_corpus(fresh_store, "long", "locomo", uploads=[(name, (FIXTURES / "locomo" / "mini.json")
                                                                    .read_bytes())])
    message = str(caught.value)
    assert "the file name is 265 bytes, over the 255" in message
    assert "Errno" not in message and "tmem-upload-" not in message


def test_a_zip_member_name_over_255_bytes_is_refused(fresh_store):
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("d" * 300 + "/mini.json", (FIXTURES / "locomo" / "mini.json").read_bytes())
    with pytest.raises(CorpusError, match=r"a name in its path is over 255 bytes"):
        api.import_corpus(fresh_store, "long", "locomo", uploads=[("l.zip", buffer.getvalue())])
