"""The files an import reads: confined to the input (no path outside it, no symbolic link on the way), regular
files only (a device, a FIFO or a socket is refused: reading one never ends or never starts), the size limit
enforced while reading, UTF-8 without a byte-order mark. Every error names the file."""
from __future__ import annotations

import fnmatch
import functools
import io
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from tmem import limits
from tmem.types import CorpusError

IMPORT_HINT = "the import limit of {limit:,} bytes (set TMEM_MAX_IMPORT_BYTES to raise it)"


def check_size(path: Path, limit: int | None = None, hint: str = IMPORT_HINT) -> None:
    """Refuse a file outside the input, a folder, anything but a regular file (a device such as /dev/zero, a
    FIFO, a socket: reading one never ends or never starts), or a file over the import limit (or `limit`, which
    `hint` names), with a clear error. The limit is enforced again while reading (`read_bytes`, `open_text`): a
    size on disk can change."""
    inside(path)
    if path.is_dir():
        raise CorpusError(f"{path}: is a folder; a file is expected here")
    try:
        info = path.stat()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    regular(info.st_mode, path)
    limit = limits.import_bytes() if limit is None else limit
    if info.st_size > limit:
        raise CorpusError(f"{path}: file is {info.st_size:,} bytes, over {hint.format(limit=limit)}")


def regular(mode: int, path: Path) -> None:
    if not stat.S_ISREG(mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
        raise CorpusError(f"{path}: is {kind}; only regular files are read")


def _open_regular(path: Path, limit: int | None = None, hint: str = IMPORT_HINT):
    """A binary handle on `path`, opened without blocking (a FIFO swapped in after `check_size` must not hang
    the import) and checked to be a regular file once open."""
    check_size(path, limit, hint)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise CorpusError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        regular(os.fstat(fd).st_mode, path)
    except CorpusError:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _over_limit(path: Path, limit: int, hint: str = IMPORT_HINT) -> CorpusError:
    return CorpusError(f"{path}: file is over {hint.format(limit=limit)}")


def read_bytes(path: Path, limit: int | None = None, hint: str = IMPORT_HINT) -> bytes:
    """The whole file, at most limits.import_bytes() (or `limit`) of it read: a file that grew past the limit is
    refused."""
    limit = limits.import_bytes() if limit is None else limit
    with _open_regular(path, limit, hint) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise CorpusError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise _over_limit(path, limit, hint)
    return data


BOM = b"\xef\xbb\xbf"


def decode(data: bytes, path: Path, offset: int = 0) -> str:
    """UTF-8 text; a byte-order mark at the start of the file is refused as every format refuses it (a JSON
    parser rejects it, and an IRC log would lose its first message to it)."""
    if offset == 0 and data.startswith(BOM):
        raise CorpusError(f"{path}: starts with a byte-order mark (UTF-8 BOM); save it as UTF-8 without a BOM")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 text ({exc.reason} at byte {offset + exc.start})") from None


def read_text(path: Path) -> str:
    return decode(read_bytes(path), path)


# ----------------------------------------------------------------------- confinement: nothing outside the input
_ROOT: ContextVar[Path | None] = ContextVar("tmem_input_root", default=None)


@contextmanager
def input_root(root: Path) -> Iterator[Path]:
    """Confine every file an importer opens (through check_size / read_text / read_json / open_text) to `root`
    while the block runs; the upload passes its staging folder, `load` the input's own folder."""
    token = _ROOT.set(Path(os.path.abspath(root)))
    try:
        yield _ROOT.get()
    finally:
        _ROOT.reset(token)


def default_root(path: Path, levels_up: int = 0) -> Path:
    """The input's boundary: the folder given (or the file's folder), and `levels_up` folders above it where the
    format's documented layout looks there (GroupMemBench's questions/, EverMemBench's profiles.json)."""
    folder = Path(os.path.abspath(path if path.is_dir() else path.parent))
    return folder.parents[min(levels_up, len(folder.parents)) - 1] if levels_up and folder.parents else folder


def confined(levels_up: int = 0) -> Callable:
    """Decorate a loader `f(path)`: without an enclosing input_root, its input is default_root(path, levels_up)."""
    def decorate(loader: Callable) -> Callable:
        @functools.wraps(loader)
        def run(path: str | Path, *args: Any, **kwargs: Any) -> Any:
            if _ROOT.get() is not None:
                return loader(path, *args, **kwargs)
            with input_root(default_root(Path(path), levels_up)):
                return loader(path, *args, **kwargs)
        return run
    return decorate


def boundary() -> Path | None:
    """The folder the running import may read in (None outside an import)."""
    return _ROOT.get()


def inside(path: Path) -> Path:
    """`path` if it lies inside the input and no symbolic link is on the way to it; else a clear refusal."""
    root = _ROOT.get()
    if root is None:
        return path
    lexical = Path(os.path.abspath(path))
    if not lexical.is_relative_to(root):
        raise CorpusError(f"{path}: outside the input {root}; refused")
    real, real_root = lexical.resolve(), root.resolve()
    if not real.is_relative_to(real_root) or real.relative_to(real_root) != lexical.relative_to(root):
        raise CorpusError(f"{path}: is or goes through a symbolic link; refused (copy the files instead)")
    return path


def files_under(root: Path, pattern: str) -> list[Path]:
    """Every entry below `root` whose name matches `pattern` (as Path.rglob, sorted), folders left out; a
    symbolic link to a folder on the way is refused, not silently skipped as rglob skips it (its files would be
    missing from the corpus without a word)."""
    found = []
    for folder, dirs, files in os.walk(root, onerror=_walk_error):
        for name in dirs:
            if os.path.islink(os.path.join(folder, name)):
                raise CorpusError(f"{Path(folder) / name}: is a symbolic link to a folder; refused (copy the "
                                  "files instead)")
        found += [Path(folder) / name for name in files if fnmatch.fnmatchcase(name, pattern)]
    return sorted(found)


def _walk_error(exc: OSError) -> None:
    raise CorpusError(f"{exc.filename}: cannot be read ({exc.strerror or exc})")


def child(folder: Path, name: str, at: str, field: str) -> Path:
    """`folder / name` for a `name` read from the data (a channel, a domain): one plain path component, never an
    absolute path, `..`, a separator or a NUL, so a record cannot point the importer at other folders."""
    if name in ("", ".", "..") or any(c in "/\\" or ord(c) < 32 for c in name) or len(name.encode()) > 255:
        raise CorpusError(f"{at}: field {field!r}: {name[:60]!r} is not usable as a folder name "
                          "(no '/', '\\', '..' or control characters, at most 255 bytes); refused")
    return inside(folder / name)


class _Capped(io.RawIOBase):
    """A binary file that refuses to be read past `limit` bytes: the import limit enforced while reading."""

    def __init__(self, handle, path: Path, limit: int):
        self.handle, self.path, self.limit, self.count = handle, path, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.handle.readinto(buffer)
        self.count += n or 0
        if self.count > self.limit:
            raise _over_limit(self.path, self.limit)
        return n

    def close(self) -> None:
        self.handle.close()
        super().close()


def open_text(path: Path):
    """A checked file opened for streaming UTF-8 reads (JSONL), the import limit enforced on the bytes read."""
    capped = _Capped(_open_regular(path), path, limits.import_bytes())
    return io.TextIOWrapper(io.BufferedReader(capped), encoding="utf-8")
