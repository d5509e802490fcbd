"""Three more readings of "which earlier statement does this child revise", measured on the dev cases before building
any of them into the fitted relation role (docs/evaluation.md, `links`, "Where the ceiling is"; issue 21).

  python scripts/relation_probes.py --db /tmp/x.duckdb [--cases cases-dev] [--irc irc-dev]
      [--sentences] [--attributes] [--chain-nodes]

- `--sentences`: for each gold UPDATE, the rank of its gold parent among the candidates that state a state, by the
  MiniLM cosine of whole messages against the best cosine of any two of their sentences (the annotation's parent is
  the statement of the *attribute* revised, often one sentence of a longer decision); and the same ranking over the
  gold chain nodes only (candidates the annotation itself makes a ROOT or an UPDATE: what knowing the chain of
  states first would leave to choose from).
- `--attributes`: values bound to the content words of their clause ("4 platform, 3 mobile" -> platform=4,
  mobile=3); a candidate whose attribute the child restates with another value, and the latest such candidate, as
  pair and label features of the joint model (leave one case out, each fit also on IRC dev).
- `--chain-nodes`: chain the states first, as a second round: the first round's leave-one-case-out decisions say
  how likely each message is a chain node (a ROOT or an UPDATE child); that probability, and the latest chain node
  within 0.1 relevance of the best, become features of a second joint model (stacked, leave one case out).
Dev corpora only; a few minutes each. The extra features and the attribute bindings are
tmem/evaluation/relation/probes.py.
"""
from __future__ import annotations

import sys
import time

import numpy as np
from relation_ceilings import Tally, score_fold
from relation_loco import combine, dev_examples, dev_parser, merge_cases

from tmem.evaluation import fit_relation as fit
from tmem.evaluation.relation.probes import attribute_columns, with_features
from tmem.models.relation.features import PAIR_FEATURES
from tmem.models.relation.slots import states_a_state
from tmem.models.relation.values import cues, sentences
from tmem.types import ROOT, UPDATE

RELEVANCE = PAIR_FEATURES.index("relevance")


def loco(tally: Tally, irc: fit.Examples, cases: dict[str, fit.Examples]) -> Tally:
    for held in cases:
        score_fold(tally, combine([irc, merge_cases(cases, [n for n in cases if n != held])]), cases[held])
    return tally


# --- --sentences
class Vectors:
    """MiniLM vectors of texts, each distinct text embedded once (a case's messages recur as every later child's
    candidates)."""

    def __init__(self, embedder):
        self.embedder, self.known = embedder, {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if t not in self.known))
        if new:
            self.known.update(zip(new, self.embedder.embed(new)))
        return np.array([self.known[t] for t in texts])


def sentence_ranks(embedder, cases: dict[str, fit.Examples], nodes: set[str]) -> dict[str, list[bool]]:
    """Per reading, one 'the gold parent ranks first' per gold UPDATE child."""
    out: dict[str, list[bool]] = {"messages": [], "sentences": [], "messages, chain nodes": []}
    vectors = Vectors(embedder)
    for ex in cases.values():
        for child, candidates, target, relation in zip(ex.child, ex.candidates, ex.target, ex.relation):
            if relation != UPDATE or target >= len(candidates):
                continue
            texts = [child.text] + [m.text for m in candidates]
            whole = vectors(texts)
            mine = vectors(sentences(child.text) or [child.text])
            by_sentence = np.array([(vectors(sentences(m.text) or [m.text]) @ mine.T).max() for m in candidates])
            stated = np.array([states_a_state(cues(m.text)) for m in candidates])
            chain = np.array([m.id in nodes for m in candidates])
            for name, score, pool in (("messages", whole[1:] @ whole[0], stated), ("sentences", by_sentence, stated),
                                      ("messages, chain nodes", whole[1:] @ whole[0], chain)):
                out[name].append(int(np.argmax(np.where(pool, score, -np.inf))) == target)
    return out


# --- --attributes
# --- --chain-nodes
def chain_probabilities(weights, ex: fit.Examples) -> dict[str, float]:
    """P(the child is a chain node: ROOT, or an UPDATE of some candidate) under the joint model, per child id."""
    wp, wr, wu, _ = weights
    out = {}
    for pair, root, labels, gated, child in zip(ex.pair, ex.root, ex.labels, ex.gated, ex.child):
        expand = pair @ wp
        options = np.concatenate([expand, np.where(np.asarray(gated, bool), -np.inf, expand + labels @ wu),
                                  [root @ wr]])
        p = np.exp(options - options.max())
        out[child.id] = float(p[len(pair):].sum() / p.sum())
    return out


def chain_columns(ex: fit.Examples, chain: dict[str, float]) -> list:
    columns = []
    for pair, candidates in zip(ex.pair, ex.candidates):
        p = np.array([chain.get(m.id, 0.0) for m in candidates])
        known = np.array([float(m.id in chain) for m in candidates])
        relevance = pair[:, RELEVANCE]
        latest = np.zeros(len(candidates))
        if (p > 0.5).any():
            best = relevance[p > 0.5].max()
            latest[max(i for i in range(len(p)) if p[i] > 0.5 and relevance[i] >= best - 0.1)] = 1.0
        columns.append(np.stack([p, 1 - known, latest], 1))
    return columns


def main() -> int:
    parser = dev_parser(__doc__)
    parser.add_argument("--sentences", action="store_true")
    parser.add_argument("--attributes", action="store_true")
    parser.add_argument("--chain-nodes", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    store, embedder, irc, names, cases = dev_examples(args.db, args.cases, args.irc)
    if args.sentences:
        nodes = set()  # the annotation's chain nodes that state a state
        for n in names:
            text = {m.id: m.text for m in store.messages(args.cases, n)}
            nodes |= {c for c, _, rel in store.gold_edges(args.cases, n) if rel in (ROOT, UPDATE)
                      and states_a_state(cues(text[c]))}
        for name, hits in sentence_ranks(embedder, cases, nodes).items():
            print(f"gold UPDATE parent ranked first by {name}: {np.mean(hits):.3f} ({sum(hits)} of {len(hits)})")
    if args.attributes or args.chain_nodes:
        print(loco(Tally("joint model (no slots-first pass)"), irc, cases).line())
    if args.attributes:
        print(loco(Tally("+ attribute restated with another value"), with_features(irc, attribute_columns(irc)),
                   {n: with_features(ex, attribute_columns(ex)) for n, ex in cases.items()}).line())
    if args.chain_nodes:
        chain: dict[str, float] = {}
        for held in names:  # round 1: each case's chain nodes from a model that did not see it
            train = combine([irc, merge_cases(cases, [n for n in names if n != held])])
            chain.update(chain_probabilities((*fit.fit_joint(train), fit.fit_label(train)), cases[held]))
        train = combine([irc, merge_cases(cases, names)])
        chain.update(chain_probabilities((*fit.fit_joint(train), fit.fit_label(train)), irc))
        print(loco(Tally("+ chain nodes of a first round (stacked)"), with_features(irc, chain_columns(irc, chain)),
                   {n: with_features(ex, chain_columns(ex, chain)) for n, ex in cases.items()}).line())
    print(f"in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
