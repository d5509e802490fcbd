"""Split markers (tmem/corpora/splits.py): a corpus folder's split.json (or the IRC release's split folder) is
recorded in the corpora table at import; `corpus_split` reads it back; fit-relation refuses a test or sealed split
by that record, whatever the corpus is called."""
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from tmem import api
from tmem.cli import main as cli
from tmem.corpora.imports import import_corpus
from tmem.corpora.splits import Split, corpus_split, parse_marker
from tmem.store import Store
from tmem.types import CorpusError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CASES = Path(__file__).resolve().parent.parent / "data" / "cases"


def chat_folder(tmp_path: Path, marker: dict | None, name: str = "chats") -> Path:
    """The GroupMemBench fixture (4 annotated children) copied under tmp_path/<name>, with a split.json."""
    folder = tmp_path / name
    shutil.copytree(FIXTURES / "groupmembench", folder)
    if marker is not None:
        (folder / "split.json").write_text(json.dumps(marker), encoding="utf-8")
    return folder


@pytest.mark.parametrize(("marker", "error"), [
    ('{"split": "validation"}', "field 'split' must be one of dev, test, train, got 'validation'"),
    ('{"split": "test", "sealed": "yes"}', "field 'sealed' must be true or false, got 'yes'"),
    ('{"split": "dev", "seal": true}', "unknown field 'seal'"),
    ('["test"]', "expected an object"),
    ('{"split": ', "not valid JSON"),
])
def test_a_bad_marker_is_one_line_naming_the_file_and_field(marker, error):
    with pytest.raises(CorpusError, match=r"^x/split\.json(:\d+)?: ") as info:
        parse_marker(marker, "x/split.json", "x/y")
    assert error in str(info.value) and "\n" not in str(info.value)


def test_the_shipped_cases_declare_dev_and_a_sealed_test():
    """Only the marker files are read, never the held-out cases themselves."""
    read = lambda split: parse_marker((CASES / split / "split.json").read_text(encoding="utf-8"), split, "")  # noqa: E731
    assert read("dev") == Split("dev", False, "") and not read("dev").held_out
    assert read("test") == Split("test", True, "") and read("test").held_out


def test_every_shipped_marker_parses_and_every_shipped_test_split_is_sealed():
    markers = sorted((CASES.parent).rglob("split.json"))
    assert CASES / "test" / "split.json" in markers
    for marker in markers:
        split = parse_marker(marker.read_text(encoding="utf-8"), str(marker), "")
        assert split.split == marker.parent.name, marker  # the folder says the same
        assert split.sealed == (split.split == "test"), marker


def test_the_importer_records_the_marker_and_the_split_is_named_by_its_folder(tmp_path):
    store = Store(tmp_path / "x.duckdb")
    import_corpus(store, "groupmembench", chat_folder(tmp_path, {"split": "test", "sealed": True}), corpus="innocent")
    assert store.corpus_info("innocent")["split"] == "test"
    assert corpus_split(store, "innocent") == Split("test", True, f"{tmp_path.name}/chats")
    # a marker above a single conversation file is found too (the folder of the split, up to three levels up)
    one = next((tmp_path / "chats").rglob("synthetic_domain_channels_*.json"))
    import_corpus(store, "groupmembench", one, corpus="one-file", root=tmp_path / "chats")
    assert corpus_split(store, "one-file") == Split("test", True, f"{tmp_path.name}/chats")
    store.close()


def test_without_a_marker_there_is_no_split_and_an_old_import_reads_its_source(tmp_path):
    store = Store(tmp_path / "x.duckdb")
    plain = chat_folder(tmp_path, None, "plain")
    import_corpus(store, "groupmembench", plain, corpus="plain")
    (plain / "split.json").write_text('{"split": "test", "sealed": true}', encoding="utf-8")
    assert corpus_split(store, "plain") is None  # imported without a marker: "" recorded, the source is not re-read
    # a row from before the split columns (NULL) is read from its recorded source folder's marker
    store.cursor().execute("UPDATE corpora SET split = NULL, sealed = NULL, split_of = NULL")
    assert corpus_split(store, "plain") == Split("test", True, f"{tmp_path.name}/plain")
    store.close()


def test_the_irc_importer_records_the_release_split_folder(tmp_path):
    folder = tmp_path / "ubuntu" / "test"
    shutil.copytree(FIXTURES / "irc", folder)
    store = Store(tmp_path / "x.duckdb")
    import_corpus(store, "irc", folder, corpus="logs")
    split = corpus_split(store, "logs")
    assert split == Split("test", False, "ubuntu/test") and split.held_out  # held out, not sealed
    store.close()


@pytest.mark.parametrize(("marker", "words"), [({"split": "test", "sealed": True}, "sealed test split"),
                                               ({"split": "test"}, "is the test split")])
def test_fit_relation_refuses_a_held_out_split_by_its_marker_not_its_name(tmp_path, capsys, marker, words):
    db = tmp_path / "x.duckdb"
    store = Store(db)
    import_corpus(store, "groupmembench", chat_folder(tmp_path, marker), corpus="cases-dev")
    store.close()
    out = tmp_path / "w.json"
    assert cli(["fit-relation", "--corpus", "cases-dev", "--db", str(db), "--out", str(out), "--embedder",
                "lexical"]) == 1
    err = capsys.readouterr().err
    assert words in err and f"{tmp_path.name}/chats" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_fit_relation_fits_a_dev_split_whatever_its_name(tmp_path, capsys):
    db = tmp_path / "x.duckdb"
    store = Store(db)
    import_corpus(store, "groupmembench", chat_folder(tmp_path, {"split": "dev"}), corpus="held-out-test")
    store.close()
    out = tmp_path / "w.json"
    assert cli(["fit-relation", "--corpus", "held-out-test", "--db", str(db), "--out", str(out), "--embedder",
                "lexical"]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["fitted_on"]


def test_a_zip_upload_keeps_its_marker(tmp_path, fresh_store):
    """The Corpus page's upload of a dataset folder holding split.json (a .zip) records the split too."""
    folder = chat_folder(tmp_path, {"split": "test", "sealed": True}, "held")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, "held/" + path.relative_to(folder).as_posix())
    api.import_corpus(fresh_store, "up", "groupmembench", uploads=[("held.zip", buffer.getvalue())])
    split = corpus_split(fresh_store, "up")
    assert split is not None and split.sealed and split.split == "test" and split.split_of.endswith("/held")
