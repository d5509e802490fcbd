"""A stored backend label read back as the roles that made a trace: one readable line (`roles_line`) or a table of
role and backend (`backend_rows`). Result rows themselves are built in tmem.analysis.results and the ref to the trace
behind a row is tmem.types.TraceRef."""
from __future__ import annotations

import pandas as pd

ROLE_ORDER = ("evidence_utility", "relation", "answer", "judge", "embedder", "token_counter")


def roles_line(label: str) -> str:
    """A stored backend label as one readable line: "answer: offline:extractive-answerer · judge: …" (the roles'
    labels without their decoding settings), or the label itself when it does not split into the six roles."""
    rows = backend_rows(label)
    if list(rows["role"]) == ["all roles"]:
        return label
    return " · ".join(f"{r.role}: {r.backend.split(' [', 1)[0]}" for r in rows.itertuples())


def backend_rows(label: str) -> pd.DataFrame:
    """Role and backend rows read back from a stored backend label (the roles' `describe()` values joined by "|",
    tmem.models.base); one row with the whole label when it does not split into the six roles."""
    parts = label.split("|")
    if len(parts) != len(ROLE_ORDER):
        return pd.DataFrame([{"role": "all roles", "backend": label}])
    return pd.DataFrame({"role": ROLE_ORDER, "backend": parts})
