"""Signals the offline relation rules share (tmem/models/relation/): a scope's IDF, the IDF-weighted overlap of a
child with its candidates, names a message addresses or mentions, and the openings that reject a change ("No, ...")
or follow up on one ("I'll ...", "thanks"). Pure functions over messages and a scope; per-scope caches are weak, so
a scope's figures go with it."""
from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence

from tmem.types import Message

_IDF: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # scope -> {unit: idf}; a scope's IDF is fixed


def scope_idf(scope) -> Callable[[str], float]:
    try:
        cache = _IDF.setdefault(scope, {})
    except TypeError:  # not weak-referenceable (a test double): no cache
        return scope.idf

    def idf(unit: str) -> float:
        value = cache.get(unit)
        if value is None:
            value = cache[unit] = scope.idf(unit)
        return value
    return idf


# "No, ..." to a challenge rejects the change it asks for: the state stands, the answer elaborates it
REJECTS = re.compile(r"^\W*(no|nope)\b", re.IGNORECASE)
FOLLOW_UP = re.compile(r"^\W*(\w+[,.!]\s+)?(i'll|i will|i can|i'm|will do|thank|understood|good|ok\b|fine\b)",
                        re.IGNORECASE)


_MASS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # scope -> {message id: its units' IDF mass}


def _weakable(scope) -> bool:
    try:
        weakref.ref(scope)
        return True
    except TypeError:
        return False


def weighted_overlap(a: set[str], b: set[str], scope) -> float:
    """Share of the smaller side's IDF mass that the two unit sets have in common (0..1)."""
    if not a or not b:
        return 0.0
    idf = scope_idf(scope)
    shared = sum(idf(u) for u in a & b)
    return shared / min(sum(idf(u) for u in a), sum(idf(u) for u in b))


def candidate_overlaps(child: Message, candidates: Sequence[Message], scope) -> list[float]:
    """`weighted_overlap` of the child with each candidate, each candidate's IDF mass computed once per scope."""
    idf, masses = scope_idf(scope), _MASS.setdefault(scope, {}) if _weakable(scope) else {}
    child_units = scope.units_of(child)
    child_mass = sum(idf(u) for u in child_units)
    out = []
    for p in candidates:
        units = scope.units_of(p)
        mass = masses.get(p.id)
        if mass is None:
            mass = masses[p.id] = sum(idf(u) for u in units)
        out.append(sum(idf(u) for u in child_units & units) / min(child_mass, mass) if child_mass and mass else 0.0)
    return out


def addressed_names(text: str) -> set[str]:
    """Names the message addresses: '@name' anywhere, or 'name:' / 'name,' at the start (chat convention)."""
    names = {m.casefold() for m in re.findall(r"@([\w.\-]+)", text)}
    head = re.match(r"\s*@?([^\s:,]+)[:,]\s", text)
    if head:
        names.add(head.group(1).casefold())
    return names


def mentioned_authors(text: str, authors: set[str]) -> set[str]:
    """Authors (casefolded, 3+ characters) the text names anywhere as a word: 'nick I think...', '<nick>',
    'nick>'; chat users often address without the 'nick:' convention."""
    words = set(re.findall(r"[\w.\-|\[\]^`{}]+", text.casefold()))
    return {a for a in authors if len(a) >= 3 and a in words}
