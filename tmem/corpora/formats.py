"""The input formats, one `Format` per importer module (tmem.corpora.common.Format): the `import` command's
choices, the app's uploader and the staging of uploads all read this list. A new importer defines its `FORMAT`
in its own module and is added here, nowhere else."""
from __future__ import annotations

from tmem.corpora import evermembench, groupmembench, irc, jsonl, locomo, slack
from tmem.corpora.common import Format
from tmem.types import CorpusError

# the order the app offers them: the project's own format first
FORMATS: tuple[Format, ...] = (jsonl.FORMAT, evermembench.FORMAT, groupmembench.FORMAT, irc.FORMAT, locomo.FORMAT,
                               slack.FORMAT)
BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}


def names() -> list[str]:
    """The format names, sorted (the command line's choices)."""
    return sorted(BY_NAME)


def get(name: str) -> Format:
    try:
        return BY_NAME[name]
    except KeyError:
        raise CorpusError(f"unknown import format {name!r} (one of {', '.join(names())})") from None
