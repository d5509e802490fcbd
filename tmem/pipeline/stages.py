"""The pipeline's stages (paper Fig. 1), callable one at a time, so a batch run can finish a stage for every question
before the next stage starts (App. D.1) and `tmem.pipeline.run.run_question` can run them in a row for one question.

Each stage function takes the question, its scope, a `Context` (the method, the roles, a gold source for the judge)
and the typed results of the earlier stages (`Earlier`), and returns a `StageOutput`: its own typed result (`Seeds`,
`Discovered`, `Structured`, `Compressed`, `Answered`, `Judged`: the Trace fields it adds), the `StageTrace` (time,
counts, usage, backend, errors) and the record extras (prompt hashes, selected ids); tmem.pipeline.stage_results defines
them. The methods beside T-Mem (tmem.pipeline.methods; embedding seeds, the global-evidence control, reranking to k:
tmem.pipeline.baselines) are branches of the same stages. The functions are verbs (`retrieve_seeds`, `run_discovery`,
`structure_evidence`, `compress_context`, `answer_question`, `judge_answers`); `STAGE_FUNCTIONS` maps the stage names of
the records to them. `assemble` folds the results of all stages back into one `Trace`.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tmem.baselines.oracle import gold_relation
from tmem.baselines.stage import answer_recalled, recall_memory
from tmem.limits import cap_answer
from tmem.models.base import AnswerEvidence, Roles
from tmem.models.llm.concurrency import fan_out, role_workers
from tmem.models.relation import resolve_relation
from tmem.pipeline.baselines import embedding_anchors, global_evidence, message_vectors, rerank
from tmem.pipeline.compression import budget_cut, compress_forest, retained_text
from tmem.pipeline.discovery import discover_evidence
from tmem.pipeline.linearize import flat_lines, forest_lines, linearize_forest, order_flat, serialize_flat
from tmem.pipeline.masking import (
    hidden_from_answer,
    hidden_from_relation,
    hidden_from_utility,
    hidden_note,
    mask,
    masked_role,
)
from tmem.pipeline.methods import Method
from tmem.pipeline.retrieval import query_tokens, retrieve_anchors
from tmem.pipeline.stage_results import (  # noqa: F401  (the stages' vocabulary, re-exported for their callers)
    Answered,
    Compressed,
    Discovered,
    Earlier,
    Judged,
    Recalled,
    Seeds,
    StageOutput,
    StageResult,
    Structured,
    decode_result,
    decode_stage,
)
from tmem.pipeline.structuring import build_forest, link_parents
from tmem.prompts import NAMES, answer_prompt, judge_prompt, prompt_hash
from tmem.types import Answer, Gold, Question, StageError, StageTrace, Trace, Usage, Verdict

STAGES = ("seed_retrieval", "discovery", "structuring", "compression", "answer", "judge", "memory")
STAGE_PROMPTS = {"discovery": ("evidence_utility",), "structuring": ("relation",),
                 "answer": ("answer_flat_system", "answer_forest_system", "answer_untyped_system", "answer_user"),
                 "judge": ("judge_system", "judge_user")}


def plan(method: Method) -> tuple[str, ...]:
    """The stages a method runs, in order (a memory system of App. B: its own context, then answer and judge)."""
    if method.system:
        return ("memory", "answer", "judge")
    stages = ["seed_retrieval"]
    if method.discovery == "global" or (method.discovery == "temporal" and method.config.discovery.enabled):
        stages.append("discovery")
    if method.config.structuring.enabled:
        stages += ["structuring", "compression"]
    return tuple(stages + ["answer", "judge"])


class _Timer:
    def __init__(self, name: str, backend: str, offline: bool):
        self.name, self.backend, self.offline = name, backend, offline
        self.counts: dict[str, float] = {}
        self.usage = Usage(source="offline" if offline else "none")
        self.errors: list[StageError] = []
        self.start = time.perf_counter()

    def done(self) -> StageTrace:
        return StageTrace(self.name, time.perf_counter() - self.start, self.counts, self.usage, self.backend,
                          self.offline, tuple(self.errors))


@dataclass
class Context:
    """What every stage of one method needs besides the question: roles, the store (vectors), a gold source."""

    method: Method
    roles: Roles
    store: Any = None  # persists expanded-text vectors for the embedding baseline
    gold: Callable[[Question], Gold | None] | None = None  # only the judge stage calls it
    progress: Callable[[str, float], None] | None = None  # (stage name, fraction done), for the app


# ------------------------------------------------------------------------------------------------ stages
def retrieve_seeds(question: Question, scope, ctx: Context, earlier: Earlier) -> StageOutput:
    method, rc = ctx.method, ctx.method.config.retrieval
    if method.seeds == "embedding":
        embedder = ctx.roles.embedder
        # a dense baseline: it ranks every message, so it embeds the whole scope (T-Mem embeds window messages)
        t = _Timer("seed_retrieval", f"embedding top-k; {embedder.name}; whole-scope vectors", False)
        vectors = message_vectors(scope, embedder, method.embedding_text, ctx.store)
        anchors = embedding_anchors(question, scope, vectors, embedder.embed([question.text], kind="query")[0],
                                    rc.k)
        query = question.text
    else:
        t = _Timer("seed_retrieval", "bm25", False)
        index = scope.bm25(rc.metadata_fields, rc.k1, rc.b, rc.epsilon)
        anchors = retrieve_anchors(question, scope.messages, index, rc)
        query = " ".join(query_tokens(question, rc))
    t.counts = {"anchors": len(anchors), "scope_messages": len(scope)}
    ids = tuple(a.message_id for a in anchors)
    return StageOutput(Seeds(anchors, ids, query), t.done(), ids, extras={"query": query})


def run_discovery(question: Question, scope, ctx: Context, earlier: Earlier) -> StageOutput:
    method, roles = ctx.method, ctx.roles
    hidden = hidden_from_utility(method.config)  # an ablation that removes metadata hides it from the role too
    utility, anchors = masked_role(roles.evidence_utility, hidden), earlier.seeds.anchors
    dense = "; whole-scope vectors" if method.discovery == "global" else ""  # the control ranks a whole topic
    t = _Timer("discovery", f"{utility.backend}; embedder {roles.embedder.name}{dense}{hidden_note(hidden)}",
               utility.offline)
    if method.discovery == "global":
        found = global_evidence(question, anchors, scope, method.config, utility, roles.embedder, method.final_k)
    else:
        report = (lambda i, n: ctx.progress("discovery", i / n)) if ctx.progress else None  # per call
        found = discover_evidence(question, anchors, scope, method.config.discovery, utility, roles.embedder,
                                  progress=report)
    evidence = found.evidence_ids
    if method.final_k and method.discovery != "global":
        vectors = scope.vector_rows(roles.embedder)  # the evidence and its neighbours only, on demand
        evidence = rerank(question, evidence, scope, vectors, roles.embedder.embed([question.text], kind="query")[0],
                          method.final_k, found.selections)
    t.usage, t.errors = found.usage, list(found.errors)
    t.counts = {"clusters": len(found.clusters), "clusters_accepted": sum(c.accepted for c in found.clusters),
                "windows": len(found.windows), "candidates": sum(len(w.candidates) for w in found.windows),
                "selected": len(found.evidence_ids) - len(anchors), "evidence": len(evidence)}
    if method.final_k:
        t.counts["reranked_to"] = method.final_k
    out = Discovered(found.clusters, found.windows, found.selections, evidence)
    return StageOutput(out, t.done(), evidence, {n: prompt_hash(n) for n in STAGE_PROMPTS["discovery"]})


def structure_evidence(question: Question, scope, ctx: Context, earlier: Earlier) -> StageOutput:
    hidden = hidden_from_relation(ctx.method.config)
    # the run's relation role (tmem.models.relation.resolve_relation: the configured rule), then the ablation's mask
    role = masked_role(gold_relation(ctx.store, scope) if ctx.method.relation == "gold" else
                       resolve_relation(ctx.roles.relation, ctx.method.config.structuring, ctx.roles.embedder), hidden)
    evidence = [scope.by_id[i] for i in earlier.evidence_ids]
    t = _Timer("structuring", role.backend + hidden_note(hidden), role.offline)
    report = (lambda i, n: ctx.progress("structuring", i / n)) if ctx.progress else None
    linked = link_parents(question, evidence, role, scope, ctx.method.config.structuring, progress=report)
    nodes = linearize_forest(build_forest(evidence, linked.edges), {m.id: m for m in evidence})
    t.usage, t.errors = linked.usage, list(linked.errors)
    t.counts = {"nodes": len(nodes), "trees": len({n.tree for n in nodes}),
                "update_edges": sum(e.relation == "UPDATE" for e in linked.edges),
                "expand_edges": sum(e.relation == "EXPAND" for e in linked.edges),
                "related_edges": sum(e.relation == "RELATED" for e in linked.edges)}
    return StageOutput(Structured(linked.decisions, linked.edges, nodes), t.done(),
                       tuple(n.message_id for n in nodes), {n: prompt_hash(n) for n in STAGE_PROMPTS["structuring"]})


def compress_context(question: Question, scope, ctx: Context, earlier: Earlier) -> StageOutput:
    cc, roles = ctx.method.config.compression, ctx.roles
    nodes = earlier.nodes
    by_id = {m.id: m for m in mask([scope.by_id[n.message_id] for n in nodes], hidden_from_answer(ctx.method.config))}
    count, budget = roles.tokens.count, cc.budget_tokens
    t = _Timer("compression", f"{cc.mode}; {roles.tokens.name}", True)
    lines = lambda texts: forest_lines(nodes, by_id, texts)  # noqa: E731
    render = lambda texts: "\n".join(line for _, line in lines(texts))  # noqa: E731
    if cc.mode == "compress":
        done = compress_forest(nodes, question.text, scope.idf, count, render, budget)
        context, after, cuts = render(done.texts), done.tokens_after, ()
        if not done.budget_met:
            # Eq. 16 does not hold: what compression may not omit exceeds B. The answer model still gets at most
            # B tokens, cut like the flat and no-compression contexts, so every variant has the same budget; the
            # messages the cut shortened or removed are recorded (Cut), and the evidence verdict reads them.
            context, cuts = budget_cut(lines(done.texts), count, budget, "forest",
                                       f"protected spans and one span per node exceed B = {budget} tokens: the "
                                       "compressed forest was cut at B")
            after = count(context)
            t.errors.append(StageError("compression", f"protected spans and one span per node alone exceed B = "
                                       f"{budget} tokens ({done.tokens_after})",
                                       f"context cut at B tokens ({after}; {len(cuts)} message(s) cut)"))
        out = Compressed(done.tokens_before, after, context, done.spans, done.budget_met, cuts)
    else:
        full = render({})
        context, cuts = budget_cut(lines({}), count, budget, "forest",
                                   f"compression.mode = truncate: the forest was cut at B = {budget} tokens")
        out = Compressed(count(full), count(context), context, cuts=cuts)
    t.counts = {"tokens_before": out.tokens_before_compression, "tokens_after": out.tokens_after_compression,
                "spans_omitted": sum(not s.kept for s in out.spans or ()), "budget": budget,
                "messages_cut": len(out.cuts)}
    return StageOutput(out, t.done(), tuple(n.message_id for n in nodes))


def answer_question(question: Question, scope, ctx: Context, earlier: Earlier) -> StageOutput:
    if earlier.latest(Recalled) is not None:  # a memory system's context (tmem.baselines)
        return answer_recalled(question, scope, ctx, earlier.latest(Recalled))
    config, roles = ctx.method.config, ctx.roles
    # Rank order (App. I) or chronological (Sec. 5.4): answer.flat_order; the forest has its own order (Eq. 8).
    evidence = order_flat(mask([scope.by_id[i] for i in earlier.evidence_ids], hidden_from_answer(config)),
                          config.answer.flat_order)
    count, budget = roles.tokens.count, config.compression.budget_tokens
    spans: dict[str, list] = {}
    for s in earlier.spans:
        spans.setdefault(s.message_id, []).append(s)
    texts = {mid: retained_text(rows) for mid, rows in spans.items() if not all(s.kept for s in rows)}
    # The flat list gets the forest's budget rule (the same spans omitted by Eq. 6-7, then the cut at B) unless
    # answer.flat_budget = truncate (the flat list only cut at B: anchors first, so recovered messages go first).
    same_rule = config.answer.flat_budget == "same"
    flat_context, flat_cuts = budget_cut(flat_lines(evidence, texts if same_rule else None), count, budget, "flat",
                                         f"the flat list was cut at B = {budget} tokens"
                                         + (" (after the forest's omitted spans)" if same_rule and texts else ""))
    forest_cuts = earlier.latest(Compressed).cuts if earlier.latest(Compressed) else ()
    cut = {(c.context, c.message_id) for c in (*(forest_cuts or ()), *flat_cuts)}
    own: dict[str, Any] = {}  # without structuring, the flat context is the context (no compression stage ran)
    if not config.structuring.enabled:
        own = {"context": flat_context, "tokens_before_compression": count(serialize_flat(evidence)),
               "tokens_after_compression": count(flat_context)}
    nodes = earlier.nodes
    by_id = {m.id: m for m in evidence}
    parents = {e.child_id: (e.parent_id, e.relation) for e in earlier.edges}
    presentations = [config.answer.presentation if config.structuring.enabled else "flat"]
    if presentations[0] == "forest" and config.answer.also_flat:
        presentations.append("flat")
    role = roles.answer
    t = _Timer("answer", role.backend, role.offline)
    answers, hashes = [], {n: prompt_hash(n) for n in STAGE_PROMPTS["answer"]}
    calls = []
    for presentation in presentations:
        forest = presentation == "forest"
        passages = (earlier.context or own.get("context", "")) if forest else flat_context
        prompt = answer_prompt(presentation, question.asking_user, question.text, passages,
                               config.structuring.typed)
        # the messages of its context that the cut at B left whole (what a language model would read in full)
        ordered = [m for m in ([by_id[n.message_id] for n in nodes] if forest else evidence)
                   if (presentation, m.id) not in cut]
        calls.append((presentation, passages, prompt, AnswerEvidence(tuple(ordered), parents if forest else {},
                                                                     texts if forest or same_rule else {})))
    results = fan_out(lambda c: role.answer(question, c[2], c[3], scope), calls, role_workers(role))
    for (presentation, passages, prompt, _), result in zip(calls, results):  # flat and forest answers together
        t.usage, t.errors = t.usage + result.usage, t.errors + list(result.errors)
        answers.append(Answer(presentation, cap_answer(result.text)[0], role.backend, role.offline, prompt.hash,
                              count(passages), result.reason))  # cut with a visible mark past MAX_ANSWER_CHARS
        hashes[f"prompt:{presentation}"] = prompt.hash
    t.counts = {"answers": len(answers)}
    shown = tuple(dict.fromkeys([n.message_id for n in nodes] + [m.id for m in evidence]))
    return StageOutput(Answered(flat_context, tuple(answers), cuts=(*(forest_cuts or ()), *flat_cuts), **own),
                       t.done(), shown, hashes)


def judge_answers(question: Question, scope, ctx: Context, earlier: Earlier) -> StageOutput:
    role = ctx.roles.judge
    t = _Timer("judge", role.backend, role.offline)
    gold = ctx.gold(question) if ctx.gold else None
    verdicts = []
    if gold is not None and gold.answer is not None:
        answers = earlier.answers
        results = fan_out(lambda a: role.judge(question, gold.answer, a.text,
                                               judge_prompt(question.text, gold.answer, a.text)),
                          answers, role_workers(role))  # the verdicts of both answers together
        for a, result in zip(answers, results):
            t.usage, t.errors = t.usage + result.usage, t.errors + list(result.errors)
            verdicts.append(Verdict(a.presentation, result.correct, result.raw, role.backend, role.offline))
    t.counts = {"correct": sum(v.correct for v in verdicts)}
    return StageOutput(Judged(tuple(verdicts)), t.done(), (),
                       {n: prompt_hash(n) for n in STAGE_PROMPTS["judge"]},
                       extras={} if verdicts else {"note": "no gold answer: nothing to judge"})


STAGE_FUNCTIONS: dict[str, Callable[..., StageOutput]] = {
    "seed_retrieval": retrieve_seeds, "discovery": run_discovery, "structuring": structure_evidence,
    "compression": compress_context, "answer": answer_question, "judge": judge_answers, "memory": recall_memory}


def assemble(question: Question, ctx: Context, corpus: str, outputs: Mapping[str, StageOutput | dict]) -> Trace:
    """One Trace from the stage outputs of a question (StageOutput objects or their record form), in plan order;
    the stage traces are kept only for real pipeline stages (as `run_question` records them)."""
    earlier, stages = Earlier(), []
    for name in plan(ctx.method):
        out = outputs.get(name)
        if out is None:
            continue
        if isinstance(out, dict):
            result, stage = decode_result(name, out["fields"]), decode_stage(out["stage"])
        else:
            result, stage = out.result, out.trace
        earlier = earlier.then(result)
        if not (isinstance(result, Judged) and not result.verdicts):
            stages.append(stage)
    return Trace(question=question, variant=ctx.method.name, config_hash=ctx.method.hash, corpus=corpus,
                 prompt_hashes={name: prompt_hash(name) for name in NAMES}, token_counter=ctx.roles.tokens.name,
                 embedder=ctx.roles.embedder.name, stages=tuple(stages),
                 config=json.loads(json.dumps(ctx.method.config.to_dict(), default=list)), **earlier.trace_fields())


def run_all(question: Question, scope, ctx: Context, corpus: str) -> Trace:
    """Every stage of the method for one question, in order (the stage-wise runner does the same question by
    question within each stage)."""
    earlier, outputs = Earlier(), {}
    for name in plan(ctx.method):
        if ctx.progress:
            ctx.progress(name, 0.0)
        outputs[name] = out = STAGE_FUNCTIONS[name](question, scope, ctx, earlier)
        earlier = earlier.then(out)
        if ctx.progress:
            ctx.progress(name, 1.0)
    return assemble(question, ctx, corpus, outputs)
