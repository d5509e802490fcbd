"""Where the fitted relation role's UPDATE figures are capped, on the dev cases (docs/evaluation.md, `links`).

  python scripts/relation_ceilings.py --db /tmp/x.duckdb [--cases cases-dev] [--irc irc-dev]
      [--trees] [--reader] [--soft-gate]

Leave one case out, the joint parent model alone (no slots-first pass; the label model labels the chosen parent),
then the same with what an oracle would add, to see which decision limits UPDATE recall and precision:
- *oracle child type*: the child's gold type (UPDATE / EXPAND / ROOT) given; the parent is the best candidate
  of that type under the fitted scores (an UPDATE child: the best candidate the gate allows);
- *gate*: how many gold UPDATEs the UPDATE gate (relation.slots.no_update_between) rules out at their gold parent;
- *child type alone*: a logistic model of "this child UPDATEs something" from what the features read of the child
  and its candidates; its ranking's AUC and its precision at recall 0.5 / 0.6 / 0.7;
- `--trees`: a gradient-boosted parent model over the same features (needs scikit-learn, requirements-dev.txt),
  whether a model that can combine features non-linearly chooses better parents;
- `--reader`: whether a reading of the child's language adds to the features: a logistic model of "this child
  UPDATEs something" over the child's MiniLM vector (scikit-learn), its score one more label feature of the joint
  model; cross-fitted (a training case's score comes from a model that did not see that case; IRC's from the
  model of all the training cases);
- `--soft-gate`: the UPDATE gate as one more label feature (its weight fitted) instead of a rule that rules an
  UPDATE out, whether the 24-odd gold UPDATEs it rules out are worth the false UPDATEs it prevents.
Dev corpora only; a few minutes (the trees: several more). The examples' extra columns and the label rule are
tmem/evaluation/relation/ceilings.py.
"""
from __future__ import annotations

import sys
import time

import numpy as np
from relation_loco import combine, dev_examples, dev_parser, merge_cases

from tmem.evaluation import fit_relation as fit
from tmem.evaluation.relation.ceilings import label_of, soft_gate, with_column
from tmem.models.relation.fitted import parent_scores
from tmem.types import EXPAND, ROOT, UPDATE


class Tally:
    """Parent accuracy, edge accuracy and UPDATE precision / recall of (parent index, relation) choices."""

    def __init__(self, name: str):
        self.name, self.children, self.parent, self.edge = name, 0, 0, 0
        self.update_right = self.update_built = self.update_gold = 0

    def add(self, target: int, relation: str, chosen: int, label: str) -> None:
        self.children += 1
        self.parent += chosen == target
        self.edge += chosen == target and label == relation
        self.update_gold += relation == UPDATE
        self.update_built += label == UPDATE
        self.update_right += label == UPDATE and relation == UPDATE and chosen == target

    def line(self) -> str:
        n = max(self.children, 1)
        precision = self.update_right / max(self.update_built, 1)
        return (f"{self.name}: parent {self.parent / n:.3f}, edge {self.edge / n:.3f}, UPD P/R "
                f"{precision:.3f}/{self.update_right / max(self.update_gold, 1):.3f}"
                f" ({self.update_right} right of {self.update_built} built, {self.update_gold} gold)")


def child_vector(pair: np.ndarray, root: np.ndarray, labels: np.ndarray, gated: np.ndarray) -> np.ndarray:
    """What the features read of a child and its candidates, one vector: the ROOT features, the largest and smallest
    label feature over the candidates it may UPDATE, the largest pair feature, how many it may UPDATE."""
    ok = ~np.asarray(gated, bool)
    zero = np.zeros(labels.shape[1])
    return np.concatenate([root, labels[ok].max(0) if ok.any() else zero, labels[ok].min(0) if ok.any() else zero,
                           pair.max(0), [ok.sum()]])


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """The probability that a random positive outranks a random negative (ties count half)."""
    ranks = np.argsort(np.argsort(scores, kind="stable"), kind="stable") + 1.0
    for value in np.unique(scores):  # average ranks of ties
        same = scores == value
        ranks[same] = ranks[same].mean()
    pos = positive.sum()
    return float((ranks[positive].sum() - pos * (pos + 1) / 2) / (pos * (len(scores) - pos)))


def precision_at(scores: np.ndarray, positive: np.ndarray, recall: float) -> float:
    order = np.argsort(-scores, kind="stable")
    hits = np.cumsum(positive[order])
    at = int(np.searchsorted(hits / positive.sum(), recall))
    return float(hits[at] / (at + 1))


def tree_rows(pair: np.ndarray, root: np.ndarray, labels: np.ndarray, gated: np.ndarray) -> np.ndarray:
    """One row per candidate and one for ROOT: pair and label features, the gate, the candidate's relevance rank
    and gap to the best, the child's ROOT features; the ROOT row holds only those (missing elsewhere)."""
    relevance = pair[:, 0]
    rank = np.argsort(np.argsort(-relevance, kind="stable"), kind="stable")
    child = np.repeat(root[None], len(pair), 0)
    rows = np.hstack([pair, labels, np.asarray(gated, float)[:, None], rank[:, None], (relevance - relevance.max())
                      [:, None], child, np.zeros((len(pair), 1))])
    extra = np.full((1, rows.shape[1]), np.nan)
    start = pair.shape[1] + labels.shape[1] + 3
    extra[0, start:start + len(root)] = root
    extra[0, -1] = 1.0
    return np.vstack([rows, extra])


class Reader:
    """Cross-fitted "this child UPDATEs something" scores from the children's MiniLM vectors (--reader)."""

    def __init__(self, embedder, irc: fit.Examples, cases: dict[str, fit.Examples], c: float = 1.0):
        self.vectors = {name: np.asarray(embedder.embed([m.text for m in ex.child]), float)
                        for name, ex in cases.items()}
        self.irc_vectors = np.asarray(embedder.embed([m.text for m in irc.child]), float)
        self.updates = {name: np.array([rel == UPDATE for rel in ex.relation]) for name, ex in cases.items()}
        self.irc, self.cases, self.c = irc, cases, c
        self.scores: list[float] = []  # the held-out cases' scores, for the vector's own AUC
        self.positive: list[bool] = []

    def _model(self, names: list[str]):
        from sklearn.linear_model import LogisticRegression
        return LogisticRegression(C=self.c, max_iter=3000).fit(np.vstack([self.vectors[n] for n in names]),
                                                               np.concatenate([self.updates[n] for n in names]))

    def fold(self, held: str) -> tuple[fit.Examples, fit.Examples]:
        """(training examples, held-out examples) with the score as one more label feature."""
        rest = [n for n in self.cases if n != held]
        scored = {n: with_column(self.cases[n], self._model([m for m in rest if m != n])
                                 .decision_function(self.vectors[n])) for n in rest}
        outer = self._model(rest)
        train = combine([with_column(self.irc, outer.decision_function(self.irc_vectors)), merge_cases(scored, rest)])
        held_scores = outer.decision_function(self.vectors[held])
        self.scores.extend(held_scores)
        self.positive.extend(self.updates[held])
        return train, with_column(self.cases[held], held_scores)


def joint_choice(wp, wr, wu, wl, pair, root, labels, gated) -> tuple[int, str]:
    """The joint model's option (candidate index, n for ROOT) and the label model's label of it."""
    gated = np.asarray(gated, bool)
    best = int(np.argmax(np.append(parent_scores(pair @ wp, labels @ wu, gated), root @ wr)))
    return best, label_of(wl, labels, gated, best)


def score_fold(tally: Tally, train: fit.Examples, test: fit.Examples) -> None:
    """Fit the joint and label models on `train`, add their choices on `test` to `tally`."""
    weights = (*fit.fit_joint(train), fit.fit_label(train))
    for pair, root, labels, gated, target, relation in zip(test.pair, test.root, test.labels, test.gated,
                                                           test.target, test.relation):
        tally.add(target, relation, *joint_choice(*weights, pair, root, labels, gated))


def main() -> int:
    parser = dev_parser(__doc__)
    parser.add_argument("--trees", action="store_true", help="Also the gradient-boosted parent model (scikit-learn).")
    parser.add_argument("--reader", action="store_true",
                        help="Also the joint model with a MiniLM reading of the child (scikit-learn).")
    parser.add_argument("--soft-gate", action="store_true",
                        help="Also the joint model with the UPDATE gate as a fitted label feature, not a rule.")
    args = parser.parse_args()
    started = time.perf_counter()
    _, embedder, irc, names, cases = dev_examples(args.db, args.cases, args.irc)
    joint, oracle, trees = Tally("joint model (no slots-first pass)"), Tally("oracle child type"), Tally("trees")
    read = Tally("joint model + MiniLM reading of the child")
    softly = Tally("joint model, the gate a fitted feature")
    reader = Reader(embedder, irc, cases) if args.reader else None
    gated_gold = 0
    child_scores, child_update = [], []
    for held in names:
        rest = merge_cases(cases, [n for n in names if n != held])
        train = combine([irc, rest])
        wp, wr, wu = fit.fit_joint(train)
        wl = fit.fit_label(train)
        test = cases[held]
        kinds = fit.Examples([], [], [], [], [], [], [])
        for pair, root, labels, gated, relation in zip(rest.pair, rest.root, rest.labels, rest.gated, rest.relation):
            kinds.label.append(child_vector(pair, root, labels, gated))
            kinds.is_update.append(relation == UPDATE)
            kinds.label_weight.append(1.0)
        wk = fit.fit_label(kinds)
        model = None
        if args.trees:
            from sklearn.ensemble import HistGradientBoostingClassifier
            x = np.vstack([tree_rows(p, r, lab, g) for p, r, lab, g in zip(train.pair, train.root, train.labels,
                                                                           train.gated)])
            y = np.concatenate([np.arange(len(p) + 1) == t for p, t in zip(train.pair, train.target)])
            w = np.concatenate([np.full(len(p) + 1, cw) for p, cw in zip(train.pair, train.weight)])
            model = HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15,
                                                   l2_regularization=1.0, random_state=0)
            model.fit(x, y, sample_weight=w / w.mean())
        if reader is not None:
            score_fold(read, *reader.fold(held))
        if args.soft_gate:
            score_fold(softly, soft_gate(train), soft_gate(test))
        for pair, root, labels, gated, target, relation in zip(test.pair, test.root, test.labels, test.gated,
                                                               test.target, test.relation):
            n = len(pair)
            gated = np.asarray(gated, bool)
            best, best_label = joint_choice(wp, wr, wu, wl, pair, root, labels, gated)
            joint.add(target, relation, best, best_label)
            update_scores = np.where(gated, -np.inf, pair @ wp + labels @ wu)
            if relation == ROOT:
                oracle.add(target, relation, n, ROOT)
            elif relation == UPDATE and np.isfinite(update_scores).any():
                oracle.add(target, relation, int(np.argmax(update_scores)), UPDATE)
            elif relation == UPDATE:
                oracle.add(target, relation, best, best_label)
            else:
                oracle.add(target, relation, int(np.argmax(pair @ wp)), EXPAND)
            gated_gold += relation == UPDATE and bool(gated[target])
            child_scores.append(float(child_vector(pair, root, labels, gated) @ wk))
            child_update.append(relation == UPDATE)
            if model is not None:
                chosen = int(np.argmax(model.predict_proba(tree_rows(pair, root, labels, gated))[:, 1]))
                trees.add(target, relation, chosen, label_of(wl, labels, gated, chosen))
        print(f"  {held} done", file=sys.stderr)
    print(f"leave one case out, {len(names)} cases of {args.cases} (each fit also on {args.irc}):")
    extra = [t for t, on in ((trees, args.trees), (read, reader is not None), (softly, args.soft_gate)) if on]
    for tally in (joint, oracle, *extra):
        print("  " + tally.line())
    print(f"  the UPDATE gate rules out {gated_gold} of {joint.update_gold} gold UPDATEs at their gold parent")
    scores, positive = np.array(child_scores), np.array(child_update)
    print(f"  child type alone (logistic): AUC {auc(scores, positive):.3f}; precision at recall 0.5 "
          f"{precision_at(scores, positive, 0.5):.2f}, 0.6 {precision_at(scores, positive, 0.6):.2f}, 0.7 "
          f"{precision_at(scores, positive, 0.7):.2f} ({positive.sum()} UPDATE children of {len(positive)})")
    if reader is not None:
        scores, positive = np.array(reader.scores), np.array(reader.positive)
        print(f"  the child's MiniLM vector alone (logistic): AUC {auc(scores, positive):.3f}; precision at recall 0.5 "
              f"{precision_at(scores, positive, 0.5):.2f}, 0.6 {precision_at(scores, positive, 0.6):.2f}, 0.7 "
              f"{precision_at(scores, positive, 0.7):.2f}")
    print(f"in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
