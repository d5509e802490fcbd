"""Fitting the fitted relation role's weights (tmem/models/relation/fitted.py) on gold edges of dev splits only.

Training data: every covered annotated child of the given corpora with at least one candidate, with the candidate
set the `links` scoring uses (IRC: 30 minutes / 20 candidates; other corpora: the whole scope). Two convex models,
fitted by L-BFGS (full batch) with an L2 penalty, each corpus weighted equally whatever its size
(IRC dev has ten times the children of the cases):
- parent (`fit_joint`): one softmax per child over (candidate, EXPAND), (candidate, UPDATE) and ROOT, so that a
  candidate's score as a parent includes how well the child would UPDATE it (relation_learned.parent_scores): the
  gold option, or for an untyped gold parent (IRC) either label of it the UPDATE gate allows;
- label: logistic UPDATE vs EXPAND on the gold parent's label features (typed gold edges only; IRC links are untyped
  and do not train it). The joint model's own UPDATE term chooses parents; this model labels the chosen one
  (leave one case out on cases dev, labelling by the joint term instead measured the same: edge 0.762 vs 0.763).
"""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from tmem.evaluation.links import LINK, corpus_defaults, embed_once, gold_children
from tmem.models.relation.features import LABEL_FEATURES, PAIR_FEATURES, ROOT_FEATURES
from tmem.models.relation.fitted import features_of, parent_scores, update_gate
from tmem.models.relation.revision_first import party
from tmem.models.relation.signals import replies_marked
from tmem.pipeline.run import open_scope
from tmem.types import EXPAND, ROOT, UPDATE, Question

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
    labels: list = field(default_factory=list)  # per child: (n x |LABEL|), every candidate's label features
    gated: list = field(default_factory=list)  # per child: n booleans, UPDATE of that candidate impossible
    relation: list = field(default_factory=list)  # per child: UPDATE / EXPAND / LINK (untyped) / ROOT
    child: list = field(default_factory=list)  # per child: the child Message (for scripts that read its text)
    candidates: list = field(default_factory=list)  # per child: its candidate Messages, in the order of `pair`
    unmarked: int = 0  # children of conversations that mark no reply link (IRC; signals.replies_marked):
    # revision_first.fitted_on_unmarked
    party: list = field(default_factory=list)  # per child: None where its conversation marks replies, else the
    # conversation's party size (revision_first.party: "many" / "few"), for `unmarked_record`


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
            scope = open_scope(store, corpus, name)
            items = gold_children(scope.messages, edges, window, cap)
            embed_once(scope, items, [embedder])
            unmarked = not replies_marked(scope, scope.messages)  # as revision-first routes it
            size = party(scope, scope.messages) if unmarked else None
            before = len(rows)
            for item in items:
                if not item.covered or not item.candidates:
                    continue
                question = Question(f"link:{item.child.id}", name, item.child.text, None, None)
                pair, root, label, _ = features_of(question, item.child, list(item.candidates), scope, embedder)
                ids = [c.id for c in item.candidates]
                target = next((i for i, c in enumerate(ids) if c in item.gold_parents), len(ids))
                gated = update_gate(item.child, item.candidates)
                rows.append((pair, root, target, label, gated, item.relation if target < len(ids) else ROOT,
                             item.child, item.candidates, size))
                if target < len(ids) and item.relation in (UPDATE, EXPAND):
                    labels.append((label[target], item.relation == UPDATE))
            ex.unmarked += unmarked * (len(rows) - before)
        if log:
            log(f"  {corpus}: {len(rows)} children, {len(labels)} typed edges")
        share = (weights or {}).get(corpus, 1.0)
        for pair, root, target, label, gated, relation, child, candidates, size in rows:
            ex.party.append(size)
            ex.child.append(child)
            ex.candidates.append(candidates)
            ex.pair.append(pair)
            ex.root.append(root)
            ex.target.append(target)
            ex.weight.append(share / len(rows))
            ex.labels.append(label)
            ex.gated.append(gated)
            ex.relation.append(relation)
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


GATED = -1e9  # the score of an UPDATE option the definition of UPDATE rules out (relation_slots.no_update_between)


def fit_joint(ex: Examples, l2: float = L2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One decision per child over (candidate, EXPAND), (candidate, UPDATE) and ROOT (relation_learned.parent_scores
    sums a candidate's two options): EXPAND scores `pair · wp`, UPDATE `pair · wp + label · wu` (ruled out where
    the gate says so), ROOT `root · wr`, one softmax over the 2n + 1 options, so a candidate's chance of being the
    parent includes how well the child would UPDATE it. Target: the gold option; for an untyped gold parent (IRC)
    either label of it the gate allows; a gold UPDATE the gate rules out stays possible. Returns (wp, wr, wu)."""
    npair, nroot, nlabel = ex.pair[0].shape[1], len(ex.root[0]), ex.labels[0].shape[1]
    blocks, offsets, targets, owners = [], [], [], []
    position = 0
    for c, (pair, root, labels, gated, target, relation) in enumerate(zip(ex.pair, ex.root, ex.labels, ex.gated,
                                                                          ex.target, ex.relation)):
        n = len(pair)
        options = np.zeros((2 * n + 1, npair + nroot + nlabel))
        options[:n, :npair] = pair
        options[n:2 * n, :npair] = pair
        options[n:2 * n, npair + nroot:] = labels
        options[2 * n, npair:npair + nroot] = root
        offset = np.zeros(2 * n + 1)
        offset[n:2 * n][np.asarray(gated, bool)] = GATED
        if target == n:
            chosen = [2 * n]
        elif relation in (EXPAND, UPDATE):
            chosen = [target if relation == EXPAND else n + target]
            offset[chosen] = 0.0  # a gold UPDATE the gate rules out is still the target
        else:  # an untyped gold parent: either label the gate allows (inference applies the gate too)
            chosen = [target] + ([] if gated[target] else [n + target])
        blocks.append(options)
        offsets.append(offset)
        targets += [position + o for o in chosen]
        owners += [c] * len(chosen)
        position += 2 * n + 1
    z = np.vstack(blocks)
    offset = np.concatenate(offsets)
    sizes = np.array([len(b) for b in blocks])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    option_child = np.repeat(np.arange(len(sizes)), sizes)
    targets, owners = np.array(targets), np.array(owners)
    weight = np.array(ex.weight)
    weight = weight / weight.sum()

    def loss_grad(w):
        scores = z @ w + offset
        top = np.maximum.reduceat(scores, starts)
        e = np.exp(scores - top[option_child])
        total = np.add.reduceat(e, starts)
        hit = np.zeros(len(sizes))
        np.add.at(hit, owners, e[targets])
        loss = float(np.sum(weight * (np.log(total) - np.log(hit)))) + l2 * float(w @ w)
        coef = e / total[option_child] * weight[option_child]
        np.subtract.at(coef, targets, e[targets] / hit[owners] * weight[owners])
        return loss, z.T @ coef + 2 * l2 * w

    w = _minimize(loss_grad, z.shape[1])
    return w[:npair], w[npair:npair + nroot], w[npair + nroot:]


RULE_PARENT = PAIR_FEATURES.index("rule_parent")


def unmarked_record(ex: Examples, wp: np.ndarray, wr: np.ndarray, wu: np.ndarray) -> dict:
    """Per party size ("many" / "few", revision_first.party) of the conversations without reply links fitted on:
    their children, and how many of them the fitted model (these weights, in-sample, as FittedRelation decides
    without its first pass) and the state rule (the `rule_parent` feature; ROOT where it marks none) give the gold
    parent (ROOT included). revision_first routes an unmarked conversation to the state rule where the fitted model
    did worse there, or saw no such conversation (`unmarked_layer`)."""
    out = {size: {"children": 0, "fitted_right": 0, "state_right": 0} for size in ("many", "few")}
    for pair, root, labels, gated, target, size in zip(ex.pair, ex.root, ex.labels, ex.gated, ex.target, ex.party):
        if size is None:
            continue
        scores = np.append(parent_scores(pair @ wp, labels @ wu, np.asarray(gated, bool)), root @ wr)
        ruled = np.flatnonzero(pair[:, RULE_PARENT])
        entry = out[size]
        entry["children"] += 1
        entry["fitted_right"] += int(int(np.argmax(scores)) == target)
        entry["state_right"] += int((int(ruled[0]) if ruled.size else len(pair)) == target)
    return out


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
    wp, wr, wu = fit_joint(ex, l2)
    wl = fit_label(ex, l2)

    def named(names, w):
        return {n: round(float(v), 4) for n, v in zip(names, w)}

    return {"about": "Weights of the fitted offline relation role (tmem/models/relation/fitted.py), fitted by "
                     "python -m tmem fit-relation on dev splits only.",
            "fitted_on": list(corpora), "corpus_weights": {c: (weights or {}).get(c, 1.0) for c in corpora},
            "scopes": sorted(scopes) if scopes else "all", "children": len(ex.pair),
            "typed_edges": len(ex.label),
            "updates": int(sum(ex.is_update)), "unmarked_children": ex.unmarked,
            "unmarked_by_party": unmarked_record(ex, wp, wr, wu),
            "embedder": getattr(embedder, "name", str(embedder)), "l2": l2,
            "code": _commit(), "seconds": round(time.perf_counter() - started, 1),
            "untyped_label": LINK, "pair": named(PAIR_FEATURES, wp), "root": named(ROOT_FEATURES, wr),
            "update": named(LABEL_FEATURES, wu), "label": named(LABEL_FEATURES, wl)}
