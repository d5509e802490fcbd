"""`run_question`: one question through T-Mem, stage by stage (paper Fig. 1), returning a complete `Trace`.

Stages: seed retrieval -> temporal evidence discovery -> temporal memory structuring -> compression ->
linearization and answer (forest and, for comparison, flat over the same evidence) -> judge (only when a gold
answer is given, which never reaches any earlier stage). Every stage records its timing, counts, token usage,
backend, and errors with the fallback taken.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tmem.compression import compress_forest, truncate_to_budget
from tmem.config import TMemConfig, config_hash
from tmem.discovery import discover_evidence
from tmem.linearize import linearize_forest, serialize_flat, serialize_forest
from tmem.models.base import AnswerEvidence, Roles
from tmem.prompts import NAMES, answer_prompt, judge_prompt, prompt_hash
from tmem.retrieval import retrieve_anchors
from tmem.scope import Scope
from tmem.structuring import build_forest, link_parents
from tmem.types import Answer, Gold, Question, StageError, StageTrace, Trace, Usage, Verdict

Progress = Callable[[str, float], None]  # (stage name, fraction done)


class _Stage:
    """Times one stage and collects its StageTrace."""

    def __init__(self, stages: list[StageTrace], name: str, backend: str, offline: bool, progress: Progress | None):
        self.stages, self.name, self.backend, self.offline, self.progress = stages, name, backend, offline, progress

    def __enter__(self) -> _Stage:
        self.start = time.perf_counter()
        self.counts: dict[str, float] = {}
        self.usage = Usage(source="offline" if self.offline else "none")
        self.errors: list[StageError] = []
        if self.progress:
            self.progress(self.name, 0.0)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stages.append(StageTrace(self.name, time.perf_counter() - self.start, self.counts, self.usage,
                                      self.backend, self.offline, tuple(self.errors)))
        if self.progress:
            self.progress(self.name, 1.0)


def run_question(question: Question, scope: Scope, config: TMemConfig, roles: Roles, *, corpus: str,
                 variant: str = "custom", gold: Gold | None = None, progress: Progress | None = None) -> Trace:
    if question.scope != scope.name:
        raise ValueError(f"question {question.id!r} belongs to scope {question.scope!r}, not {scope.name!r}")
    stages: list[StageTrace] = []
    trace = Trace(question=question, variant=variant, config_hash=config_hash(config), corpus=corpus,
                  prompt_hashes={name: prompt_hash(name) for name in NAMES}, token_counter=roles.tokens.name,
                  embedder=roles.embedder.name)

    with _Stage(stages, "seed_retrieval", "bm25", False, progress) as st:
        rc = config.retrieval
        index = scope.bm25(rc.metadata_fields, rc.k1, rc.b, rc.epsilon)
        anchors = retrieve_anchors(question, scope.messages, index, rc)
        st.counts = {"anchors": len(anchors), "scope_messages": len(scope)}
    trace = replace(trace, anchors=anchors, evidence_ids=tuple(a.message_id for a in anchors))

    if config.discovery.enabled:
        utility = roles.evidence_utility
        with _Stage(stages, "discovery", f"{utility.backend}; embedder {roles.embedder.name}",
                    utility.offline, progress) as st:
            found = discover_evidence(question, anchors, scope, config.discovery, utility, roles.embedder)
            st.usage, st.errors = found.usage, list(found.errors)
            st.counts = {"clusters": len(found.clusters), "clusters_accepted": sum(c.accepted for c in found.clusters),
                         "windows": len(found.windows), "candidates": sum(len(w.candidates) for w in found.windows),
                         "selected": len(found.evidence_ids) - len(anchors), "evidence": len(found.evidence_ids)}
        trace = replace(trace, clusters=found.clusters, windows=found.windows, selections=found.selections,
                        evidence_ids=found.evidence_ids)

    evidence = [scope.by_id[i] for i in trace.evidence_ids]
    budget = config.compression.budget_tokens
    count = roles.tokens.count
    flat_context = truncate_to_budget(serialize_flat(evidence), count, budget)
    trace = replace(trace, flat_context=flat_context)
    by_id = {m.id: m for m in evidence}
    texts: dict[str, str] = {}
    parents: dict[str, tuple[str, str]] = {}

    if config.structuring.enabled:
        role = roles.relation
        with _Stage(stages, "structuring", role.backend, role.offline, progress) as st:
            linked = link_parents(question, evidence, role, scope, config.structuring,
                                  progress=(lambda i, n: progress("structuring", i / n)) if progress else None)
            graph = build_forest(evidence, linked.edges)
            nodes = linearize_forest(graph, by_id)
            st.usage, st.errors = linked.usage, list(linked.errors)
            st.counts = {"nodes": len(nodes), "trees": len({n.tree for n in nodes}),
                         "update_edges": sum(e.relation == "UPDATE" for e in linked.edges),
                         "expand_edges": sum(e.relation == "EXPAND" for e in linked.edges),
                         "related_edges": sum(e.relation == "RELATED" for e in linked.edges)}
        parents = {e.child_id: (e.parent_id, e.relation) for e in linked.edges}
        trace = replace(trace, decisions=linked.decisions, edges=linked.edges, nodes=nodes)

        with _Stage(stages, "compression", f"{config.compression.mode}; {roles.tokens.name}", True, progress) as st:
            render = lambda t: serialize_forest(nodes, by_id, t)  # noqa: E731
            if config.compression.mode == "compress":
                done = compress_forest(nodes, question.text, scope.idf, count, render, budget)
                texts, context = done.texts, render(done.texts)
                trace = replace(trace, spans=done.spans, tokens_before_compression=done.tokens_before,
                                tokens_after_compression=done.tokens_after, budget_met=done.budget_met)
                if not done.budget_met:
                    st.errors.append(StageError("compression", f"protected spans alone exceed B = {budget} "
                                                f"tokens ({done.tokens_after})", "context left over budget"))
            else:
                full = render({})
                context = truncate_to_budget(full, count, budget)
                trace = replace(trace, tokens_before_compression=count(full),
                                tokens_after_compression=count(context))
            st.counts = {"tokens_before": trace.tokens_before_compression,
                         "tokens_after": trace.tokens_after_compression,
                         "spans_omitted": sum(not s.kept for s in trace.spans), "budget": budget}
        trace = replace(trace, context=context)
    else:
        tokens = count(flat_context)
        trace = replace(trace, context=flat_context, tokens_before_compression=count(serialize_flat(evidence)),
                        tokens_after_compression=tokens)

    presentations = [config.answer.presentation if config.structuring.enabled else "flat"]
    if presentations[0] == "forest" and config.answer.also_flat:
        presentations.append("flat")
    answers = []
    role = roles.answer
    with _Stage(stages, "answer", role.backend, role.offline, progress) as st:
        for presentation in presentations:
            passages = trace.context if presentation == "forest" else flat_context
            prompt = answer_prompt(presentation, question.asking_user, question.text, passages)
            ordered = evidence if presentation == "flat" else [by_id[n.message_id] for n in trace.nodes]
            result = role.answer(question, prompt, AnswerEvidence(tuple(ordered),
                                                                  parents if presentation == "forest" else {},
                                                                  texts if presentation == "forest" else {}),
                                 scope)
            st.usage, st.errors = st.usage + result.usage, st.errors + list(result.errors)
            answers.append(Answer(presentation, result.text, role.backend, role.offline, prompt.hash,
                                  count(passages), result.reason))
        st.counts = {"answers": len(answers)}
    trace = replace(trace, answers=tuple(answers))

    if gold is not None and gold.answer is not None:
        judge = roles.judge
        with _Stage(stages, "judge", judge.backend, judge.offline, progress) as st:
            verdicts = []
            for a in answers:
                result = judge.judge(question, gold.answer, a.text, judge_prompt(question.text, gold.answer, a.text))
                st.usage, st.errors = st.usage + result.usage, st.errors + list(result.errors)
                verdicts.append(Verdict(a.presentation, result.correct, result.raw, judge.backend, judge.offline))
            st.counts = {"correct": sum(v.correct for v in verdicts)}
        trace = replace(trace, verdicts=tuple(verdicts))
    return replace(trace, stages=tuple(stages))
