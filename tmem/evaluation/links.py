"""Gold-edge scoring of Temporal Memory Structuring (paper Sec. 4.3, Eq. 4-5; `python -m tmem links`).

Gold edges come from the store's `gold_links` table (`Store.gold_edges`): human reply links and thread starts of
the Ubuntu IRC disentanglement corpus (untyped links; a self-link is a gold ROOT), and typed UPDATE / EXPAND / ROOT
edges of GroupMemBench-layout corpora (derived from the generator's annotations, or hand-annotated in a
`gold_edges.jsonl` sidecar: tmem/corpora/gold_edges.py).

Two ways to score (docs/evaluation.md):
- per corpus (`evaluate_links`): every annotated child against its own Eq. 4 candidates (strictly earlier, same
  topic, stage order) among the scope's messages, restricted to the `window` minutes before it and capped at the
  `candidates` most recent (IRC defaults 30 minutes / 20; other corpora: no window, no cap). A child whose gold
  parent is not among its candidates is not scored (`coverage` says how many are); a gold ROOT is always scored.
  The relation role is conditioned on the child's own text (or an empty question).
- per question (`score_trace`): the decisions a pipeline run stored in its trace, for the children in the
  question's evidence; a gold parent outside the evidence cannot be chosen, so that child is not scored.

Metrics (LinkScore.as_dict): `accuracy` = right parent, or ROOT for a gold root, over scored children;
`link_accuracy` = right parent over scored children with a gold parent (the pre-ROOT metric); `root_rate` = gold
roots left ROOT; `relation_accuracy` = right label (UPDATE / EXPAND / ROOT; an untyped gold parent, LINK, is
matched by UPDATE or EXPAND) over scored children; `edge_accuracy` = right parent and right label (a gold edge
reproduced exactly; on IRC it equals `accuracy`); UPDATE precision and recall over edges, where gold is typed;
a confusion table gold label x predicted label (LINK = an untyped gold parent); a reliability
curve: the predictions' confidence in bins against the share that is right. Diagnostics
(tmem/evaluation/diagnostics/confusion.py): `matrix`, the confusion split into right and wrong parent, and
`misses`, each miss's error class (chain-tip, rooted revision, EXPAND instead of UPDATE, false UPDATE, under a
reply, wrong parent), also per child in the rows.
"""
from __future__ import annotations

import bisect
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache

from tmem.config import StructuringConfig
from tmem.evaluation.diagnostics.confusion import (
    LINK,
    built_cell,
    gold_chains,
    gold_replies,
    label_right,
    matrix,
    miss_class,
    miss_counts,
)
from tmem.models.relation import reread_seconds, shared_decisions
from tmem.pipeline.run import open_scope, run_and_store
from tmem.pipeline.structuring import candidate_parents, choose_parent
from tmem.types import EXPAND, ROOT, UPDATE, Message, ParentDecision, Question

LABELS = (UPDATE, EXPAND, ROOT)
BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0001)
IRC_DEFAULTS = (30.0, 20)  # window minutes, candidates: over 95% of IRC links span fewer than 20 lines


@dataclass(frozen=True)
class GoldChild:
    child: Message
    candidates: tuple[Message, ...]
    gold_parents: frozenset[str]  # empty: a gold root
    relation: str  # UPDATE / EXPAND / ROOT, or LINK for an untyped gold parent
    chain: frozenset[str] = frozenset()  # the gold parents' ancestors in the gold forest (confusion.gold_chains)
    below: frozenset[str] = frozenset()  # the messages under the gold parents (confusion.gold_replies)

    @property
    def is_root(self) -> bool:
        return not self.gold_parents

    @property
    def covered(self) -> bool:
        return self.is_root or any(c.id in self.gold_parents for c in self.candidates)


# kept for callers of the earlier name
LinkItem = GoldChild


@dataclass
class LinkScore:
    role: str
    linked: int = 0  # annotated children (gold parent or gold root)
    children: int = 0  # scored
    roots: int = 0  # scored gold roots
    correct_parent: int = 0
    correct_root: int = 0
    wrong_root: int = 0  # a gold parent, predicted ROOT
    wrong_parent: int = 0  # a gold parent, another parent predicted
    spurious_parent: int = 0  # a gold root given a parent
    typed: int = 0  # scored children whose label is checked (all of them; LINK matches UPDATE or EXPAND)
    typed_update_corpus: bool = False  # some gold edge is typed, so UPDATE precision / recall mean something
    relation_right: int = 0
    edge_right: int = 0
    update_predicted: int = 0
    update_gold: int = 0
    update_right: int = 0
    confusion: Counter = field(default_factory=Counter)  # (gold label, predicted label) -> n
    calibration: list = field(default_factory=list)  # (confidence, right) per prediction
    cells: Counter = field(default_factory=Counter)  # (gold label, built cell: label and right/wrong parent) -> n
    misses: Counter = field(default_factory=Counter)  # error class of each miss -> n (confusion.miss_class)
    seconds: float = 0.0
    errors: int = 0
    rows: list = field(default_factory=list)  # per child: what was expected and what was built

    @property
    def correct(self) -> int:
        return self.correct_parent + self.correct_root

    def add(self, item: GoldChild, decision: ParentDecision, keep_row: bool = False) -> None:
        self.children += 1
        parent, predicted = decision.parent_id, (ROOT if decision.parent_id is None else decision.relation)
        if item.is_root:
            self.roots += 1
            right_parent = parent is None
            self.correct_root += right_parent
            self.spurious_parent += not right_parent
        else:
            right_parent = parent in item.gold_parents
            self.correct_parent += right_parent
            self.wrong_root += parent is None
            self.wrong_parent += parent is not None and not right_parent
        self.confusion[(item.relation, predicted)] += 1
        self.cells[(item.relation, built_cell(predicted, right_parent and not item.is_root))] += 1
        miss = miss_class(item.relation, item.gold_parents, item.chain, parent, predicted, item.below)
        self.misses[miss] += miss is not None
        label_ok = label_right(item.relation, predicted)
        right = right_parent and label_ok
        self.typed += 1
        self.relation_right += label_ok
        self.edge_right += right
        if item.relation != LINK:
            self.update_gold += item.relation == UPDATE
            self.update_right += right and item.relation == UPDATE
            self.update_predicted += predicted == UPDATE
            self.typed_update_corpus |= item.relation in (UPDATE, EXPAND)  # typed edges, not only roots
        self.calibration.append((decision.confidence, right))
        if keep_row:
            self.rows.append({"child": item.child.id, "expected_parent": sorted(item.gold_parents) or None,
                              "expected": item.relation, "built_parent": parent, "built": predicted,
                              "confidence": decision.confidence, "right": right, "miss": miss,
                              "reason": decision.note or next((c.reason for c in decision.choices
                                                               if c.parent_id == parent), "")})

    def merge(self, other: LinkScore) -> None:
        for name in ("linked", "children", "roots", "correct_parent", "correct_root", "wrong_root", "wrong_parent",
                     "spurious_parent", "typed", "relation_right", "edge_right", "update_predicted", "update_gold",
                     "update_right", "seconds", "errors"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.typed_update_corpus |= other.typed_update_corpus
        self.confusion.update(other.confusion)
        self.cells.update(other.cells)
        self.misses.update(other.misses)
        self.calibration += other.calibration
        self.rows += other.rows

    def reliability(self) -> list[dict]:
        """Confidence bins: how many predictions fell in each, their mean confidence and the share right."""
        out = []
        for lo, hi in zip(BINS, BINS[1:]):
            inside = [(c, r) for c, r in self.calibration if lo <= c < hi]
            if inside:
                out.append({"bin": f"{lo:.1f}-{min(hi, 1.0):.1f}", "n": len(inside),
                            "confidence": round(sum(c for c, _ in inside) / len(inside), 3),
                            "accuracy": round(sum(r for _, r in inside) / len(inside), 3)})
        return out

    def as_dict(self) -> dict:
        def ratio(a: int, b: int) -> float | None:
            return round(a / b, 4) if b else None

        n = self.children or 1
        linked_scored = self.children - self.roots
        return {"role": self.role, "children": self.children, "accuracy": round(self.correct / n, 4),
                "link_accuracy": ratio(self.correct_parent, linked_scored),
                "root_rate": ratio(self.correct_root, self.roots), "gold_roots": self.roots,
                "wrong_root": round(self.wrong_root / n, 4), "wrong_parent": round(self.wrong_parent / n, 4),
                "spurious_parent": round(self.spurious_parent / n, 4),
                "relation_accuracy": ratio(self.relation_right, self.typed),
                "edge_accuracy": ratio(self.edge_right, self.typed),
                "update_precision": (ratio(self.update_right, self.update_predicted) if self.typed_update_corpus
                                     else None),
                "update_recall": ratio(self.update_right, self.update_gold),
                "coverage": ratio(self.children, self.linked), "linked_children": self.linked,
                "confusion": {f"{g}->{p}": k for (g, p), k in sorted(self.confusion.items())},
                "matrix": matrix(self.cells), "misses": miss_counts(self.misses),
                "reliability": self.reliability(), "errors": self.errors,
                "ms_per_child": round(1000 * self.seconds / n, 2)}


def gold_children(messages: Sequence[Message], edges: Sequence[tuple], window_minutes: float | None,
                  max_candidates: int) -> list[GoldChild]:
    """One item per annotated child: its structuring candidates (Eq. 4) in the window before it. `edges` are
    (child, parent or None for a root, relation or None when untyped); a child with any gold parent is no root."""
    config = StructuringConfig(max_candidates=max_candidates)
    ordered = sorted(messages, key=lambda m: m.timestamp)  # stable: log order within equal timestamps
    times = [m.timestamp for m in ordered]
    position = {m.id: i for i, m in enumerate(ordered)}
    parents: dict[str, set[str]] = {}
    relation: dict[str, str] = {}
    for edge in edges:
        child, parent, rel = (*edge, None)[:3]
        if child not in position or (parent is not None and (parent == child or parent not in position)):
            continue
        parents.setdefault(child, set())
        if parent is not None:
            parents[child].add(parent)
            relation[child] = rel or LINK
    chains, below = gold_chains(parents), gold_replies(parents)
    items = []
    for child_id in sorted(parents, key=lambda c: position[c]):
        child = ordered[position[child_id]]
        start = (bisect.bisect_left(times, child.timestamp - timedelta(minutes=window_minutes))
                 if window_minutes else 0)
        earlier = ordered[start:position[child_id]]
        items.append(GoldChild(child, tuple(candidate_parents(child, earlier, config)),
                               frozenset(parents[child_id]), relation.get(child_id, ROOT), chains[child_id],
                               below[child_id]))
    return items


def link_items(messages: Sequence[Message], links: Sequence[tuple], window_minutes: float | None,
               max_candidates: int) -> list[GoldChild]:
    """Items of (child, parent) reply links; a self-link marks a root (the IRC annotation convention)."""
    return gold_children(messages, [(c, None if c == p else p, None) for c, p, *_ in links], window_minutes,
                         max_candidates)


def score_links(items: Sequence[GoldChild], role, scope, query: str = "child", name: str | None = None,
                keep_rows: bool = False) -> LinkScore:
    """Run the relation role on every covered item and compare its decision with the gold edge."""
    result = LinkScore(name or role.backend, linked=len(items))
    started, reread = time.perf_counter(), reread_seconds()
    for item in items:
        if not item.covered:
            continue
        child = item.child
        if item.candidates:
            question = Question(f"link:{child.id}", child.scope, child.text if query == "child" else "", None, None)
            reply = role.label_pairs(question, child, list(item.candidates), scope)
            decision, _ = choose_parent(child, item.candidates, reply.choices, typed=True)
            result.errors += bool(reply.errors)
        else:
            decision = ParentDecision(child.id, (), (), None, ROOT, 1.0, "no eligible earlier candidate")
        result.add(item, decision, keep_rows)
    # a decision another role made first (`shared_decisions`) is charged at the time it took to make
    result.seconds = time.perf_counter() - started + reread_seconds() - reread
    return result


def previous_message_baseline(items: Sequence[GoldChild], keep_rows: bool = False) -> LinkScore:
    """Always the most recent candidate, as an EXPAND (ROOT only with no candidate)."""
    out = LinkScore("baseline: previous candidate", linked=len(items))
    for item in items:
        if item.covered:
            last = item.candidates[-1] if item.candidates else None
            out.add(item, ParentDecision(item.child.id, (), (), last.id if last else None,
                                         EXPAND if last else ROOT, 0.5), keep_rows)
    return out


def corpus_defaults(store, corpus: str) -> tuple[float | None, int]:
    """(window minutes, candidates) for a corpus: IRC's chat defaults, else the whole scope (decisions and their
    revisions lie days apart, like the pipeline's structuring over all evidence)."""
    return IRC_DEFAULTS if store.corpus_info(corpus).get("format") == "irc" else (None, 0)


def embed_once(scope, items: Sequence[GoldChild], embedders: Sequence) -> None:
    """Embed the scored children and their candidates in one pass per embedder (None: none): asked for one child
    at a time, the rows were embedded a few at a time and written one upsert per child (`links` on IRC dev with
    MiniLM, first run: 59 s, 34 of them writes). Only the rows the scoring reads (not the whole scope: the IRC
    logs hold many messages no annotated child reaches), at most the scope's row cache of them."""
    by_name = {e.name: e for e in embedders if e is not None}
    needed = sorted({scope.position[m.id] for item in items if item.covered and item.candidates
                     for m in (item.child, *item.candidates) if m.id in scope.position})
    if needed and len(needed) <= scope.row_cache:
        for embedder in by_name.values():
            scope.vectors_at(embedder, needed)


def evaluate_links(store, corpus: str, roles: Sequence, *, window: float | None = None, candidates: int | None = None,
                   query: str = "child", limit: int | None = None, keep_rows: bool = False,
                   scopes: Sequence[str] | None = None, log: Callable[[str], None] | None = None,
                   every: int = 1) -> list[LinkScore]:
    """Scores of each relation role (and the previous-candidate baseline), summed over the corpus's scopes.
    window/candidates None: the corpus's defaults (`corpus_defaults`). A sample: every `every`-th scored child
    of each scope in log order, at most `limit` spread over the scopes."""
    default_window, default_candidates = corpus_defaults(store, corpus)
    window = default_window if window is None else (window or None)
    candidates = default_candidates if candidates is None else candidates
    names = list(scopes or store.scopes(corpus))
    totals = [LinkScore(getattr(r, "backend", str(r))) for r in roles] + [LinkScore("baseline: previous candidate")]
    per_scope = -(-limit // len(names)) if limit else None
    for name in names:
        edges = store.gold_edges(corpus, name)
        if not edges:
            continue
        scope = open_scope(store, corpus, name)
        items = gold_children(scope.messages, edges, window, candidates)
        if per_scope is not None or every > 1:
            covered = [i for i in items if i.covered][::every][:per_scope]
            items = covered + [i for i in items if not i.covered]
        if log:
            log(f"  {name}: {len(items)} annotated children")
        embed_once(scope, items, [getattr(r, "embedder", None) for r in roles])
        with shared_decisions():  # revision-first runs the fitted layer on the children the fitted role scores
            scores = [score_links(items, r, scope, query, keep_rows=keep_rows) for r in roles]
        scores.append(previous_message_baseline(items, keep_rows))
        for total, s in zip(totals, scores):
            for row in s.rows:
                row["scope"] = name
            total.merge(s)
    return totals


@lru_cache(maxsize=16)
def gold_forest(gold_edges: tuple[tuple, ...]) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """Per child of the gold forest: its chain (gold_chains) and the replies under its parents (gold_replies). Kept
    per edge set: a page scoring 192 stored traces of one scope walked the same 3,000-edge forest 192 times
    (~2.7 s of a Structuring visit); the result is only read."""
    forest: dict[str, set[str]] = {}
    for child, parent, _ in gold_edges:
        forest.setdefault(child, set()).update([parent] if parent is not None and parent != child else [])
    return gold_chains(forest), gold_replies(forest)


def score_trace(trace, gold_edges: Sequence[tuple]) -> LinkScore:
    """Structuring of one stored pipeline run against the gold edges of its evidence: each child in the evidence
    with a gold edge, whose gold parent (if any) is in the evidence too, is scored with the decision it got."""
    evidence = set(trace.evidence_ids)
    decisions = {d.child_id: d for d in trace.decisions}
    by_child: dict[str, list] = {}
    for child, parent, relation in gold_edges:
        if child in evidence:
            by_child.setdefault(child, []).append((parent, relation))
    chains, below = gold_forest(tuple(gold_edges))
    backend = next((s.backend for s in trace.stages if s.name == "structuring"), "structuring")
    out = LinkScore(backend, linked=len(by_child))
    for child, golds in by_child.items():
        parents = frozenset(p for p, _ in golds if p is not None and p != child)
        relation = next((r for p, r in golds if p is not None and p != child), None) or (LINK if parents else ROOT)
        if (parents and not parents & evidence) or child not in decisions:
            continue
        placeholder = Message(child, trace.question.scope, "", datetime.min)  # LinkScore.add reads only the id
        out.add(GoldChild(placeholder, (), parents & evidence, relation, chains.get(child, frozenset()),
                          below.get(child, frozenset())), decisions[child], keep_row=True)
    return out


def evaluate_questions(store, corpus: str, roles, config, variant: str = "full",
                       question_ids: Sequence[str] | None = None, log: Callable[[str], None] | None = None,
                       save: bool = False) -> tuple[list[tuple[str, str, LinkScore]], LinkScore]:
    """Run the pipeline on each question (or only `question_ids`) and score its structuring against the gold edges
    of its evidence (`score_trace`). Returns ((question id, scope, score) per question, their total)."""
    gold_by_scope: dict[str, list] = {}
    rows, total = [], LinkScore("per question")
    for question in store.questions(corpus):
        if question_ids and question.id not in question_ids:
            continue
        if question.scope not in gold_by_scope:
            gold_by_scope[question.scope] = store.gold_edges(corpus, question.scope)
        trace = run_and_store(store, corpus, question, variant, config, roles, save=save)
        score = score_trace(trace, gold_by_scope[question.scope])
        total.role = score.role
        total.merge(score)
        rows.append((question.id, question.scope, score))
        if log:
            log(f"  {question.id}: {score.edge_right}/{score.typed} typed edges right")
    return rows, total
