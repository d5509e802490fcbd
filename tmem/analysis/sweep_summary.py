"""A sweep's per-question rows (`Store.sweep_results`) summarised per cell: recall and seed recall (micro over
units, Eq. 10), evidence completeness, accuracy where judged, errors and time, in the grid's order. Shared by the
sweep runner (tmem.evaluation.sweep) and the Sweep view (tmem.viz.batch.sweep). Pure functions over frames.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (in grid order, values sorted): its grid values as columns, questions, units,
    recall and seed recall (micro over units, Eq. 10), mean evidence messages, judged questions and accuracy,
    errors, mean seconds per question."""
    columns = ["cell", "params", "questions", "units", "recovered", "recall", "evidence_complete", "seed_recall",
               "mean_messages", "judged", "accuracy", "errors", "mean_seconds"]
    if not len(rows):
        return pd.DataFrame(columns=columns)
    out = []
    for cell, part in rows.groupby("cell", sort=False):
        units = pd.to_numeric(part["units"], errors="coerce").sum()
        judged = part["correct"].dropna()
        need = pd.to_numeric(part["units"], errors="coerce")
        held = pd.to_numeric(part["units_recovered"], errors="coerce")[need > 0]
        out.append({"cell": cell, "params": json.loads(part["params"].iloc[0]), "questions": len(part),
                    "evidence_complete": (held >= need[need > 0]).mean() if len(held) else np.nan,
                    "units": int(units), "recovered": int(pd.to_numeric(part["units_recovered"]).sum()),
                    "recall": pd.to_numeric(part["units_recovered"]).sum() / units if units else np.nan,
                    "seed_recall": pd.to_numeric(part["seed_units_recovered"]).sum() / units if units else np.nan,
                    "mean_messages": pd.to_numeric(part["evidence_messages"]).mean(),
                    "judged": len(judged), "accuracy": judged.astype(bool).mean() if len(judged) else np.nan,
                    "errors": int(part["error"].notna().sum()), "mean_seconds": pd.to_numeric(part["seconds"]).mean()})
    frame = pd.DataFrame(out, columns=columns)
    names = axes(frame)
    for name in names:
        frame[name] = [p.get(name) for p in frame["params"]]
    # grid order whatever order the tasks finished in (the first parameter varying slowest)
    rank = {n: {v: i for i, v in enumerate(values(frame, n))} for n in names}
    order = sorted(range(len(frame)), key=lambda i: [rank[n][hashable(frame[n].iloc[i])] for n in names])
    return frame.iloc[order].reset_index(drop=True)


def axes(summary: pd.DataFrame) -> list[str]:
    """The swept parameters, in the grid's order."""
    names: list[str] = []
    for params in summary.get("params", []):
        names += [n for n in params if n not in names]
    return names


def values(summary: pd.DataFrame, name: str) -> list[Any]:
    """The values one parameter takes in the sweep, sorted (numbers numerically)."""
    found = list(dict.fromkeys(hashable(v) for v in summary[name]))
    return sorted(found, key=lambda v: (not isinstance(v, int | float), v if isinstance(v, int | float) else str(v)))


def hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
