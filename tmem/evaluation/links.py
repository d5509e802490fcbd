"""`python -m tmem links`: score Temporal Memory Structuring's parent choice (paper Sec. 4.3, Eq. 4-5) against human
reply-to links (the Ubuntu IRC disentanglement corpus, `python -m tmem import irc ...`).

Definitions (docs/evaluation.md):
- children: messages with at least one gold parent (an annotated link to an earlier line; self-links, which mark
  conversation starts, are not parents). A child with several gold parents is right when it picks any of them.
- candidates: the structuring stage's own candidate set P_j (Eq. 4: strictly earlier timestamp, same topic, stage
  order), restricted to the `--window` minutes before the child and capped at the `--candidates` most recent
  (StructuringConfig.max_candidates); defaults 30 minutes and 20 messages (over 95% of the corpus's links span
  fewer than 20 lines). Only children whose gold parent is among their candidates are scored; the share that is
  (`coverage`) is reported. IRC logs have one-minute timestamps; the importer spreads a minute's messages over it
  in log order, so a reply in its parent's minute is still later than the parent (tmem.corpora.irc).
- query: the child's own text (IRC has no questions), so the relation role judges the pair itself;
  `--query empty` uses an empty question instead.
- metrics: accuracy (the chosen parent is a gold parent), wrongly made roots (no parent chosen), wrong parent; and
  the "previous message" baseline (always the most recent candidate) on the same children.
"""
from __future__ import annotations

import argparse
import bisect
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from tmem.types import Message, Question


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default="irc", help="Corpus with gold reply links (default: irc).")
    parser.add_argument("--window", type=float, default=30.0, help="Candidate window before the child, minutes.")
    parser.add_argument("--candidates", type=int, default=20, help="Most recent eligible candidates per child.")
    parser.add_argument("--query", choices=("child", "empty"), default="child",
                        help="What the relation role is conditioned on (default: the child's text).")
    parser.add_argument("--limit", type=int, help="Score at most N children (spread over the scopes).")
    parser.add_argument("--json", action="store_true", help="Print the scores as one JSON object.")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")
    from tmem.models.settings import add_backend_arguments

    add_backend_arguments(parser)


@dataclass(frozen=True)
class LinkItem:
    child: Message
    candidates: tuple[Message, ...]
    gold_parents: frozenset[str]

    @property
    def covered(self) -> bool:
        return any(c.id in self.gold_parents for c in self.candidates)


@dataclass
class LinkScore:
    role: str
    children: int = 0  # scored (gold parent among the candidates)
    correct: int = 0
    roots: int = 0
    wrong_parent: int = 0
    linked: int = 0  # children with a gold parent at all
    seconds: float = 0.0
    errors: int = 0

    def as_dict(self) -> dict:
        n = self.children or 1
        return {"role": self.role, "children": self.children, "accuracy": round(self.correct / n, 4),
                "wrong_root": round(self.roots / n, 4), "wrong_parent": round(self.wrong_parent / n, 4),
                "coverage": round(self.children / self.linked, 4) if self.linked else None,
                "linked_children": self.linked, "errors": self.errors,
                "ms_per_child": round(1000 * self.seconds / n, 2)}


def link_items(messages: Sequence[Message], links: Sequence[tuple[str, str]], window_minutes: float,
               max_candidates: int) -> list[LinkItem]:
    """One item per child with a gold parent: its structuring candidates (Eq. 4) in the window before it."""
    from tmem.config import StructuringConfig
    from tmem.structuring import candidate_parents

    config = StructuringConfig(max_candidates=max_candidates)
    ordered = sorted(messages, key=lambda m: m.timestamp)  # stable: log order within equal timestamps
    times = [m.timestamp for m in ordered]
    position = {m.id: i for i, m in enumerate(ordered)}
    parents: dict[str, set[str]] = {}
    for child, parent in links:
        if child != parent and child in position and parent in position:
            parents.setdefault(child, set()).add(parent)
    items = []
    for child_id in sorted(parents, key=lambda c: position[c]):
        child = ordered[position[child_id]]
        start = bisect.bisect_left(times, child.timestamp - timedelta(minutes=window_minutes))
        earlier = ordered[start:position[child_id]]
        items.append(LinkItem(child, tuple(candidate_parents(child, earlier, config)), frozenset(parents[child_id])))
    return items


def score_links(items: Sequence[LinkItem], role, scope, query: str = "child", name: str | None = None) -> LinkScore:
    """Run the relation role on every covered item and compare the chosen parent with the gold parents."""
    from tmem.structuring import choose_parent

    result = LinkScore(name or role.backend, linked=len(items))
    started = time.perf_counter()
    for item in items:
        if not item.covered:
            continue
        child = item.child
        question = Question(f"link:{child.id}", child.scope, child.text if query == "child" else "", None, None)
        reply = role.choose_parent(question, child, list(item.candidates), scope)
        decision, _ = choose_parent(child, item.candidates, reply.choices, typed=True)
        result.children += 1
        result.errors += bool(reply.errors)
        if decision.parent_id is None:
            result.roots += 1
        elif decision.parent_id in item.gold_parents:
            result.correct += 1
        else:
            result.wrong_parent += 1
    result.seconds = time.perf_counter() - started
    return result


def previous_message_baseline(items: Sequence[LinkItem]) -> LinkScore:
    out = LinkScore("baseline: previous candidate", linked=len(items))
    for item in items:
        if item.covered:
            out.children += 1
            if item.candidates[-1].id in item.gold_parents:
                out.correct += 1
            else:
                out.wrong_parent += 1
    return out


def evaluate_links(store, corpus: str, roles: Sequence, *, window: float = 30.0, candidates: int = 20,
                   query: str = "child", limit: int | None = None) -> list[LinkScore]:
    """Scores of each relation role (and the baseline), summed over the corpus's scopes."""
    from tmem.scope import Scope

    scopes = store.scopes(corpus)
    totals = [LinkScore(getattr(r, "backend", str(r))) for r in roles] + [LinkScore("baseline: previous candidate")]
    per_scope = -(-limit // len(scopes)) if limit else None
    for name in scopes:
        links = store.gold_links(corpus, name)
        if not links:
            continue
        messages = store.messages(corpus, name)  # log (import) order
        scope = Scope(corpus, name, messages)
        items = link_items(messages, links, window, candidates)
        if per_scope is not None:
            covered = [i for i in items if i.covered][:per_scope]
            items = covered + [i for i in items if not i.covered]
        scores = [score_links(items, r, scope, query) for r in roles] + [previous_message_baseline(items)]
        for total, s in zip(totals, scores):
            for f in ("children", "correct", "roots", "wrong_parent", "linked", "seconds", "errors"):
                setattr(total, f, getattr(total, f) + getattr(s, f))
    return totals


def format_table(corpus: str, scores: Sequence[LinkScore], settings: dict) -> str:
    lines = [f"Parent choice against human reply links on {corpus!r} ({settings})", "",
             f"{'relation role':<46}{'children':>9}{'accuracy':>10}{'wrong root':>12}{'wrong parent':>14}"
             f"{'coverage':>10}{'ms/child':>10}"]
    lines.append("-" * len(lines[-1]))
    for s in scores:
        d = s.as_dict()
        coverage = "-" if d["coverage"] is None else f"{d['coverage']:.3f}"
        lines.append(f"{s.role[:45]:<46}{d['children']:>9}{d['accuracy']:>10.3f}{d['wrong_root']:>12.3f}"
                     f"{d['wrong_parent']:>14.3f}{coverage:>10}{d['ms_per_child']:>10.2f}")
    lines += ["", "coverage = share of children with a gold parent whose gold parent is among their Eq. 4 candidates "
                  "(only those are scored)."]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from tmem.models.factory import build_roles
    from tmem.models.offline import OfflineRelation
    from tmem.models.settings import settings_from_args
    from tmem.store import open_store

    store = open_store(args.db)
    store.corpus_info(args.corpus)
    if not store.counts(args.corpus)["gold_links"]:
        raise ValueError(f"corpus {args.corpus!r} has no gold reply links (import the IRC corpus: python -m tmem "
                         "import irc ../shared/benchmarks/ubuntu-irc-disentanglement --corpus irc)")
    configured = build_roles(settings_from_args(args), store=store).relation
    roles = [OfflineRelation()] + ([configured] if not configured.offline else [])
    started = time.perf_counter()
    scores = evaluate_links(store, args.corpus, roles, window=args.window, candidates=args.candidates,
                            query=args.query, limit=args.limit)
    settings = {"window_minutes": args.window, "candidates": args.candidates,
                "query": args.query, "limit": args.limit}
    if args.json:
        print(json.dumps({"corpus": args.corpus, "settings": settings, "roles": [s.as_dict() for s in scores]}))
    else:
        print(format_table(args.corpus, scores, ", ".join(f"{k}={v}" for k, v in settings.items())))
    print(f"done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0
