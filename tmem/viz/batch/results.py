"""A stored backend label read back as the roles that made a trace: one readable line (`roles_line`) or a table of
role and backend (`backend_rows`). Result rows themselves are built in tmem.analysis.results and the ref to the trace
behind a row is tmem.types.TraceRef."""
from __future__ import annotations

from functools import lru_cache

import pandas as pd

ROLE_ORDER = ("evidence_utility", "relation", "answer", "judge", "embedder", "token_counter")


def roles_line(label: str) -> str:
    """A stored backend label as one readable line: "answer: offline:extractive-answerer · judge: …" (the roles'
    labels without their decoding settings), or the label itself when it does not split into the six roles."""
    pairs = role_pairs(label)
    if pairs is None:
        return label
    return " · ".join(f"{role}: {backend.split(' [', 1)[0]}" for role, backend in pairs)


@lru_cache(maxsize=256)
def role_pairs(label: str) -> tuple[tuple[str, str], ...] | None:
    """(role, backend) pairs of a stored backend label (the roles' `describe()` values joined by "|",
    tmem.models.base), or None when it does not split into the six roles. Plain tuples, cached: a page labels every
    stored trace with its roles, and a DataFrame per label was ~0.4 s of Structuring's visit on the demo batch."""
    parts = label.split("|")
    return tuple(zip(ROLE_ORDER, parts)) if len(parts) == len(ROLE_ORDER) else None


def backend_rows(label: str) -> pd.DataFrame:
    """Role and backend rows read back from a stored backend label (role_pairs); one row with the whole label when
    it does not split into the six roles."""
    pairs = role_pairs(label)
    if pairs is None:
        return pd.DataFrame([{"role": "all roles", "backend": label}])
    return pd.DataFrame({"role": [r for r, _ in pairs], "backend": [b for _, b in pairs]})
