"""Dev/test discipline for tuned constants: every group of constants chosen by measuring has a named
dev split it may be tuned on and a test split it is reported on, and docs/evaluation.md keeps both columns.

The docs table carries one hash per group (`<!-- tuned: group=hash ... -->`); tests/test_tuning.py recomputes the
hashes from the constants in the code and fails when one changed without the table being re-measured, naming the
group, its splits and the commands that measure it. `python -m tmem tuning` prints the current hash line.

A group's values are everything of it that a tuning run could change: dataclass defaults, module-level
thresholds, word lists, regular expressions (their pattern text) and calibration tables. Hashing is over sorted
JSON, so reordering code changes nothing, and any changed value changes the hash.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tmem import text as text_module
from tmem.config import StructuringConfig
from tmem.models import offline
from tmem.models import relation as relation_role
from tmem.models.relation import cue_overlap, features, fitted, revision, signals, slots, state, values

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


def _relation() -> dict[str, Any]:
    classes = [relation_role.RULES[n] for n in ("state", "cue-overlap")]  # the hand-set rules' thresholds
    relevance = {f.name: f.default for f in dataclasses.fields(StructuringConfig) if f.name.endswith("_relevance")}
    # the state signals (patterns, value extraction) are the constants of values.py and the rules' modules
    weights = fitted.load_weights(str(fitted.WEIGHTS))
    modules = (signals, state, cue_overlap, values, features, slots, revision)
    return {"module": {k: v for m in modules for k, v in _module_constants(m).items()},
            "fitted": {part: weights[part] for part in ("pair", "root", "label", "fitted_on", "l2")},
            "classes": {c.__name__: _defaults(c) for c in classes}, "structuring": relevance}


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
