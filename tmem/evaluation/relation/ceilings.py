"""Where the fitted relation role's UPDATE figures are capped (scripts/relation_ceilings.py; docs/evaluation.md,
`links`, "Where the ceiling is"): the fitted examples with one more label feature (a reading of the child, or the
UPDATE gate as a fitted feature instead of a rule), and the label model's label of a chosen option. The script
fits and scores them leave one case out on the dev cases; the test checks them on planted examples.
"""
from __future__ import annotations

import numpy as np

from tmem.evaluation import fit_relation as fit
from tmem.types import EXPAND, ROOT, UPDATE


def with_label_feature(ex: fit.Examples, values: list, gated: list | None = None) -> fit.Examples:
    """`ex` with one more label feature, `values[i][j]` on candidate j of child i (and on the typed gold rows),
    and `gated` in place of its gate when given."""
    labels = [np.hstack([lab, np.asarray(v, float).reshape(-1, 1)]) for lab, v in zip(ex.labels, values)]
    typed = [lab[t] for lab, t, rel in zip(labels, ex.target, ex.relation) if t < len(lab) and rel in (UPDATE, EXPAND)]
    return fit.Examples(ex.pair, ex.root, ex.target, typed, ex.is_update, ex.weight, ex.label_weight, labels,
                        ex.gated if gated is None else gated, ex.relation, ex.child)


def with_column(ex: fit.Examples, column: np.ndarray) -> fit.Examples:
    """`ex` with one more label feature: `column[i]` on every candidate of child i."""
    return with_label_feature(ex, [np.full(len(lab), value) for lab, value in zip(ex.labels, column)])


def soft_gate(ex: fit.Examples) -> fit.Examples:
    """`ex` with the UPDATE gate as one more label feature of each candidate and no candidate ruled out."""
    return with_label_feature(ex, ex.gated, [np.zeros(len(g), bool) for g in ex.gated])


def label_of(wl: np.ndarray, labels: np.ndarray, gated, i: int) -> str:
    """The label model's label of option i (n for ROOT)."""
    if i == len(labels):
        return ROOT
    return UPDATE if not gated[i] and labels[i] @ wl > 0 else EXPAND
