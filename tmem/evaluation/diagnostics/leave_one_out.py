"""Leave-one-style-out scoring of the offline relation rules (`python -m tmem links --leave-one-out --corpus A
--corpus B ...`; docs/evaluation.md, "Diagnostics").

A style is one corpus with gold edges (IRC dev, the cases' dev split, each blind style's dev split). For each style
held out: the fitted weights are fitted on the other styles (tmem/evaluation/fit_relation.py, each style weighing
the same) into a temporary file, never the shipped weights.json; every offline rule in the registry
(tmem.models.relation.RULES) is scored on the held-out style (tmem/evaluation/links.py), a rule that reads fitted
weights with the fold's weights. Then per rule its worst style on edge accuracy and UPDATE precision / recall: the
default must be no worse than any other offline rule on any style (issue 38).

Only dev splits: a corpus whose split is sealed is refused before anything is read.
"""
from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tmem.evaluation.fit_relation import L2, fit_weights
from tmem.evaluation.links import evaluate_links

WORST_METRICS = ("edge_accuracy", "update_precision", "update_recall")
# Until the corpora table records a split marker (issue 38: helper ledger-38's `split` / `sealed` columns and
# tmem.evaluation.tuning.refuse_held_out, not on main when this was written; call that instead once it is), a held-out
# split is told by its name: the convention names held-out splits `<name>-test`. A marker in the corpus's metadata
# (`Store.corpus_info`), where there is one, decides instead of the name.
SEALED_SPLITS = ("test", "sealed")


def sealed_reason(info: dict, corpus: str) -> str | None:
    """Why `corpus` (its `Store.corpus_info`) is a held-out split that no fit or cross-validation may read, else
    None: its marker says test or sealed; a dev or train marker clears it; without a marker, a name ending in -test."""
    if info.get("sealed") or info.get("split") in SEALED_SPLITS:
        return f"its split marker says {'sealed ' if info.get('sealed') else ''}{info.get('split') or ''} split".strip()
    if info.get("split"):
        return None
    return "its name ends in '-test' (a held-out split)" if corpus.casefold().endswith("-test") else None


def with_weights(role, path: str):
    """`role` reading the fitted weights at `path`: a rule with a `weights_path` field, or holding such a rule in a
    field (a rule layered over the fitted one), gets the fold's weights. Returns (role, whether it reads them)."""
    if not dataclasses.is_dataclass(role):
        return role, False
    changes, refit = {}, False
    for f in dataclasses.fields(role):
        value = getattr(role, f.name)
        if f.name == "weights_path":
            changes[f.name], refit = path, True
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            inner, inner_refit = with_weights(value, path)
            if inner_refit:
                changes[f.name], refit = inner, True
    return (dataclasses.replace(role, **changes) if changes else role), refit


@dataclass(frozen=True)
class Fold:
    held_out: str
    trained_on: tuple[str, ...]
    scores: tuple[dict, ...]  # per rule (then the previous-candidate baseline): LinkScore.as_dict + "refit"
    fit_error: str | None = None  # the fit failed (no typed edge in the other styles): refit rules not scored


def fold_scores(store, held_out: str, roles: Sequence, refit: Sequence[bool], weights: dict | None,
                log: Callable[[str], None] | None) -> tuple[dict, ...]:
    """Every role scored on the held-out corpus; the roles that read fitted weights with `weights` (skipped when
    the fold has none)."""
    with tempfile.TemporaryDirectory(prefix="tmem-loso-") as folder:
        path = Path(folder) / "weights.json"
        if weights is not None:
            path.write_text(json.dumps(weights), encoding="utf-8")
        scored = [(with_weights(r, str(path))[0] if reads else r) for r, reads in zip(roles, refit)
                  if weights is not None or not reads]
        totals = evaluate_links(store, held_out, scored, log=log)
    out, it = [], iter(totals)
    for role, reads in zip(roles, refit):
        if weights is None and reads:
            out.append({"role": role.backend, "refit": True, "skipped": "no weights fitted for this fold"})
        else:
            out.append({**next(it).as_dict(), "refit": reads})
    out.append({**next(it).as_dict(), "refit": False})  # the previous-candidate baseline
    return tuple(out)


def leave_one_style_out(store, corpora: Sequence[str], roles: Sequence, embedder, l2: float = L2,
                        log: Callable[[str], None] | None = None) -> list[Fold]:
    """One Fold per corpus held out (see the module docstring). `roles`: the offline rules to score."""
    if len(corpora) < 2:
        raise ValueError("--leave-one-out needs at least two --corpus styles")
    for corpus in corpora:
        reason = sealed_reason(store.corpus_info(corpus), corpus)
        if reason:
            raise ValueError(f"--corpus {corpus}: {reason}; leave-one-style-out fits and tunes, so it reads dev "
                             "splits only (docs/evaluation.md, Dev/test discipline)")
    refit = [with_weights(r, "")[1] for r in roles]
    folds = []
    for held_out in corpora:
        trained_on = tuple(c for c in corpora if c != held_out)
        if log:
            log(f"held out {held_out}: fitting on {', '.join(trained_on)}")
        weights, error = None, None
        if any(refit):
            try:
                weights = fit_weights(store, trained_on, embedder, l2=l2, log=log)
            except ValueError as exc:
                error = str(exc)
        folds.append(Fold(held_out, trained_on, fold_scores(store, held_out, roles, refit, weights, log), error))
    return folds


def worst_styles(folds: Sequence[Fold]) -> dict[str, dict]:
    """Per role: for each of WORST_METRICS the held-out style where it is lowest, {"style", "value"} (None when no
    style measures it, e.g. UPDATE precision on untyped IRC links)."""
    out: dict[str, dict] = {}
    for fold in folds:
        for score in fold.scores:
            entry = out.setdefault(score["role"], {m: None for m in WORST_METRICS})
            for metric in WORST_METRICS:
                value = score.get(metric)
                if value is not None and (entry[metric] is None or value < entry[metric]["value"]):
                    entry[metric] = {"style": fold.held_out, "value": value}
    return out
