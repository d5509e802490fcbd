"""Fitting the fitted relation role's weights (tmem/models/relation_learned.py) on gold edges of dev splits only.

Training data: every covered annotated child of the given corpora with at least one candidate, with the candidate
set the `links` scoring uses (IRC: 30 minutes / 20 candidates; other corpora: the whole scope). Two convex models,
fitted by L-BFGS (full batch) with an L2 penalty, each corpus weighted equally whatever its size
(IRC dev has ten times the children of the cases):
- parent: a conditional logit over candidates + ROOT (the gold parent, or ROOT for a gold root);
- label: logistic UPDATE vs EXPAND on the gold parent's label features (typed gold edges only; IRC links are untyped
  and do not train it).
"""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from tmem import api
from tmem.evaluation.links import LINK, corpus_defaults, gold_children
from tmem.models.relation_features import LABEL_FEATURES, PAIR_FEATURES, ROOT_FEATURES
from tmem.models.relation_learned import features_of
from tmem.types import EXPAND, UPDATE, Question

L2 = 1e-4  # leave-one-case-out on the first 6 dev cases: 1e-4 0.680, 1e-3 0.676 edge acc
MAX_ITERATIONS = 1000


@dataclass
class Examples:
    pair: list  # per child: (n x |PAIR|) matrix
    root: list  # per child: |ROOT| vector
    target: list  # per child: index of the gold parent among its candidates, n for ROOT
    label: list  # per typed child: |LABEL| vector of its gold parent
    is_update: list
    weight: list  # per child: its corpus's weight
    label_weight: list


def collect(store, corpora: Sequence[str], embedder, log: Callable[[str], None] | None = None,
            scopes: Sequence[str] | None = None, weights: Mapping[str, float] | None = None) -> Examples:
    """The examples of `corpora`; each corpus weighs `weights.get(corpus, 1)` in all, whatever its size."""
    ex = Examples([], [], [], [], [], [], [])
    for corpus in corpora:
        window, cap = corpus_defaults(store, corpus)
        rows, labels = [], []
        for name in store.scopes(corpus):
            if scopes and name not in scopes:
                continue
            edges = store.gold_edges(corpus, name)
            if not edges:
                continue
            scope = api.open_scope(store, corpus, name)
            for item in gold_children(scope.messages, edges, window, cap):
                if not item.covered or not item.candidates:
                    continue
                question = Question(f"link:{item.child.id}", name, item.child.text, None, None)
                pair, root, label, _ = features_of(question, item.child, list(item.candidates), scope, embedder)
                ids = [c.id for c in item.candidates]
                target = next((i for i, c in enumerate(ids) if c in item.gold_parents), len(ids))
                rows.append((pair, root, target))
                if target < len(ids) and item.relation in (UPDATE, EXPAND):
                    labels.append((label[target], item.relation == UPDATE))
        if log:
            log(f"  {corpus}: {len(rows)} children, {len(labels)} typed edges")
        share = (weights or {}).get(corpus, 1.0)
        for pair, root, target in rows:
            ex.pair.append(pair)
            ex.root.append(root)
            ex.target.append(target)
            ex.weight.append(share / len(rows))
        for vec, up in labels:
            ex.label.append(vec)
            ex.is_update.append(up)
            ex.label_weight.append(share / len(labels))
    return ex


def _minimize(loss_grad, size: int) -> np.ndarray:
    """The convex loss's minimum by L-BFGS (a few hundred gradient evaluations where Adam took thousands: the
    demo corpus's million candidate rows made the fit minutes long)."""
    result = minimize(loss_grad, np.zeros(size), jac=True, method="L-BFGS-B",
                      options={"maxiter": MAX_ITERATIONS, "gtol": 1e-7})
    return result.x


def fit_parent(ex: Examples, l2: float = L2) -> tuple[np.ndarray, np.ndarray]:
    """Conditional logit over candidates + ROOT; returns (pair weights, root weights)."""
    sizes = np.array([len(p) for p in ex.pair])
    x = np.vstack(ex.pair)
    r = np.vstack(ex.root)
    starts = np.concatenate([[0], np.cumsum(sizes + 1)[:-1]])  # option blocks: candidates then ROOT
    option_child = np.repeat(np.arange(len(sizes)), sizes + 1)
    is_root = np.zeros(len(option_child), bool)
    is_root[starts + sizes] = True
    target_pos = starts + np.array(ex.target)
    weight = np.array(ex.weight)
    weight = weight / weight.sum()
    npair = x.shape[1]

    def loss_grad(w):
        wp, wr = w[:npair], w[npair:]
        scores = np.empty(len(option_child))
        scores[~is_root] = x @ wp
        scores[is_root] = r @ wr
        top = np.maximum.reduceat(scores, starts)
        e = np.exp(scores - top[option_child])
        z = np.add.reduceat(e, starts)
        prob = e / z[option_child]
        loss = float(np.sum(weight * (np.log(z) + top - scores[target_pos]))) + l2 * float(w @ w)
        coef = prob * weight[option_child]
        coef[target_pos] -= weight
        g = np.concatenate([x.T @ coef[~is_root], r.T @ coef[is_root]]) + 2 * l2 * w
        return loss, g

    w = _minimize(loss_grad, npair + r.shape[1])
    return w[:npair], w[npair:]


def fit_label(ex: Examples, l2: float = L2) -> np.ndarray:
    x = np.vstack(ex.label)
    y = np.array(ex.is_update, float)
    weight = np.array(ex.label_weight)
    weight = weight / weight.sum()

    def loss_grad(w):
        p = 1 / (1 + np.exp(-(x @ w)))
        eps = 1e-12
        loss = -float(np.sum(weight * (y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)))) + l2 * float(w @ w)
        return loss, x.T @ (weight * (p - y)) + 2 * l2 * w

    return _minimize(loss_grad, x.shape[1])


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def fit_weights(store, corpora: Sequence[str], embedder, l2: float = L2,
                log: Callable[[str], None] | None = None, scopes: Sequence[str] | None = None,
                weights: Mapping[str, float] | None = None) -> dict:
    """The weights file's content, fitted on `corpora` (dev splits only: docs/evaluation.md)."""
    started = time.perf_counter()
    ex = collect(store, corpora, embedder, log, scopes, weights)
    if not ex.pair or not ex.label:
        raise ValueError(f"corpora {', '.join(corpora)}: no gold parents with candidates and no typed UPDATE/EXPAND "
                         f"edges to fit on (--corpus needs gold edges: python -m tmem links --help)")
    wp, wr = fit_parent(ex, l2)
    wl = fit_label(ex, l2)

    def named(names, w):
        return {n: round(float(v), 4) for n, v in zip(names, w)}

    return {"about": "Weights of the fitted offline relation role (tmem/models/relation_learned.py), fitted by "
                     "python -m tmem fit-relation on dev splits only.",
            "fitted_on": list(corpora), "corpus_weights": {c: (weights or {}).get(c, 1.0) for c in corpora},
            "scopes": sorted(scopes) if scopes else "all", "children": len(ex.pair),
            "typed_edges": len(ex.label),
            "updates": int(sum(ex.is_update)), "embedder": getattr(embedder, "name", str(embedder)), "l2": l2,
            "code": _commit(), "seconds": round(time.perf_counter() - started, 1),
            "untyped_label": LINK, "pair": named(PAIR_FEATURES, wp), "root": named(ROOT_FEATURES, wr),
            "label": named(LABEL_FEATURES, wl)}
