"""Dev/test discipline for tuned constants: every group of constants chosen by measuring has a named
dev split it may be tuned on and a test split it is reported on, and docs/evaluation.md keeps both columns.

The docs table carries one hash per group (`<!-- tuned: group=hash ... -->`); tests/test_tuning.py recomputes the
hashes from the constants in the code and fails when one changed without the table being re-measured, naming the
group, its splits and the commands that measure it. `python -m tmem tuning` prints the current hash line.

A group's values are everything of it that a tuning run could change: dataclass defaults, module-level
thresholds, word lists, regular expressions (their pattern text) and calibration tables. Hashing is over sorted
JSON, so reordering code changes nothing, and any changed value changes the hash.

Sealed looks: scoring a sealed split (a `split.json` marker with `"sealed": true`, tmem/corpora/splits.py) appends
one line to data/sealed_looks.jsonl (`record_look`); a second look with the same relation hash is refused without a
reason (`check_look`), and docs/evaluation.md states the count per split that `look_counts` takes from the file.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import pkgutil
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from tmem import text as text_module
from tmem.config import StructuringConfig
from tmem.corpora.splits import corpus_split
from tmem.models import offline
from tmem.models import relation as relation_role
from tmem.models.relation import fitted
from tmem.store import PROJECT_ROOT

MARKER = re.compile(r"<!--\s*tuned:([^>]*)-->")


@dataclass(frozen=True)
class Group:
    name: str
    what: str
    dev: str
    test: str
    measure: str
    values: Callable[[], dict[str, Any]]


def _defaults(cls) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


def _module_constants(module: ModuleType) -> dict[str, Any]:
    """UPPER_CASE module attributes that are thresholds, tables, word lists or patterns."""
    out: dict[str, Any] = {}
    for name in sorted(vars(module)):
        value = getattr(module, name)
        if not name.isupper() and not (name.startswith("_") and name[1:].isupper()):
            continue
        if isinstance(value, re.Pattern):
            out[name] = [value.pattern, value.flags]
        elif isinstance(value, (int, float, str, tuple, frozenset, dict)) and not isinstance(value, bool):
            out[name] = sorted(value) if isinstance(value, frozenset) else value
    return out


def _evidence_utility() -> dict[str, Any]:
    return {"OfflineEvidenceUtility": _defaults(offline.OfflineEvidenceUtility),
            "OfflineAnswerer": _defaults(offline.OfflineAnswerer)}


def _stopwords() -> dict[str, Any]:
    return {"STOPWORDS": sorted(text_module.STOPWORDS), "BM25_KEPT_WORDS": sorted(text_module.BM25_KEPT_WORDS),
            "STATE_CHANGE_CUES": text_module.STATE_CHANGE_CUES.pattern}


def relation_modules() -> tuple[ModuleType, ...]:
    """Every module of tmem/models/relation/, found rather than listed: a module added there (follow_ups.py was
    missed by the list this replaced, and query.py before it) is in the relation hash from its first commit."""
    return tuple(importlib.import_module(f"{relation_role.__name__}.{m.name}")
                 for m in sorted(pkgutil.iter_modules(relation_role.__path__), key=lambda m: m.name))


def _relation() -> dict[str, Any]:
    classes = [relation_role.RULES[n] for n in ("state", "cue-overlap")]  # the hand-set rules' thresholds
    relevance = {f.name: f.default for f in dataclasses.fields(StructuringConfig) if f.name.endswith("_relevance")}
    # the state signals (patterns, value extraction) are the constants of values.py and the rules' modules
    weights = fitted.load_weights(str(fitted.WEIGHTS))
    # keyed by module: a constant imported into another module is hashed in both, never shadowing the original
    return {"module": {m.__name__.rpartition(".")[2]: _module_constants(m) for m in relation_modules()},
            "fitted": {k: v for k, v in weights.items() if k not in WEIGHTS_PROVENANCE},
            "classes": {c.__name__: _defaults(c) for c in classes}, "structuring": relevance}


# What weights.json records about its own fit (counts, timing, notes, the vectors built at load) rather than what
# decides an edge: everything else, the routing records included, is in the relation hash, so a field a later fit
# adds is hashed by default.
WEIGHTS_PROVENANCE = frozenset({"about", "code", "seconds", "children", "typed_edges", "updates", "scopes", "vectors"})


GROUPS: dict[str, Group] = {g.name: g for g in (
    Group("evidence_utility", "offline evidence-utility rule and extractive answerer (tmem/models/offline.py)",
          "LoCoMo conversations 0-4", "LoCoMo conversations 5-9",
          "python -m tmem recall --corpus locomo --k 36 --out data/recall/locomo.json", _evidence_utility),
    Group("stopwords", "stopword list, BM25-kept words and state-change cues (tmem/text.py)",
          "LoCoMo conversations 0-4", "LoCoMo conversations 5-9",
          "python -m tmem recall --corpus locomo --k 36 --out data/recall/locomo.json", _stopwords),
    Group("relation", "offline relation role's signals, patterns and calibration (tmem/models/relation/, "
          "structuring.*_relevance)", "IRC dev (10 files), data/cases/dev and data/styles/*/dev",
          "IRC test (10 files), data/cases/test, data/styles/*/test",
          "python -m tmem import irc ../shared/benchmarks/ubuntu-irc-disentanglement/dev --corpus irc-dev; "
          "python -m tmem links --corpus irc-dev (and the same for test)", _relation),
)}


def group_hash(name: str) -> str:
    blob = json.dumps(GROUPS[name].values(), sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def hash_line() -> str:
    """The marker line the docs table carries."""
    return "<!-- tuned: " + " ".join(f"{n}={group_hash(n)}" for n in GROUPS) + " -->"


def documented_hashes(text: str) -> dict[str, str]:
    """{group: hash} from the marker line(s) in a document."""
    out: dict[str, str] = {}
    for match in MARKER.finditer(text):
        for item in match.group(1).split():
            name, _, value = item.partition("=")
            out[name] = value
    return out


def stale_groups(text: str) -> list[str]:
    """Groups whose constants changed since the document's table was measured (or that it lacks)."""
    found = documented_hashes(text)
    return [n for n in GROUPS if found.get(n) != group_hash(n)]


# ----------------------------------------------------------------------------------------------- sealed looks
# Scoring a sealed split (tmem/corpora/splits.py) is a look at held-out data: `links` appends one line per look to
# the ledger, and a second look with the same relation constants (group hash) needs a stated reason (`--again`).
# docs/evaluation.md ("Sealed looks") states the count per split from this file; tests/test_tuning.py checks it.
LEDGER = PROJECT_ROOT / "data" / "sealed_looks.jsonl"
LEDGER_ENV = "TMEM_SEALED_LEDGER"  # the suite points this at a temporary file (tests/conftest.py)
LOOKED_GROUP = "relation"  # what `links` scores: the relation role's constants and weights
FIGURES = ("children", "accuracy", "edge_accuracy", "update_precision", "update_recall", "coverage")


def sealed_split(store, corpus: str):
    """The corpus's Split when its marker says sealed, else None (tmem.corpora.splits.corpus_split)."""
    split = corpus_split(store, corpus)
    return split if split is not None and split.sealed else None


def refuse_held_out(store, corpus: str) -> None:
    """Nothing is fitted on a test or sealed split: one line naming it, by its marker, whatever its name."""
    split = corpus_split(store, corpus)
    if split is not None and split.held_out:
        raise ValueError(f"--corpus {corpus}: is the {'sealed ' if split.sealed else ''}{split.split} split "
                         f"{split.split_of} (its split marker); fit on dev splits only (docs/evaluation.md, "
                         "Dev/test discipline)")


class SealedLookRefused(ValueError):
    """A second look at a sealed split with unchanged constants, without --again REASON."""


def ledger_path() -> Path:
    return Path(os.environ.get(LEDGER_ENV) or LEDGER)


def read_looks(path: Path | None = None) -> list[dict]:
    """Every ledger line (none when the file does not exist); a bad line is one error naming file and line."""
    path = path or ledger_path()
    if not path.exists():
        return []
    looks = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            look = json.loads(line) if line.strip() else None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not a JSON line ({exc.msg}); the ledger is append-only") from None
        if look is not None and not (isinstance(look, dict) and isinstance(look.get("split_of"), str)):
            raise ValueError(f"{path}:{number}: field 'split_of' is missing; every look names its split")
        looks += [look] if look is not None else []
    return looks


def look_counts(looks: list[dict]) -> dict[str, int]:
    """{split: cumulative looks}; a reconstructed line stands for the `looks` it counts."""
    counts: dict[str, int] = {}
    for look in looks:
        counts[look["split_of"]] = counts.get(look["split_of"], 0) + int(look.get("looks", 1))
    return counts


def _commit() -> str:
    """HEAD, marked "-dirty" when tracked files differ from it ("unknown" outside a git checkout)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    try:
        return git("rev-parse", "HEAD") + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def check_look(split, again: str | None = None, path: Path | None = None) -> str:
    """The constants hash a look at sealed `split` would record; refuses a second look at the same hash unless
    `again` gives the reason."""
    current = group_hash(LOOKED_GROUP)
    earlier = [look for look in read_looks(path) if look["split_of"] == split.split_of and look.get("hash") == current]
    if earlier and not (again or "").strip():
        first = earlier[0]
        raise SealedLookRefused(
            f"sealed split {split.split_of} was already scored with these relation constants ({LOOKED_GROUP}="
            f"{current}) on {first.get('time')} at commit {str(first.get('commit'))[:12]}; a second look needs "
            "--again REASON (docs/evaluation.md, Sealed looks)")
    return current


def record_look(split, corpus: str, roles: list[dict], settings: dict, again: str | None = None,
                path: Path | None = None) -> dict:
    """Append one look (time, commit, roles, constants hash, figures) to the ledger; -> the line written."""
    path = path or ledger_path()
    look = {"time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "commit": _commit(),
            "split_of": split.split_of, "corpus": corpus, "group": LOOKED_GROUP, "hash": check_look(split, again, path),
            "default_role": next((r["role"] for r in roles if r.get("default")), None), "settings": settings,
            "figures": {r["role"]: {k: r.get(k) for k in FIGURES} for r in roles}}
    if again:
        look["again"] = again
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(look, sort_keys=True) + "\n")
    return look
