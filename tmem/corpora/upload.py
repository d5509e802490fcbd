"""Uploads: files handed over by the app's uploader -> a temporary folder in the format's own layout -> the
importer -> one transactional load; the folder is deleted afterwards, whether the import worked or not.

An upload is either one `.zip` of the format's folder layout (Slack's export zip, a benchmark folder zipped) or
plain files, placed the way the importer expects them (each format's `upload_hint` says what it takes). A zip is
checked before anything is written: no absolute paths, no `..`, no links, no encrypted or duplicate members, at
most `TMEM_MAX_UPLOAD_FILES` entries (default 20,000), and at most the upload limit (`TMEM_MAX_UPLOAD_BYTES`,
default 512 MiB) uncompressed in total, counted again while writing, so a zip bomb stops early. The importer reads
nothing outside the staging folder (common.input_root). Importing a path on the server is off unless
`TMEM_IMPORT_DIRS` lists the folders it may read (`import_server_path`). Scopes are named from the upload's own
names (the zip's name or its single top folder, the files' names), never from the temporary folder; errors and
notes name paths inside the upload ("acme.zip/general/2024-03-04.json [message 3]: ...").
"""
from __future__ import annotations

import io
import os
import re
import stat
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from tmem import limits
from tmem.corpora import formats
from tmem.corpora.common import Format, Imported
from tmem.corpora.imports import import_corpus, load
from tmem.types import CorpusError

MAX_NAME_BYTES = 255  # one file name (or one folder name inside a zip), as file systems allow
MAX_PATH_BYTES = 4096  # a member's whole path inside a zip
JUNK = re.compile(r"^(__MACOSX|\.DS_Store|\._.*|Thumbs\.db|desktop\.ini)$")  # archivers' extras, skipped


def import_upload(store, fmt: str, files: Sequence[tuple[str, bytes]], corpus: str) -> tuple[str, Imported]:
    """Stage uploaded `(file name, content)` pairs, import them as `fmt` and replace corpus `corpus` in one
    transaction; the staging folder is always deleted. -> (corpus name, Imported)."""
    label = ", ".join(name for name, _ in files)
    corpus = limits.safe_name(corpus, "corpus name")
    with tempfile.TemporaryDirectory(prefix="tmem-upload-") as tmp:
        shown: dict[str, str] = {}  # staged path -> the name the user knows
        try:
            path = stage(fmt, files, Path(tmp), shown)
            imported = load(fmt, path, root=tmp)  # never a folder above the staging folder
        except CorpusError as exc:
            raise CorpusError(unstage(str(exc), shown)) from None
        notes = tuple(unstage(note, shown) for note in imported.notes)
        imported = Imported(imported.data, notes, imported.split)  # a zip holding split.json keeps its marker
        store.replace_corpus(corpus, imported.data, format=fmt, source=f"upload: {label}", notes="\n".join(notes),
                             split=imported.split)
    return corpus, imported


def import_server_path(store, fmt: str, path: str | Path, corpus: str) -> tuple[str, Imported]:
    """The app's import of a file or folder on the server: only inside a folder that `TMEM_IMPORT_DIRS` lists
    (os.pathsep-separated), and the importer reads nothing outside that folder. Off when the variable is unset:
    the app binds to localhost, but people deploy it."""
    corpus = limits.safe_name(corpus, "corpus name")
    allowed = server_import_dirs()
    if not allowed:
        raise CorpusError("importing a path on the server is off: upload the files, or start the app with "
                          "TMEM_IMPORT_DIRS=/folder/with/corpora to allow the folders it may read")
    resolved = Path(path).expanduser().resolve()
    root = next((folder for folder in allowed if resolved.is_relative_to(folder)), None)
    if root is None:
        raise CorpusError(f"{path}: not inside a folder TMEM_IMPORT_DIRS allows ({', '.join(map(str, allowed))})")
    return import_corpus(store, fmt, resolved, corpus, root=root)


def server_import_dirs() -> list[Path]:
    """The folders `TMEM_IMPORT_DIRS` allows the app to import from (resolved); empty: server paths are off."""
    raw = os.environ.get("TMEM_IMPORT_DIRS", "")
    return [Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip()]


def unstage(text: str, shown: dict[str, str]) -> str:
    """Replace staged paths in an error or note with the upload's own names."""
    for staged in sorted(shown, key=len, reverse=True):
        text = text.replace(staged, shown[staged])
    return text


# --------------------------------------------------------------------------------------------------- staging
def stage(fmt: str, files: Sequence[tuple[str, bytes]], tmp: Path, shown: dict[str, str]) -> Path:
    """Write the upload under `tmp` in the format's layout; -> the path to hand to the importer."""
    layout = formats.get(fmt)
    if not files:
        raise CorpusError("nothing was uploaded")
    names = [safe_name(name) for name, _ in files]
    total, limit = sum(len(content) for _, content in files), limits.upload_bytes()
    if total > limit:
        raise CorpusError(f"{', '.join(names)}: {total:,} bytes, over the upload limit of {limit:,} bytes "
                          "(set TMEM_MAX_UPLOAD_BYTES to raise it)")
    if len(set(names)) < len(names):
        raise CorpusError(f"{', '.join(names)}: two uploaded files have the same name")
    zips = [n for n in names if n.lower().endswith(".zip")]
    if zips and len(files) > 1:
        raise CorpusError(f"{', '.join(names)}: upload one .zip, or plain files, not both")
    if zips:
        stem = Path(names[0]).stem.strip()
        root = extract_zip(files[0][1], tmp / (stem if stem not in ("", ".", "..") else "upload"), names[0], shown)
        return pick_from_zip(layout, root, names[0])
    shown[str(tmp / "upload")] = "upload"
    return layout.place([(n, content) for n, (_, content) in zip(names, files)], tmp / "upload", shown)


def safe_name(name: str) -> str:
    """An uploaded file's base name (the browser sends no folders); "." / ".." / empty are refused."""
    base = "".join(c for c in re.split(r"[\\/]", name)[-1] if ord(c) >= 32)
    if base in ("", ".", ".."):
        raise CorpusError(f"{name[:60]!r}: not a usable file name")
    if len(base.encode("utf-8")) > MAX_NAME_BYTES:  # the file system's limit: staging would fail with Errno 36
        raise CorpusError(f"{base[:60]!r}…: the file name is {len(base.encode('utf-8')):,} bytes, over the "
                          f"{MAX_NAME_BYTES} a file name may have; rename the file and upload it again")
    return base


# ------------------------------------------------------------------------------------------------------ zips
def extract_zip(content: bytes, dest: Path, label: str, shown: dict[str, str]) -> Path:
    """Safely extract a zip into `dest`; -> the folder holding its content (its single top folder, if any)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except zipfile.BadZipFile:
        raise CorpusError(f"{label}: not a valid .zip file") from None
    with archive:
        members = checked_members(archive, label)
        dest.mkdir(parents=True)
        shown[str(dest)] = label
        limit = limits.upload_bytes()
        written = 0
        for info, parts in members:
            target = dest.joinpath(*parts)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src, target.open("xb") as out:
                    while chunk := src.read(1 << 20):
                        written += len(chunk)
                        if written > limit:
                            raise CorpusError(f"{label}: expands to more than the upload limit of {limit:,} bytes "
                                              "(set TMEM_MAX_UPLOAD_BYTES to raise it)")
                        out.write(chunk)
            except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
                raise CorpusError(f"{label}: member {info.filename[:100]!r} cannot be extracted ({exc})") from None
    entries = list(dest.iterdir())
    if len(entries) == 1 and entries[0].is_dir():
        shown[str(entries[0])] = f"{label}/{entries[0].name}"
        return entries[0]
    if not entries:
        raise CorpusError(f"{label}: the zip holds no files")
    return dest


def checked_members(archive: zipfile.ZipFile, label: str) -> list[tuple[zipfile.ZipInfo, tuple[str, ...]]]:
    """The zip's files as (info, path parts), after every check that needs no extraction."""
    infos, limit = archive.infolist(), limits.upload_files()
    if len(infos) > limit:
        raise CorpusError(f"{label}: {len(infos):,} members, more than the {limit:,} an upload may hold (set "
                          "TMEM_MAX_UPLOAD_FILES to raise it)")
    check_declared_size(infos, label)
    members, seen = [], set()
    for info in infos:
        parts = member_parts(info, label)
        if parts is None:
            continue
        if parts in seen:
            raise CorpusError(f"{label}: member {info.filename[:100]!r} appears twice")
        seen.add(parts)
        members.append((info, parts))
    return members


def check_declared_size(infos: list[zipfile.ZipInfo], label: str) -> None:
    """Refuse a zip whose headers already say it expands past the upload limit (extraction counts again)."""
    limit = limits.upload_bytes()
    declared = sum(info.file_size for info in infos)
    if declared > limit:
        raise CorpusError(f"{label}: expands to {declared:,} bytes, over the upload limit of {limit:,} bytes "
                          "(set TMEM_MAX_UPLOAD_BYTES to raise it)")


def member_parts(info: zipfile.ZipInfo, label: str) -> tuple[str, ...] | None:
    """A member's relative path parts, None for folders and archivers' junk; unsafe members are refused."""
    name = info.filename.replace("\\", "/")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise CorpusError(f"{label}: member {info.filename[:100]!r} has an absolute path; refused")
    parts = tuple(p for p in PurePosixPath(name).parts if p != ".")
    if len(name.encode("utf-8")) > MAX_PATH_BYTES or any(len(p.encode("utf-8")) > MAX_NAME_BYTES for p in parts):
        raise CorpusError(f"{label}: member {info.filename[:60]!r}…: a name in its path is over {MAX_NAME_BYTES} "
                          f"bytes or the path over {MAX_PATH_BYTES}; refused")
    if ".." in parts:
        raise CorpusError(f"{label}: member {info.filename[:100]!r} points outside the zip ('..'); refused")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise CorpusError(f"{label}: member {info.filename[:100]!r} is a symbolic link; refused")
    if info.flag_bits & 0x1:
        raise CorpusError(f"{label}: member {info.filename[:100]!r} is encrypted; upload an unencrypted zip")
    if info.is_dir() or not parts or any(JUNK.match(p) for p in parts):
        return None
    return parts


def pick_from_zip(fmt: Format, root: Path, label: str) -> Path:
    """Where in the extracted zip the importer starts: the format's `zip_member` (or the folder holding it), else
    the zip's content folder (those importers search a folder themselves)."""
    if fmt.zip_member is None:
        return root
    found = sorted(root.rglob(fmt.zip_member))
    if len(found) != 1:
        what = fmt.zip_member_what or f"one {fmt.zip_member} file"
        listed = f": {', '.join(str(p.relative_to(root)) for p in found[:5])}" if found else ""
        raise CorpusError(f"{label}: expected {what}, found {len(found)}{listed}")
    return found[0].parent if fmt.zip_member_folder else found[0]
