"""Budget-matched key-evidence recall: every method compared at the same number of messages.

T-Mem's evidence R'(q) = seeds U discovered evidence has no fixed size (91 messages per question on LoCoMo at
k = 36, against BM25's 36), so recall@k alone mixes "finds the right messages" with "returns more of them". Here,
per question at seed depth k:
- matched: BM25, embedding and the global-evidence control each return exactly as many messages as T-Mem's
  R'(q) holds for that question (n_q; the control returns fewer when its pool of seeds and accepted messages is
  smaller, which its mean message count shows); `tmem` is R'(q) itself.
- curve: at each fixed budget B, BM25 top-B, embedding top-B, T-Mem's R'(q) reranked and cut to B (all of it
  when it holds fewer) and the global control reranked and cut to B: recall against mean messages.
Reranking is the offline evidence-utility score in context (tmem.pipeline.baselines.rerank), the same for T-Mem and the
control, so at equal budget the difference between the two is what temporal locality adds over a topic-wide
embedding search with the same selection.
Vectors: T-Mem's rows use the vectors of its windows' messages only, embedded on demand like the pipeline's (and
kept in DuckDB). The `embedding` and `global-control` rows are dense baselines that rank every message of a scope
(top-B over the scope, a topic-wide search), so they embed each scope whole (`dense_lists`); the output says so.
Results are kept per scope, so a named dev/test split (first half of the corpus's scopes in stored order = dev:
LoCoMo conversations 0-4; the rest = test) is reported beside the total.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from tmem.analysis.chains import gold_chain
from tmem.evaluation.metrics import Recall, question_recall
from tmem.evaluation.recall import progress_due, progress_line
from tmem.models.embedders import embedding_progress
from tmem.pipeline.baselines import rerank
from tmem.pipeline.methods import get_method
from tmem.pipeline.run import open_scope
from tmem.pipeline.stages import Context, Earlier, retrieve_seeds, run_discovery

DEFAULT_BUDGETS = (12, 24, 36, 48, 72, 96, 128)
MATCHED = ("tmem", "bm25@tmem", "embedding@tmem", "global-control@tmem")
CURVE = ("bm25", "embedding", "tmem", "global-control")
_ALL = 10 ** 9  # rerank without a cut: the whole pool, best first (a prefix of it is the rerank to B)
_ZERO = Recall(0, 0, 0, 0)


@dataclass
class BudgetRecall:
    """Per scope: matched[name] and curve[(variant, budget)] as Recall sums (Eq. 10 over units)."""

    k: int
    budgets: tuple[int, ...]
    scopes: list[str] = field(default_factory=list)
    matched: dict[str, dict[str, Recall]] = field(default_factory=dict)
    curve: dict[str, dict[tuple[str, int], Recall]] = field(default_factory=dict)
    whole_scope: dict[str, int] = field(default_factory=dict)  # scope -> messages the dense rows embedded
    why: list[dict] = field(default_factory=list)  # per question: tmem.evaluation.budget_recall.why

    def add(self, scope: str, matched: dict[str, tuple], curve: dict[tuple[str, int], tuple], gold,
            chain=None) -> None:
        if scope not in self.matched:
            self.scopes.append(scope)
            self.matched[scope], self.curve[scope] = {}, {}
        for name, ids in matched.items():
            self.matched[scope][name] = self.matched[scope].get(name, _ZERO) + question_recall(gold, ids, chain)
        for key, ids in curve.items():
            self.curve[scope][key] = self.curve[scope].get(key, _ZERO) + question_recall(gold, ids, chain)

    def splits(self) -> dict[str, list[str]]:
        """'all', and for two or more scopes 'dev' (the first half in stored order) and 'test' (the rest)."""
        out = {"all": list(self.scopes)}
        if len(self.scopes) >= 2:
            half = len(self.scopes) // 2
            out |= {"dev": self.scopes[:half], "test": self.scopes[half:]}
        return out

    def total(self, scopes) -> tuple[dict[str, Recall], dict[tuple[str, int], Recall]]:
        matched: dict[str, Recall] = {n: _ZERO for n in MATCHED}
        curve: dict[tuple[str, int], Recall] = {(v, b): _ZERO for v in CURVE for b in self.budgets}
        for s in scopes:
            for n, r in self.matched.get(s, {}).items():
                matched[n] = matched[n] + r
            for key, r in self.curve.get(s, {}).items():
                curve[key] = curve[key] + r
        return matched, curve

    def plain(self, scopes=None) -> dict[str, Recall]:
        """recall@k of the plain recall variants, read off this pass (k must be one of the budgets): bm25,
        embedding = their top-k; tmem = R'(q); tmem-reranked, global-control = the first k of their best-first
        orders (the rerank to k). One pass then gives the plain table and the budget-matched one."""
        matched, curve = self.total(self.scopes if scopes is None else scopes)
        k = self.k
        if k not in self.budgets:
            return {}
        return {"bm25": curve[("bm25", k)], "embedding": curve[("embedding", k)], "tmem": matched["tmem"],
                "tmem-reranked": curve[("tmem", k)], "global-control": curve[("global-control", k)]}

    def to_json(self) -> dict:
        out = {"k": self.k, "budgets": list(self.budgets), "splits": {},
               "whole_scope_vectors": {"messages": sum(self.whole_scope.values()),
                                       "why": "the embedding and global-control rows rank every message of a scope"}}
        for split, scopes in self.splits().items():
            matched, curve = self.total(scopes)
            out["splits"][split] = {
                "scopes": scopes,
                "plain": {n: r.as_dict() for n, r in self.plain(scopes).items()},
                "matched": {n: r.as_dict() for n, r in matched.items()},
                "curve": {v: [{"budget": b, **curve[(v, b)].as_dict()} for b in self.budgets] for v in CURVE}}
        out["why"] = self.why
        return out


def question_budget_sets(question, scope, k: int, budgets, ctx_for, explain: dict | None = None) -> tuple[dict, dict]:
    """(matched {name: ids}, curve {(variant, budget): ids}) for one question at seed depth k; `explain`, when
    given, receives T-Mem's clusters and windows (for `why`)."""
    seeds = retrieve_seeds(question, scope, ctx_for("bm25", k), Earlier())
    tmem_ctx = ctx_for("tmem", k)
    found = run_discovery(question, scope, tmem_ctx, Earlier.of(seeds)).result
    evidence = found.evidence_ids
    n = len(evidence)
    embedder = tmem_ctx.roles.embedder
    query_vector = embedder.embed([question.text], kind="query")[0]
    tmem_order = rerank(question, evidence, scope, scope.vector_rows(embedder), query_vector, _ALL,
                        found.selections)
    depth = max(max(budgets), n, 1)
    bm25 = retrieve_seeds(question, scope, ctx_for("bm25", depth), Earlier()).result.evidence_ids
    dense, control = dense_lists(question, scope, k, depth, Earlier.of(seeds), ctx_for)
    matched = {"tmem": evidence, "bm25@tmem": bm25[:n], "embedding@tmem": dense[:n],
               "global-control@tmem": control[:n]}
    lists = {"bm25": bm25, "embedding": dense, "tmem": tmem_order, "global-control": control}
    curve = {(v, b): lists[v][:b] for v in CURVE for b in budgets}
    if explain is not None:
        explain.update(clusters=found.clusters, windows=found.windows)
    return matched, curve


def why(question, gold, matched: dict, explain: dict, group: str) -> dict:
    """Where T-Mem's windows and the global ranking differ for one question at T-Mem's own budget: the gold units
    only R'(q) recovers, those only the global control's first n recovers, and the rate each accepted window beat."""
    mine, theirs = set(matched["tmem"]), set(matched["global-control@tmem"])
    found = lambda ids, unit: any(i in ids for i in unit)  # noqa: E731 — a unit is recovered by any of its ids
    windows = {w.cluster_id: w for w in explain.get("windows", ())}
    # ids only, no question text: a recall file may be committed, and benchmark text is not copied into the repo
    return {"question": question.id, "group": group, "units": len(gold.evidence),
            "messages": len(mine),
            "windows_only": [u[0] for u in gold.evidence if found(mine, u) and not found(theirs, u)],
            "global_only": [u[0] for u in gold.evidence if found(theirs, u) and not found(mine, u)],
            "both": sum(found(mine, u) and found(theirs, u) for u in gold.evidence),
            # one row per accepted cluster, kept short (a file holds every question): where, anchors, density,
            # the rate it beat (None: the fixed mu), the background rate (None: no background test), window size
            "unit": next((c.unit for c in explain.get("clusters", ())), "hour"),
            "windows": [[c.topic or c.channel, len(c.member_ids), round(c.density, 4),
                         round(c.threshold, 4) if c.threshold is not None else None,
                         round(c.background, 6) if c.background is not None else None,
                         windows[c.cluster_id].n_messages if c.cluster_id in windows else 0]
                        for c in explain.get("clusters", ()) if c.accepted],
            "rejected_clusters": sum(not c.accepted for c in explain.get("clusters", ()))}


def dense_lists(question, scope, k: int, depth: int, seeded: Earlier, ctx_for) -> tuple[tuple, tuple]:
    """(embedding top-`depth`, the global control's best-first evidence): the two rows that rank every message of
    the scope, so the first call for a scope embeds it whole (T-Mem's rows never do)."""
    dense = retrieve_seeds(question, scope, ctx_for("embedding", depth), Earlier()).result.evidence_ids
    control = run_discovery(question, scope, ctx_for("global-control-all", k), seeded).result.evidence_ids
    return dense, control


def budget_recall(store, corpus: str, k: int, budgets, roles, items, *, embedding_text: str = "metadata",
                  log=None, variant: str = "full", group_of=None) -> BudgetRecall:
    """BudgetRecall over `items` ((question, gold) pairs, recall-eligible, from tmem.evaluation.recall). `variant`:
    the configuration preset (tmem.config.VARIANTS) of the `tmem` rows; the controls keep the paper's defaults.
    `group_of(question)`: what the dev/test split halves (default: the question's scope; an interleaved corpus
    splits by source conversation)."""
    budgets = tuple(sorted(dict.fromkeys(int(b) for b in budgets)))
    contexts: dict[tuple[str, int], Context] = {}

    def ctx_for(name: str, depth: int) -> Context:
        if (name, depth) not in contexts:
            if name == "global-control-all":
                method = replace(get_method("global-control", depth), final_k=_ALL)
            else:
                method = get_method({"tmem": variant}.get(name, name), depth, embedding_text)
            contexts[(name, depth)] = Context(method, roles, store)
        return contexts[(name, depth)]

    result = BudgetRecall(k, budgets)
    started, done = time.perf_counter(), 0
    for name in dict.fromkeys(q.scope for q, _ in items):
        scope = open_scope(store, corpus, name, embedding_progress(log) if log else None)
        result.whole_scope[name] = len(scope)  # embedded whole by the dense rows, on their first question
        edges = store.gold_edges(corpus, name)
        for q, gold in ((q, g) for q, g in items if q.scope == name):
            explain: dict = {}
            matched, curve = question_budget_sets(q, scope, k, budgets, ctx_for, explain)
            group = group_of(q) if group_of else name
            result.add(group, matched, curve, gold, gold_chain(gold, edges))
            result.why.append(why(q, gold, matched, explain, group))
            done += 1
            if log and progress_due(done, len(items)):
                log(progress_line(done, len(items), started, f"questions, budget-matched k={k}"))
    return result


def vectors_note(result: BudgetRecall) -> str:
    """Why this comparison embeds whole scopes when the pipeline does not."""
    total = sum(result.whole_scope.values())
    return (f"Vectors: the embedding and global-control rows rank every message of a scope, so each scope was "
            f"embedded whole ({total:,} messages in {len(result.whole_scope)} scope(s), kept in DuckDB for later "
            "runs); T-Mem's rows use only its windows' vectors, embedded on demand as in `ask` and `run`.")


def format_budget(result: BudgetRecall) -> str:
    """The matched table and the curve, per split (all / dev / test), and why the scopes were embedded whole."""
    lines = ["", vectors_note(result)] if result.whole_scope else []
    for split, scopes in result.splits().items():
        matched, curve = result.total(scopes)
        lines += ["", f"Budget-matched at k = {result.k}, split {split} ({len(scopes)} scope(s)): each method at "
                      "T-Mem's own message count per question"]
        lines += [f"  {n:<22}{r.recall:>8.4f}{r.mean_messages:>11.1f} msgs" for n, r in matched.items()]
        lines += ["  curve (recall at B messages; mean messages where fewer): "
                  + "  ".join(f"B={b}" for b in result.budgets)]
        for v in CURVE:
            cells = [curve[(v, b)] for b in result.budgets]
            lines.append(f"  {v:<16}" + "  ".join(f"{c.recall:.3f}" + (f"({c.mean_messages:.0f})"
                                                                         if c.mean_messages < b - 0.5 else "")
                                                 for c, b in zip(cells, result.budgets)))
    return "\n".join(lines)
