"""Readings of "which earlier statement does this child revise" measured before building any into the fitted
relation role (scripts/relation_probes.py; docs/evaluation.md, `links`, "Where the ceiling is"; issue 21): more pair
and label features for the fitted examples, and values bound to the content words of their clause ("4 platform,
3 mobile" -> platform=4, mobile=3), so that a candidate whose attribute the child restates with another value is a
feature. It reads the value patterns of tmem.models.relation.values as the role reads them (their private names:
the same patterns, not a copy that could drift).
"""
from __future__ import annotations

import re

import numpy as np

from tmem.evaluation import fit_relation as fit
from tmem.models.relation.slots import states_a_state
from tmem.models.relation.values import _DAY_OF_MONTH, _VALUE, _normalised, _states, cues, sentences, value_kind
from tmem.types import EXPAND, UPDATE


def with_features(ex: fit.Examples, columns: list) -> fit.Examples:
    """`ex` with `columns[i]` (n x k) as k more pair and label features of child i's candidates."""
    pair = [np.hstack([p, c]) for p, c in zip(ex.pair, columns)]
    labels = [np.hstack([lab, c]) for lab, c in zip(ex.labels, columns)]
    typed = [lab[t] for lab, t, rel in zip(labels, ex.target, ex.relation) if t < len(lab) and rel in (UPDATE, EXPAND)]
    return fit.Examples(pair, ex.root, ex.target, typed, ex.is_update, ex.weight, ex.label_weight, labels, ex.gated,
                        ex.relation, ex.child, ex.candidates)


_CLAUSE = re.compile(r"[,;:()]|\s[-–]\s|\band\b|\bbut\b")
_WORD = re.compile(r"[A-Za-z][A-Za-z\-']+")
_STOP = frozenset("""a an the and or but of to in on at for by with from as is are was were be been it its this that
these those we our us you your they their i me my ok okay yes no not then so also just only still now than too very
all any each every will would can could should must may might do does did done has have had get gets got go goes
going per up down out over about into after before until via if when while same new one two three four five six
seven eight nine ten""".split())


def _stem(word: str) -> str:
    w = word.casefold().strip("'-")
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


def bindings(text: str) -> frozenset[tuple[str, str, str]]:
    """(attribute word, value kind, value): each value of a stating sentence bound to its clause's content words."""
    out = set()
    for s in sentences(text) or [text]:
        if not _states(s):
            continue
        for clause in _CLAUSE.split(s):
            found = list(_VALUE.finditer(clause))
            spans = [m.span() for m in found]
            words = {_stem(w.group(0)) for w in _WORD.finditer(clause)
                     if not any(a <= w.start() < b for a, b in spans)} - _STOP
            for m in found:
                kind = value_kind(m.group(0))
                kind = "date" if kind == "count" and _DAY_OF_MONTH.search(clause) else kind
                out |= {(w, kind, _normalised(m.group(0))) for w in words if len(w) > 2}
    return frozenset(out)


def restates_attribute(child: frozenset, parent: frozenset) -> bool:
    """Some attribute (word and kind) both bind, the child with a value the parent lacks and the other way round."""
    mine, theirs = {}, {}
    for w, k, v in child:
        mine.setdefault((w, k), set()).add(v)
    for w, k, v in parent:
        theirs.setdefault((w, k), set()).add(v)
    return any(mine[a] - theirs[a] and theirs[a] - mine[a] for a in set(mine) & set(theirs))


def attribute_columns(ex: fit.Examples) -> list:
    columns = []
    for child, candidates in zip(ex.child, ex.candidates):
        mine = bindings(child.text)
        hit = np.array([float(bool(mine) and states_a_state(cues(m.text))
                              and restates_attribute(mine, bindings(m.text))) for m in candidates])
        latest = np.zeros(len(candidates))
        if hit.any():
            latest[np.flatnonzero(hit)[-1]] = 1.0
        columns.append(np.stack([hit, latest], 1))
    return columns
