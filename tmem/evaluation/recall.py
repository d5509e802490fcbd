"""Key-evidence recall per retrieval variant and depth k (paper Exp-2, Sec. 5.3; App. A.4
Eq. 9-10; App. E.2). Needs no LLM: seeds, discovery and the controls run with the offline default roles.

Variants (each a set of retrieved message ids per question):
  bm25            metadata-expanded BM25 top-k (the seeds R_k(q))
  embedding       cosine top-k over message vectors (metadata-expanded text by default)
  tmem            R'(q) = seeds U discovered evidence (Sec. 4.2); structuring and linearization are not involved
  tmem-reranked   R'(q) reranked to exactly k messages (App. E.2)
  global-control  same seeds and topics; embedding top-100n of the whole topic, same selection, reranked to k
The stages are the batch runner's (tmem.pipeline.stages), so a recall figure and a batch run agree. The command
`python -m tmem recall` is tmem/commands/evaluate/recall.py.
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from tmem.analysis.chains import gold_chain
from tmem.corpora.interleave import FORMAT, question_group
from tmem.evaluation.metrics import Recall, question_recall, recall_eligible
from tmem.models.embedders import embedding_progress
from tmem.models.factory import build_roles
from tmem.pipeline.baselines import rerank, rerank_rows
from tmem.pipeline.discovery import window_rows
from tmem.pipeline.methods import get_method
from tmem.pipeline.run import open_scope
from tmem.pipeline.stages import Context, Earlier, retrieve_seeds, run_discovery

VARIANTS = ("bm25", "embedding", "tmem", "tmem-reranked", "global-control")
_METHOD = {"bm25": "bm25", "embedding": "embedding", "tmem": "full", "tmem-reranked": "tmem-reranked",
           "global-control": "global-control"}


class _QueryMemo:
    """Keeps query vectors in memory for the run (each question is embedded once, then asked again per k and
    variant); passages pass through. Same name as the wrapped embedder, so vector caches are shared."""

    def __init__(self, inner):
        self.inner, self.name, self.offline = inner, inner.name, inner.offline
        self.stored = getattr(inner, "stored", True)  # the lexical fallback's vectors stay out of the store
        self._memo: dict[str, object] = {}

    def embed(self, texts, kind: str = "passage", **kwargs):
        if kind != "query":
            return self.inner.embed(texts, kind, **kwargs)
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            self._memo.update(zip(missing, self.inner.embed(missing, kind="query")))
        return np.vstack([self._memo[t] for t in texts]) if texts else self.inner.embed(texts, kind)


def retrieved_sets(question, scope, k: int, variants, ctx_for) -> dict[str, tuple[str, ...]]:
    """{variant: retrieved ids} for one question at depth k (`ctx_for(method name, k)` gives a stage Context)."""
    out: dict[str, tuple[str, ...]] = {}
    seeds = None
    if {"bm25", "tmem", "tmem-reranked", "global-control"} & set(variants):
        seeds = retrieve_seeds(question, scope, ctx_for("bm25", k), {})
        out["bm25"] = seeds.result.evidence_ids
    if "embedding" in variants:
        out["embedding"] = retrieve_seeds(question, scope, ctx_for("embedding", k), {}).result.evidence_ids
    if {"tmem", "tmem-reranked"} & set(variants):
        ctx = ctx_for("tmem", k)
        found = run_discovery(question, scope, ctx, Earlier.of(seeds))
        out["tmem"] = found.result.evidence_ids
        if "tmem-reranked" in variants:
            embedder = ctx.roles.embedder
            out["tmem-reranked"] = rerank(question, out["tmem"], scope, scope.vector_rows(embedder),
                                          embedder.embed([question.text], kind="query")[0], k,
                                          found.result.selections)
    if "global-control" in variants:
        out["global-control"] = run_discovery(question, scope, ctx_for("global-control", k), Earlier.of(seeds)) \
            .result.evidence_ids
    return {v: out[v] for v in variants}


def embed_windows(batch, scope, ks, variants, ctx_for, embedder) -> None:
    """Embed, in one call before the questions run, the rows the batch's T-Mem variants will read: the windows
    discovery ranks and, for tmem-reranked, the seeds, window messages and their conversational neighbours (a
    superset of what the rerank reads). Asked question by question, they were embedded a few dozen at a time, a
    quarter of the tokens padding, and written one upsert per question (LoCoMo, every 8th question, first run:
    147 embedding calls). At most the scope's row cache of them, as links' `embed_once`."""
    if not {"tmem", "tmem-reranked"} & set(variants):
        return
    needed: set[int] = set()
    for question, _ in batch:
        for k in ks:
            anchors = retrieve_seeds(question, scope, ctx_for("bm25", k), {}).result.anchors
            rows = window_rows(anchors, scope, ctx_for("tmem", k).method.config.discovery)
            if "tmem-reranked" in variants:
                rows = rerank_rows(scope, [scope.position[a.message_id] for a in anchors] + rows)[1]
            needed.update(rows)
    if needed and len(needed) <= scope.row_cache:
        scope.vectors_at(embedder, sorted(needed))


def memo_roles(roles):
    """`roles` with the query-vector memo around the embedder (once)."""
    return roles if isinstance(roles.embedder, _QueryMemo) else replace(roles, embedder=_QueryMemo(roles.embedder))


def eligible_items(store, corpus: str, types=None, limit=None) -> list:
    """(question, gold) pairs counted in recall (Eq. 10), in stored order; `types` a comma-separated filter."""
    wanted = {t.strip() for t in types.split(",")} if types else None
    items = []
    golds = store.golds(corpus)  # one read, not two queries per question
    for q in store.questions(corpus):
        if wanted is not None and (q.type or "") not in wanted:
            continue
        gold = golds.get((q.scope, q.id))
        if recall_eligible(q, gold):
            items.append((q, gold))
    return items[:limit] if limit is not None else items


def question_groups(store, corpus: str):
    """What a dev/test split halves for this corpus: None (scopes) or, for an interleaved corpus, each question's
    source conversation (tmem.corpora.interleave)."""
    return (lambda q: question_group(q.id)) if store.corpus_info(corpus)["format"] == FORMAT else None


def split_items(items: list, split: str, group_of=None, every: int = 1) -> list:
    """The items of one split ('all', 'dev' = the first half of the groups in stored order, 'test' = the rest),
    then every `every`-th of them (a bounded, deterministic sample for tuning on dev)."""
    group_of = group_of or (lambda q: q.scope)
    groups = list(dict.fromkeys(group_of(q) for q, _ in items))
    half = len(groups) // 2
    wanted = {"all": set(groups), "dev": set(groups[:half]), "test": set(groups[half:])}[split]
    return [item for item in items if group_of(item[0]) in wanted][::max(1, every)]


def evidence_recall(store, corpus: str, ks, variants=VARIANTS, roles=None, *, types=None, limit=None,
                    embedding_text: str = "metadata", log=None, every: int = 1,
                    per_question: dict | None = None) -> dict[int, dict]:
    """{k: {variant: Recall}} over the corpus's recall-eligible questions (Eq. 10): the first `limit` of them, then
    every `every`-th (`split_items`: in stored order, so each conversation gives its share). `per_question`, when
    given, receives {(k, variant): [(recovered, units) per question]} for `recall_interval`."""
    roles = memo_roles(roles or build_roles(store=store))
    items = split_items(eligible_items(store, corpus, types, limit), "all", None, every)
    contexts: dict[tuple[str, int], Context] = {}

    def ctx_for(name: str, k: int) -> Context:
        if (name, k) not in contexts:
            contexts[(name, k)] = Context(get_method(_METHOD[name], k, embedding_text), roles, store)
        return contexts[(name, k)]

    totals = {k: {v: Recall(0, 0, 0, 0) for v in variants} for k in ks}
    scopes = list(dict.fromkeys(q.scope for q, _ in items))
    started = time.perf_counter()
    done = 0
    for name in scopes:
        scope = open_scope(store, corpus, name, embedding_progress(log) if log else None)
        batch = [(q, g) for q, g in items if q.scope == name]
        if "global-control" in variants or ("embedding" in variants and embedding_text == "plain"):
            # a dense baseline ranks the whole scope's plain-text vectors: embed them once, before timing questions
            scope.vectors(roles.embedder)
        else:
            embed_windows(batch, scope, ks, variants, ctx_for, roles.embedder)
        roles.embedder.embed([q.text for q, _ in batch], kind="query")  # fills the query-vector cache at once
        edges = store.gold_edges(corpus, name)
        for q, gold in batch:
            chain = gold_chain(gold, edges)  # Complete Chain Recall beside Eq. 10 (Exp-5)
            for k in ks:
                for v, ids in retrieved_sets(q, scope, k, variants, ctx_for).items():
                    one = question_recall(gold, ids, chain)
                    totals[k][v] = totals[k][v] + one
                    if per_question is not None:
                        per_question.setdefault((k, v), []).append((one.recovered, one.units))
            done += 1
            if log and progress_due(done, len(items)):
                log(progress_line(done, len(items), started))
    return totals


def progress_due(done: int, total: int) -> bool:
    """About every 5 % of the work, and at its end."""
    return done == total or done % max(1, total // 20) == 0


def progress_line(done: int, total: int, started: float, what: str = "questions") -> str:
    """'  120/1536 questions (41 s, ~484 s left)': the time left at the pace so far, so a long run on a busy
    machine says when it will finish (and whether a sample, --every / --limit, is the better choice)."""
    elapsed = time.perf_counter() - started
    left = f", ~{elapsed / done * (total - done):.0f} s left" if 0 < done < total else ""
    return f"  {done}/{total} {what} ({elapsed:.0f} s{left})"


def recall_interval(parts, population: int | None = None, z: float = 1.96) -> tuple[float, float]:
    """95 % interval of a micro recall, sum(recovered) / sum(units), over a sample of clusters (questions, or
    conversations): the ratio estimator's linearised variance, the cluster being what was sampled (a question's
    units are not independent), with the finite-population correction when the `population` size is known
    (a sample of every question has no sampling error). `parts`: (recovered, units) per cluster."""
    parts = [(r, u) for r, u in parts if u]
    n, units = len(parts), sum(u for _, u in parts)
    if n < 2:
        return float("nan"), float("nan")
    ratio = sum(r for r, _ in parts) / units
    variance = n / (n - 1) * sum((r - ratio * u) ** 2 for r, u in parts) / units ** 2
    if population:
        variance *= max(0.0, 1 - n / population)
    half = z * variance ** 0.5
    return max(0.0, ratio - half), min(1.0, ratio + half)


def to_json(corpus: str, k: int, results: dict, roles: dict[str, str] | None = None) -> dict:
    """`roles` names the embedder and evidence-utility role used, so a fallback embedder shows in the output."""
    out = {"corpus": corpus, "k": k, "variants": {v: r.as_dict() for v, r in results.items()}}
    return out | ({"roles": roles} if roles else {})
