"""The fitted offline relation role ("offline:fitted-relation"): the state-seeking rule's signals weighed by a small
model fitted on the dev data instead of by hand-ordered rules.

Two log-linear models over features that any chat has (tmem.models.relation.features):
- **parent**: a conditional logit over the child's Eq. 4 candidates plus a ROOT option, fitted as one decision
  over (candidate, EXPAND), (candidate, UPDATE) and ROOT — a candidate's score is `pair weights · pair features`
  (relevance, reply link, address, recency, whether it states the current state, and those crossed with what the
  child does: states a new state, changes one, asks, acknowledges) plus log(1 + e^(`update weights · label
  features`)) where the child may UPDATE it (`parent_scores`): the decision a revision replaces outscores the
  challenge it replies to when the child reads as changing it. ROOT's score is `root weights · child features`.
  The highest-probability option wins.
- **label**: given the chosen parent, P(UPDATE) = sigmoid(`LABEL_WEIGHTS` · label features) (the child states a
  new state, a change cue, values that replace the parent's, the parent answered a challenge...); EXPAND otherwise.
Confidence = P(parent) · P(label): the models' own probabilities, whose reliability on dev and held-out data
docs/evaluation.md reports. The reason names the three features that pushed the choice most. With `query_ties`
the question settles a near tie of two parents (tmem/models/relation/query.py; off by default).

The weights are data (tmem/models/relation/weights.json), written by `python -m tmem fit-relation` from the dev
splits only (IRC dev and data/cases/dev; never the demo generator's output, whose templates would teach the
demo's own wording); the file records what it was fitted on. The slot features (tmem/models/relation/slots.py) let
the fit chain a stated state to the earlier statement of its slot rather than to the challenge it replies to.

Cost: the rule's decision and the features share one computation of the cosines and overlaps (`features_of`), and
what the features read of a candidate is kept per scope (features._reads), since a question's candidates
recur for every later child. Within `shared_decisions` (`links`, which scores revision-first beside this role on the
same children) each decision is made once and read again by the other role.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from tmem.models.base import RelationResult
from tmem.models.relation.features import LABEL_FEATURES, PAIR_FEATURES, ROOT_FEATURES, relation_features
from tmem.models.relation.query import QUERY_MARGIN, settle_tie, tie_reason
from tmem.models.relation.signals import candidate_overlaps
from tmem.models.relation.slots import no_update_between
from tmem.models.relation.state import StateRelation
from tmem.models.relation.values import cues
from tmem.types import EXPAND, NONE, UPDATE, Message, Question, RelationChoice

WEIGHTS = Path(__file__).resolve().parent / "weights.json"


FIRST_PASS = "offline: slots first"  # how the first pass (slots.settled_state) begins its reason; revision-first
# reads a choice made by it from this prefix


@lru_cache(maxsize=4)
def load_weights(path: str = str(WEIGHTS)) -> dict:
    """The fitted weights: {"pair": {feature: w}, "root": {...}, "label": {...}, "fitted_on": ..., ...}."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    for part, names in (("pair", PAIR_FEATURES), ("root", ROOT_FEATURES), ("update", LABEL_FEATURES),
                        ("label", LABEL_FEATURES)):
        missing = set(names) - set(data.get(part, {}))
        if missing:
            raise ValueError(f"{path}: field {part!r} lacks weights for {', '.join(sorted(missing))}; re-fit with "
                             "python -m tmem fit-relation")
    data["vectors"] = (_vector(data["pair"], PAIR_FEATURES), _vector(data["root"], ROOT_FEATURES),
                       _vector(data["update"], LABEL_FEATURES), _vector(data["label"], LABEL_FEATURES))
    return data


def _vector(weights: dict, names: Sequence[str]) -> np.ndarray:
    return np.array([float(weights.get(n, 0.0)) for n in names])


def update_gate(child: Message, candidates: Sequence[Message]) -> np.ndarray:
    """Per candidate: True when the child cannot UPDATE it (slots.no_update_between)."""
    c = cues(child.text)
    return np.array([no_update_between(c, cues(p.text), child.text, p.text) for p in candidates], dtype=bool)


def parent_scores(expand: np.ndarray, update: np.ndarray, gated: np.ndarray) -> np.ndarray:
    """Log-scores of the candidates as parents under the joint model: a candidate is the parent as EXPAND
    (exp(expand)) or as UPDATE (exp(expand + update)), the latter where the gate allows; so a candidate the child
    would plausibly UPDATE gains over one it would only EXPAND (a revision replying to a challenge)."""
    return expand + np.where(gated, 0.0, np.logaddexp(0.0, update))


def _top_reasons(weights: np.ndarray, values: np.ndarray, names: Sequence[str], n: int = 3) -> str:
    contributions = weights * values
    order = np.argsort(-np.abs(contributions))[:n]
    return ", ".join(f"{names[i]} {contributions[i]:+.2f}" for i in order if contributions[i])


UPDATE_THRESHOLD = 0.5  # leave one style out over the six dev styles (docs/evaluation.md, "Issue 38:
# revision-first"), 0.3-0.7: below 0.5 no style gains; above, cases loses UPDATE recall (0.442 -> 0.432 -> 0.416)
SETTLED = PAIR_FEATURES.index("settled_state")
SETTLED_CONFIDENCE = 0.6  # the first pass was right for 19 of its 32 children on cases dev (docs/evaluation.md)
RELEVANCE = PAIR_FEATURES.index("relevance")


def relevance_of(pair: np.ndarray, i: int) -> float:
    return float(pair[i, RELEVANCE])


def _option(candidates: Sequence[Message], i: int | None, probs: np.ndarray) -> str:
    """The runner-up option and its margin to the winner, for the trace ('ROOT' for the ROOT option)."""
    if i is None:
        return "none"
    name = "ROOT" if i == len(candidates) else candidates[i].id
    return f"{name} p={probs[i]:.2f} (margin {probs.max() - probs[i]:.2f})"


RULE_KINDS = (("resolves", "a decision answering the challenge"), ("values", "other values"),
              ("cue", "changes the current state ('"))


def rule_decision(rule: StateRelation, question: Question, child: Message, candidates: Sequence[Message],
                  scope, relevance: tuple | None = None) -> tuple[str | None, str]:
    """The hand-ordered state rule's choice (parent id or None, and its kind: UPDATE:resolves / UPDATE:values /
    UPDATE:cue, EXPAND or ROOT): a feature of the fitted role, whose fit learns how far to trust each kind.
    `relevance` = (cosines or None, overlaps), computed once for the rule and the features."""
    choice = next(iter(rule.label_pairs(question, child, candidates, scope, relevance).choices), None)
    if choice is None or choice.relation == NONE:
        return None, "ROOT"
    if choice.relation == UPDATE:
        kind = next((k for k, marker in RULE_KINDS if marker in choice.reason), "cue")
        return choice.parent_id, f"UPDATE:{kind}"
    return choice.parent_id, choice.relation


def features_of(question: Question, child: Message, candidates: Sequence[Message], scope, embedder):
    """(pair, root, label, cosines or None): the state rule's decision and the features, the relevance inputs
    (cosines, overlaps) computed once for both."""
    rule = StateRelation(embedder=embedder)
    sims = rule._similarities(child, candidates, scope)
    overlaps = candidate_overlaps(child, candidates, scope)
    decision = rule_decision(rule, question, child, candidates, scope, (sims, overlaps))
    reply = next((p for p in candidates if p.id == child.reply_to), None) if child.reply_to else None
    reply_sims = rule._similarities(reply, candidates, scope) if reply is not None else None
    return (*relation_features(child, candidates, scope, sims, decision, overlaps, reply_sims), sims)


def parent_probabilities(question: Question, child: Message, candidates: Sequence[Message], scope, embedder,
                         weights_path: str = str(WEIGHTS)) -> tuple[np.ndarray, tuple, np.ndarray]:
    """(P(parent) per candidate then ROOT, the features (pair, root, label, cosines or None), the UPDATE gate): the
    fitted role's parent model, for the role and for anything that re-ranks its choices (the local scorer)."""
    wp, wr, wu, _ = load_weights(weights_path)["vectors"]
    pair, root, label, sims = features_of(question, child, candidates, scope, embedder)
    gated = update_gate(child, candidates)
    scores = np.append(parent_scores(pair @ wp, label @ wu, gated), root @ wr)
    probs = np.exp(scores - scores.max())
    return probs / probs.sum(), (pair, root, label, sims), gated


@dataclass
class _Kept:
    """The decisions of one `shared_decisions` block, each with the seconds it took, and the seconds of the decisions
    read again: a role that reads a kept decision is charged its time, so `links`' ms per child stays each role's
    own cost."""
    decisions: dict = field(default_factory=dict)
    reread_seconds: float = 0.0


_DECISIONS: ContextVar[_Kept | None] = ContextVar("fitted_decisions", default=None)


def reread_seconds() -> float:
    """Seconds of the kept decisions read again so far in this block (0 outside one)."""
    kept = _DECISIONS.get()
    return kept.reread_seconds if kept is not None else 0.0


@contextmanager
def shared_decisions() -> Iterator[None]:
    """Within: each decision of a FittedRelation is kept by its settings, embedder, scope, question, child and
    candidates, so a role that runs the fitted layer inside it (revision-first) and the fitted role itself, scored
    side by side on the same children, decide each child once (`links` on IRC dev ran the fitted layer 4,477 times
    for 2,240 children).
    The decision is a pure function of those inputs; only the small result is kept, for the block's duration."""
    token = _DECISIONS.set(_Kept())
    try:
        yield
    finally:
        _DECISIONS.reset(token)


@dataclass(frozen=True)
class FittedRelation:
    """Parent = argmax of a conditional logit over candidates + ROOT; label = logistic UPDATE vs EXPAND."""

    weights_path: str = str(WEIGHTS)
    slots_first: bool = True  # follow slots.settled_state before the logit (variant no-slots-first: off)
    query_ties: bool = False  # the question settles a near tie of two parents (query.py; off: cases dev)
    query_margin: float = QUERY_MARGIN
    update_threshold: float = UPDATE_THRESHOLD  # P(UPDATE) from which the label is UPDATE
    embedder: object | None = field(default=None, compare=False)
    backend: str = "offline:fitted-relation"
    offline: bool = True

    @classmethod
    def from_config(cls, config, embedder=None) -> FittedRelation:
        return cls(query_ties=config.query_ties, query_margin=config.query_tie_margin, embedder=embedder)

    def with_embedder(self, embedder) -> FittedRelation:
        return replace(self, embedder=embedder)

    def label_pairs(self, question: Question, child: Message, candidates: Sequence[Message],
                    scope) -> RelationResult:
        if not candidates:
            return RelationResult()
        kept = _DECISIONS.get()
        if kept is None:
            return self._decide(question, child, candidates, scope)
        # the embedder and the scope by identity: equal settings over another embedder or scope decide anew; the
        # reply links too (revision-first re-points a thread's links, `revision_first.threaded`)
        key = (self, id(self.embedder), id(scope), question, child.id, child.reply_to,
               tuple((c.id, c.reply_to) for c in candidates))
        if key in kept.decisions:
            result, seconds, *_ = kept.decisions[key]
            kept.reread_seconds += seconds
            return result
        started = time.perf_counter()
        result = self._decide(question, child, candidates, scope)
        kept.decisions[key] = (result, time.perf_counter() - started, self.embedder, scope)  # the ids stay live
        return result

    def _decide(self, question: Question, child: Message, candidates: Sequence[Message], scope) -> RelationResult:
        w = load_weights(self.weights_path)
        wp, wr, _, wl = w["vectors"]
        probs, (pair, root, label, sims), gated = parent_probabilities(question, child, candidates, scope,
                                                                       self.embedder, self.weights_path)
        order = np.argsort(-probs, kind="stable")
        best, second = int(order[0]), int(order[1]) if len(order) > 1 else None
        basis = "" if sims is not None else "; overlap only (no embedder)"
        settled = np.flatnonzero(pair[:, SETTLED])
        if settled.size and self.slots_first:  # the first pass: a state stated in reply to a challenge settles it
            i = int(settled[0])
            runner = _option(candidates, best if best != i else second, probs)
            return RelationResult(choices=(RelationChoice(
                candidates[i].id, UPDATE, SETTLED_CONFIDENCE,
                f"{FIRST_PASS}: states a new state in reply to {child.reply_to}, which states no state or "
                f"objects to one: UPDATE of the state it addresses, {candidates[i].id} (relevance "
                f"{relevance_of(pair, i):.2f}); "
                f"runner-up {runner}{basis}"),))
        # Eq. 5 is conditioned on q: a near tie of two parents goes to the one clearly more relevant to the question
        tie = settle_tie(question, child, candidates, probs, scope, self.embedder, self.query_margin) \
            if self.query_ties else None
        if tie is not None:
            best, second = tie.winner, tie.loser
        runner = _option(candidates, second, probs) if tie is None else \
            f"{candidates[second].id} p={probs[second]:.2f} (the model's choice)"
        if best == len(candidates):
            top = int(np.argmax(probs[:-1]))
            return RelationResult(choices=(RelationChoice(
                candidates[top].id, NONE, round(float(probs[best]), 4),
                f"offline: fitted model: ROOT p={probs[best]:.2f} ({_top_reasons(wr, root, ROOT_FEATURES)}); best "
                f"parent {candidates[top].id} p={probs[top]:.2f} (margin {probs[best] - probs[top]:.2f}){basis}"),))
        c = cues(child.text)
        if not gated[best]:
            p_update = float(1 / (1 + np.exp(-(label[best] @ wl))))
            why = _top_reasons(wl, label[best], LABEL_FEATURES)
        else:  # UPDATE means the child changes a state (Sec. 4.3): one that states none, or only asks, cannot, nor
            # can a parent that states none be changed
            p_update, why = 0.0, ("the child states no new state" if not (c.new_state and not c.challenge)
                                  else f"{candidates[best].id} states no state, or the child repeats it")
        relation = UPDATE if p_update >= self.update_threshold else EXPAND
        p_label = p_update if relation == UPDATE else 1 - p_update
        reason = (f"offline: fitted model: parent {candidates[best].id} p={probs[best]:.2f} "
                  f"({_top_reasons(wp, pair[best], PAIR_FEATURES)}); {relation} p={p_label:.2f} ({why}); runner-up "
                  f"{runner}{basis}" + (f"; {tie_reason(tie, candidates)}" if tie is not None else ""))
        return RelationResult(choices=(RelationChoice(candidates[best].id, relation,
                                                      round(float(probs[best] * p_label), 4), reason),))
