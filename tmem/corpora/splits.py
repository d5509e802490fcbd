"""Which split of a dataset a corpus is, as its data says: a `split.json` marker in the imported folder
(`{"split": "dev"}`, `{"split": "test", "sealed": true}`), or, for the Ubuntu IRC logs, the dataset's own split
folder (dev/, test/, train/; `folder_split`). The importer stores it in the `corpora` table (`split`, `sealed`,
`split_of`); `corpus_split` reads it back, and what guards a held-out split (fit-relation's refusal, the
sealed-looks ledger in tmem/evaluation/tuning.py) asks here, never the corpus's name.

`split_of` names the split by its dataset ("cases/test": the marker's folder and its parent), so a look at a
sealed split counts the same whatever name the corpus was imported under.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tmem.corpora.common import parse_json, read_text
from tmem.corpora.files import boundary
from tmem.types import CorpusError

MARKER = "split.json"
SPLITS = ("dev", "test", "train")
MARKER_LEVELS = 3  # a marker is looked for in the input's folder and up to this many folders above it
IRC_SPLIT_FOLDERS = SPLITS  # the Ubuntu IRC disentanglement release's folder names


@dataclass(frozen=True)
class Split:
    split: str  # dev / test / train
    sealed: bool = False  # a sealed split: no tuning on it, every look recorded (docs/evaluation.md, "Sealed looks")
    split_of: str = ""  # "<dataset>/<split>", the marker folder's last two names

    @property
    def held_out(self) -> bool:
        """Nothing may be fitted on it: a test split, sealed or not."""
        return self.sealed or self.split == "test"


def parse_marker(value: object, at: str, split_of: str) -> Split:
    """A split.json document -> Split; a wrong field is one line naming the file and the field."""
    record = parse_json(value, at) if isinstance(value, str) else value
    if not isinstance(record, dict):
        raise CorpusError(f"{at}: expected an object such as {{\"split\": \"test\", \"sealed\": true}}")
    unknown = sorted(set(record) - {"split", "sealed"})
    if unknown:
        raise CorpusError(f"{at}: unknown field {unknown[0]!r} (fields: split, sealed)")
    name, sealed = record.get("split"), record.get("sealed", False)
    if name not in SPLITS:
        raise CorpusError(f"{at}: field 'split' must be one of {', '.join(SPLITS)}, got {name!r}")
    if not isinstance(sealed, bool):
        raise CorpusError(f"{at}: field 'sealed' must be true or false, got {sealed!r}")
    return Split(name, sealed, split_of)


def _dataset_name(folder: Path) -> str:
    folder = Path(folder).absolute()
    return f"{folder.parent.name}/{folder.name}"


def find_marker(path: Path) -> Path | None:
    """The nearest split.json at or above the input (up to MARKER_LEVELS folders), never above the import's
    boundary (an upload's staging folder)."""
    start = path if path.is_dir() else path.parent
    limit = boundary()
    for folder in [start, *list(start.absolute().parents)[:MARKER_LEVELS]]:
        if limit is not None and not folder.absolute().is_relative_to(limit):
            break
        if (folder / MARKER).is_file():
            return folder / MARKER
    return None


def read_split(path: str | Path) -> Split | None:
    """The split a marker at or above `path` declares (None without a marker)."""
    marker = find_marker(Path(path))
    if marker is None:
        return None
    return parse_marker(read_text(marker), str(marker), _dataset_name(marker.parent))


def folder_split(path: str | Path) -> Split | None:
    """The IRC release's split (tmem/corpora/irc.py): a marker if there is one, else the dev/ test/ train/ folder
    the logs sit in. Its test split is held out (never fitted on) but not sealed: the docs report it per
    iteration."""
    found = read_split(path)
    if found is not None:
        return found
    path = Path(path).absolute()
    for folder in [path if path.is_dir() else path.parent, *list(path.parents)[:1]]:
        if folder.name in IRC_SPLIT_FOLDERS:
            return Split(folder.name, False, _dataset_name(folder))
    return None


def corpus_split(store, corpus: str) -> Split | None:
    """The split recorded for a stored corpus (None: no marker). A corpus imported before the `split` column
    existed is read from its recorded source folder, so an old import of a sealed split is still guarded."""
    info = store.corpus_info(corpus)  # KeyError for an unknown corpus
    if info.get("split"):
        return Split(info["split"], bool(info.get("sealed")), info.get("split_of") or "")
    if info.get("split") == "" or not info.get("source"):
        return None  # imported since the column exists, without a marker ("" there; NULL: imported before it)
    source = Path(info["source"])
    if not source.exists():
        return None
    try:  # the marker, else a dev/ test/ train/ folder (as IRC's): the safer reading of an old row
        return folder_split(source)
    except CorpusError:
        return None
