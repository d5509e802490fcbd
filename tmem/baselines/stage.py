"""The memory systems as stages of a run (tmem.pipeline.stages plans "memory", "answer", "judge" for them):
`recall_memory` ingests the scope once (tmem.baselines.ingestion) and renders the system's items for the question
into the answer context under the shared cap B (App. C.2: "truncation is applied only when the returned context
exceeds the cap"); `answer_recalled` answers from that context with the same answer role and flat prompt as every
flat method (App. I), and the judge stage is T-Mem's own.

The trace keeps each item (its text, kind, source ids and the system's own score, `tmem.types.Memory`), the source
messages as anchors in the system's order, and the cut at B per source message, so the evidence funnel and verdict
read a baseline like any flat method. A system's construction cost is in the stage's counts (`ingestion_*`), not
in its usage: it is paid once per scope, not per question.
"""
from __future__ import annotations

import json
import time

from tmem.baselines import SYSTEMS
from tmem.baselines.base import Item
from tmem.baselines.ingestion import ingest, tools_for
from tmem.limits import cap_answer
from tmem.models.base import AnswerEvidence
from tmem.pipeline.compression import cuts_at, truncate_to_budget
from tmem.pipeline.stage_results import Answered, Recalled, StageOutput
from tmem.prompts import answer_prompt, prompt_hash
from tmem.types import Anchor, Answer, Cut, Memory, Question, StageTrace, Usage

BEGIN, END = "<<<BEGIN RETRIEVED MEMORIES>>>", "<<<END RETRIEVED MEMORIES>>>"


def memory_line(rank: int, item: Item | Memory) -> str:
    """One item as the answer model reads it; its text a JSON string literal (it cannot break out of the line)."""
    meta = f" {json.dumps(item.meta, ensure_ascii=False)[1:-1]}" if item.meta else ""
    return f"[{rank}] memory={item.kind}{meta} text={json.dumps(item.text, ensure_ascii=False)}"


def memory_lines(items) -> list[tuple[str | None, str]]:
    """(rank, line) of every item between the markers (None for a marker line): the context before the cut."""
    return [(None, BEGIN)] + [(str(r), memory_line(r, it)) for r, it in enumerate(items, start=1)] + [(None, END)]


def render(items: list[Item], count, budget: int, reason: str) -> tuple[Recalled, list[bool]]:
    """The items' context cut at B, and for each item whether its line is whole in it."""
    lines = memory_lines(items)
    full = "\n".join(line for _, line in lines)
    context = truncate_to_budget(full, count, budget)
    cut_ranks = {int(c.message_id): c for c in cuts_at(lines, len(context), "flat", reason)}
    whole = [r not in cut_ranks for r in range(1, len(items) + 1)]
    kept_ids = {i for it, w in zip(items, whole) if w for i in it.source_ids}
    cuts, seen = [], set()
    for r, it in enumerate(items, start=1):
        for mid in it.source_ids:
            if r in cut_ranks and mid not in kept_ids and mid not in seen:
                seen.add(mid)
                c = cut_ranks[r]
                cuts.append(Cut(mid, "flat", c.kept_chars, c.line_chars, reason))
    memories = tuple(Memory(r, it.text, it.source_ids, it.kind, it.derived, it.score, w, it.meta)
                     for r, (it, w) in enumerate(zip(items, whole), start=1))
    ids = list(dict.fromkeys(i for it in items for i in it.source_ids))
    scores = {}
    for it in items:
        for i in it.source_ids:
            scores.setdefault(i, it.score if it.score is not None else 0.0)
    anchors = tuple(Anchor(i, float(scores[i]), r) for r, i in enumerate(ids, start=1))
    return Recalled(memories, anchors, tuple(ids), context, context, count(full), count(context), tuple(cuts)), whole


def recall_memory(question: Question, scope, ctx, earlier) -> StageOutput:
    system = SYSTEMS[ctx.method.system]
    started = time.perf_counter()
    done = ingest(system, scope, ctx.roles, ctx.store, ctx.method.name)
    tools = tools_for(system, ctx.roles, ctx.store)  # query-time calls (HippoRAG 2 fact filter, MemGAS selection)
    gold = ctx.gold(question) if system.uses_gold and ctx.gold else None
    items = [it for it in system.retrieve(question, scope, done.memory, tools, gold) if it.text]
    for it in items:
        unknown = [i for i in it.source_ids if i not in scope.by_id]
        if unknown:
            raise ValueError(f"{system.name}: item traced to message ids not in scope {scope.name!r}: {unknown[:3]}")
    budget = ctx.method.config.compression.budget_tokens
    recalled, whole = render(items, ctx.roles.tokens.count, budget,
                             f"the system's context was cut at B = {budget} tokens")
    usage = Usage(source="none")
    for u in (tools.llm.usage.values() if tools.llm else ()):
        usage = usage + u
    construction = _sum(done.usage)
    counts = {"items": len(items), "items_in_context": sum(whole), "derived_items": sum(it.derived for it in items),
              "items_with_sources": sum(bool(it.source_ids) for it in items), "source_messages": len(recalled.anchors),
              "scope_messages": len(scope), "ingestion_prompt_tokens": construction["prompt_tokens"],
              "ingestion_completion_tokens": construction["completion_tokens"],
              "ingestion_calls": construction["calls"], "ingestion_cached_calls": construction["cached_calls"],
              "ingestion_embedding_tokens": construction["embedding_tokens"],
              "ingestion_seconds": round(done.seconds, 3), "ingestion_reused": int(done.reused),
              **{f"memory_{k}": v for k, v in done.memory.counts.items()}}
    backend = f"{system.label}; construction {done.model}; embedder {getattr(ctx.roles.embedder, 'name', '?')}"
    trace = StageTrace("memory", time.perf_counter() - started, counts, usage, backend, not system.needs_llm)
    return StageOutput(recalled, trace, recalled.evidence_ids,
                       {f"memory:{system.name}": system.key()},
                       extras={"system": system.name, "memory_key": done.key, "estimated": done.estimated})


def _sum(usage: dict[str, dict]) -> dict[str, int]:
    out = {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0, "cached_calls": 0, "embedding_tokens": 0}
    for stage, u in usage.items():
        if stage.endswith("(embedding)"):
            out["embedding_tokens"] += u.get("prompt_tokens", 0)
            continue
        for k in ("prompt_tokens", "completion_tokens", "calls", "cached_calls"):
            out[k] += u.get(k, 0)
    return out


def answer_recalled(question: Question, scope, ctx, recalled: Recalled) -> StageOutput:
    """The flat answer from the system's context (the same answer role and prompt as every flat method)."""
    role, count = ctx.roles.answer, ctx.roles.tokens.count
    started = time.perf_counter()
    prompt = answer_prompt("flat", question.asking_user, question.text, recalled.context)
    cut = {c.message_id for c in recalled.cuts}
    shown = tuple(scope.by_id[i] for i in recalled.evidence_ids if i not in cut)
    result = role.answer(question, prompt, AnswerEvidence(shown), scope)
    answer = Answer("flat", cap_answer(result.text)[0], role.backend, role.offline, prompt.hash,
                    count(recalled.context), result.reason)
    trace = StageTrace("answer", time.perf_counter() - started, {"answers": 1}, result.usage, role.backend,
                       role.offline, tuple(result.errors))
    hashes = {n: prompt_hash(n) for n in ("answer_flat_system", "answer_forest_system", "answer_untyped_system",
                                          "answer_user")}
    hashes["prompt:flat"] = prompt.hash
    return StageOutput(Answered(recalled.context, (answer,), cuts=recalled.cuts), trace, recalled.evidence_ids,
                       hashes)
