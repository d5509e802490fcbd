"""Property-based fuzzing of every importer: valid inputs from tests/fixtures, mutated (a value replaced
by another JSON type, a huge number, NaN, a hostile string, deep nesting; a key deleted; the file re-encoded,
truncated or given invalid bytes; a file or folder renamed), then imported through the CLI's and the upload's
code paths. Every example must end in either

- a clean import, or a CorpusError whose one-line message names the input (a file inside it); and
- on error, a database exactly as it was; and
- in both cases, no file opened or folder listed outside the input (package files aside).

Profiles: the default `ci` profile is small and derandomized (reproducible, well under a minute); the long one is
`make fuzz-long` (TMEM_FUZZ=long: thousands of random examples per importer).
"""
from __future__ import annotations

import builtins
import contextlib
import copy
import io
import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from zips import zip_folder

from tmem.corpora.imports import import_corpus
from tmem.corpora.upload import import_upload
from tmem.store import Store
from tmem.types import CorpusError

PROFILES = {
    "ci": settings(max_examples=12, derandomize=True, deadline=None, database=None, print_blob=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]),
    "long": settings(max_examples=3000, derandomize=False, deadline=None, database=None, print_blob=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]),
}
PROFILE = PROFILES[os.environ.get("TMEM_FUZZ", "ci")]  # read at import: conftest clears TMEM_* for the tests
if os.environ.get("TMEM_FUZZ_EXAMPLES"):  # e.g. a quick random round: TMEM_FUZZ=long TMEM_FUZZ_EXAMPLES=200
    PROFILE = settings(PROFILE, max_examples=int(os.environ["TMEM_FUZZ_EXAMPLES"]))

FIXTURES = Path(__file__).parent / "fixtures"
DEMO = Path(__file__).resolve().parent.parent / "data" / "demo.jsonl"
# format -> (what to copy into the input folder, the path handed to the importer, relative to the folder)
INPUTS = {
    "jsonl": ("jsonl", "small.jsonl"),
    "locomo": (FIXTURES / "locomo", "mini.json"),
    "groupmembench": (FIXTURES / "groupmembench", "."),
    "evermembench": (FIXTURES / "evermembench", "."),
    "slack": (FIXTURES / "slack" / "acme", "."),
    "irc": (FIXTURES / "irc", "."),
}
# Package and interpreter files an import may open (Python modules, zoneinfo, encodings, DuckDB's extensions).
ALLOWED_OUTSIDE = tuple(str(Path(p).resolve()) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                         Path(__file__).resolve().parent.parent / "tmem"})

HOSTILE_TEXT = st.sampled_from([
    "", " ", "..", "../../../etc", "/etc", "/etc/passwd", "a/b", "C:\\x", "\x00", "\x1b[31mred\x1b]0;t\x07", "\n",
    "9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00", "03.01.2024, 09:15:00", "31.02.2024, 09:15:00",
    "1:56 pm on 8 May, 2023", "12345678901234567890", "1709543100.000200\n", "1e999", "NaN", "D1:1", "D:1:1",
    "channel_join", "[99:99] <a> b", "x" * 5000, "é\u2028ü",
])
NUMBERS = (st.integers(min_value=-(10 ** 30), max_value=10 ** 30) | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from([0, -1, 5, 2 ** 31, 2 ** 63, 10 ** 30, 1e308]))
LEAVES = st.none() | st.booleans() | NUMBERS | HOSTILE_TEXT | st.text(max_size=12)
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
DEEP = "__TMEM_FUZZ_DEEP__"
NAMES = st.sampled_from(["..x", "x..", " ", "a b", "é", "CON", "-x", ".hidden", "x.json", "questions", "profiles.json",
                         "2024-13-45.json", "9999-99-99_00.raw.txt"]) | st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1, max_size=12)


# ---------------------------------------------------------------------------------------------- mutations
def node_paths(value, prefix=()):
    yield prefix
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from node_paths(child, (*prefix, key))


def set_at(doc, path, new):
    if not path:
        return new
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return doc


def delete_at(doc, path):
    if path:
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
    return doc


@st.composite
def json_mutation(draw, doc):
    """`doc` (parsed JSON) with one node replaced, deleted or made very deep; -> the document's new text."""
    doc = copy.deepcopy(doc)
    path = draw(st.sampled_from(list(node_paths(doc))))
    op = draw(st.sampled_from(["replace", "replace", "delete", "deep", "rename-key"]))
    if op == "replace":
        doc = set_at(doc, path, draw(VALUES))
    elif op == "delete" and path:
        doc = delete_at(doc, path)
    elif op == "deep":
        doc = set_at(doc, path, DEEP)
    elif op == "rename-key" and path and isinstance(key := path[-1], str):
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        parent[draw(HOSTILE_TEXT | st.text(max_size=8))] = parent.pop(key)
    depth = draw(st.sampled_from([70, 3000, 100_000]))
    return json.dumps(doc, allow_nan=True).replace(json.dumps(DEEP), "[" * depth + "]" * depth)


@st.composite
def text_mutation(draw, text: str):
    """A text file's lines with one replaced by hostile or random text, or the file truncated."""
    lines = text.split("\n")
    op = draw(st.sampled_from(["line", "line", "truncate"]))
    if op == "truncate":
        return text[:draw(st.integers(0, len(text)))]
    i = draw(st.integers(0, len(lines) - 1))
    lines[i] = draw(HOSTILE_TEXT | st.text(max_size=40) | st.sampled_from(
        ["[25:61] <x> y", "[00:00] <> x", "1 99999999999999999999 -", "-1 2 -", "0 0", "[12:00] * ", "==="]))
    return "\n".join(lines)


@st.composite
def mutated_input(draw, fmt: str):
    """(files: {relative path: bytes}, entry): a fixture input of `fmt` with one mutation."""
    files = fixture_files(fmt)
    target = draw(st.sampled_from(sorted(files)))
    text = files[target].decode("utf-8")
    op = draw(st.sampled_from(["content"] * 6 + ["encoding", "bytes", "rename"]))
    if op == "content":
        if target.endswith(".jsonl"):
            lines = [line for line in text.split("\n") if line.strip()]
            i = draw(st.integers(0, len(lines) - 1))
            lines[i] = draw(json_mutation(json.loads(lines[i])))
            files[target] = "\n".join(lines).encode("utf-8", "surrogatepass")
        elif target.endswith(".json"):
            files[target] = draw(json_mutation(json.loads(text))).encode("utf-8", "surrogatepass")
        else:
            files[target] = draw(text_mutation(text)).encode("utf-8", "surrogatepass")
    elif op == "encoding":
        files[target] = text.encode(draw(st.sampled_from(["utf-16", "latin-1", "utf-8-sig"])), "replace")
    elif op == "bytes":
        at = draw(st.integers(0, len(files[target])))
        files[target] = files[target][:at] + draw(st.binary(min_size=1, max_size=4)) + files[target][at:]
    else:
        parts = target.split("/")
        parts[draw(st.integers(0, len(parts) - 1))] = draw(NAMES)
        files["/".join(parts)] = files.pop(target)
    return files


def fixture_files(fmt: str) -> dict[str, bytes]:
    source, _ = INPUTS[fmt]
    if source == "jsonl":
        lines = DEMO.read_text(encoding="utf-8").splitlines()
        keep = [line for line in lines if '"kind": "message"' in line][:20]
        return {"small.jsonl": "\n".join(keep).encode()}
    return {p.relative_to(source).as_posix(): p.read_bytes() for p in sorted(source.rglob("*")) if p.is_file()}


def write_input(files: dict[str, bytes], folder: Path) -> None:
    for name, content in files.items():
        path = folder / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        except OSError:  # a drawn name this file system refuses (too long, a file where a folder is): skip it
            continue


# ------------------------------------------------------------------------------------------ the invariants
@contextlib.contextmanager
def opened_paths():
    """Record every path opened or listed through Python while the block runs."""
    seen: list[str] = []
    real_open, real_io_open, real_os_open = builtins.open, io.open, os.open
    real_scandir, real_listdir = os.scandir, os.listdir

    def note(path):
        if isinstance(path, (str, bytes, os.PathLike)):
            seen.append(os.path.abspath(os.fsdecode(path)))

    def wrap(real):
        def call(path=".", *args, **kwargs):
            if kwargs.get("dir_fd") is None:  # relative to an open folder: shutil.rmtree deleting the staging
                note(path)
            return real(path, *args, **kwargs)
        return call

    patches = [(builtins, "open", wrap(real_open)), (io, "open", wrap(real_io_open)), (os, "open", wrap(real_os_open)),
               (os, "scandir", wrap(real_scandir)), (os, "listdir", wrap(real_listdir))]
    for module, name, fake in patches:
        setattr(module, name, fake)
    try:
        yield seen
    finally:
        builtins.open, io.open, os.open, os.scandir, os.listdir = (real_open, real_io_open, real_os_open,
                                                                    real_scandir, real_listdir)


def outside(paths: list[str], root: Path) -> list[str]:
    root_text = str(root.resolve())
    return [p for p in paths if not (os.path.realpath(p) + os.sep).startswith(root_text + os.sep)
            and not os.path.realpath(p).startswith(ALLOWED_OUTSIDE)]


def snapshot(store: Store) -> dict:
    return {name: (store.counts(name), str(store.corpus_info(name)["imported_at"])) for name in store.corpora()}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("fuzzdb") / "fuzz.duckdb")
    import_corpus(store, "jsonl", DEMO, corpus="keep")  # must survive every failed import unchanged
    yield store
    store.close()


def check(store: Store, run, root: Path, names_input: str) -> None:
    before = snapshot(store)
    with opened_paths() as seen:
        try:
            run()
        except CorpusError as exc:
            event("refused")  # --hypothesis-show-statistics shows how the examples ended
            message = str(exc)
            assert "\n" not in message.strip() or message.count("\n") < 2, message
            assert names_input in message, f"the error does not name the input: {message}"
            assert snapshot(store) == before, "a failed import changed the database"
        else:
            event("imported")
            assert store.counts("fz")["messages"] > 0
    assert outside(seen, root) == [], f"read outside the input: {outside(seen, root)[:5]}"


# ------------------------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("fmt", sorted(INPUTS))
def test_fuzz_import_from_a_folder(fmt, store):
    @PROFILE
    @given(files=mutated_input(fmt))
    def run(files):
        with tempfile.TemporaryDirectory(prefix="tmem-fuzz-") as tmp:
            folder = Path(tmp) / "input"
            folder.mkdir()
            write_input(files, folder)
            entry = folder / INPUTS[fmt][1]
            if not entry.exists():
                return  # the mutation renamed the very file the importer is given: nothing to import
            check(store, lambda: import_corpus(store, fmt, entry, corpus="fz"), folder, str(folder))
    run()


@pytest.mark.parametrize("fmt", sorted(INPUTS))
def test_fuzz_upload_as_a_zip(fmt, store, monkeypatch):
    staging = Path(tempfile.mkdtemp(prefix="tmem-fuzz-staging-"))
    monkeypatch.setattr(tempfile, "tempdir", str(staging))

    @PROFILE
    @given(files=mutated_input(fmt))
    def run(files):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, content in files.items():
                archive.writestr(f"upload/{name}", content)
        check(store, lambda: import_upload(store, fmt, [("fuzz.zip", buffer.getvalue())], "fz"), staging,
              "fuzz.zip")
        assert list(staging.iterdir()) == [], "the staging folder was left behind"
    try:
        run()
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@pytest.mark.parametrize("path", ["cli", "upload"])
def test_fuzz_slack_channel_names_never_leave_the_input(path, store, monkeypatch, tmp_path_factory):
    """A channel name is a folder name: whatever it says (absolute, `..`, separators, control characters), the
    import reads only the export. A decoy channel folder outside holds a message that must never be imported."""
    decoy = tmp_path_factory.mktemp("decoy") / "general"
    shutil.copytree(FIXTURES / "slack" / "acme" / "general", decoy)
    staging = Path(tempfile.mkdtemp(prefix="tmem-fuzz-staging-"))
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    names = HOSTILE_TEXT | st.text(max_size=30) | st.sampled_from(
        [str(decoy), f"../{decoy.parent.name}/general", "../" * 12 + str(decoy).lstrip("/"), "general/../general"])

    @PROFILE
    @given(name=names)
    def run(name):
        files = fixture_files("slack")
        channels = json.loads(files["channels.json"])
        channels.append({"id": "C0FUZZ", "name": name})
        files["channels.json"] = json.dumps(channels).encode()
        with tempfile.TemporaryDirectory(prefix="tmem-fuzz-") as tmp:
            folder = Path(tmp) / "acme"
            folder.mkdir()
            write_input(files, folder)
            if path == "cli":
                check(store, lambda: import_corpus(store, "slack", folder, corpus="fz"), folder, str(folder))
            else:
                check(store, lambda: import_upload(store, "slack", [("acme.zip", zip_folder(folder))], "fz"),
                      staging, "acme.zip")
    try:
        run()
    finally:
        shutil.rmtree(staging, ignore_errors=True)


