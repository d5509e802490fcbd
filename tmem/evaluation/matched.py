"""Budget-matched evidence verdicts: a fixed-budget method (BM25, the embedding top-k, the global-evidence control,
T-Mem reranked, a forest over BM25 seeds) given as many messages as the other side of a comparison showed its
answer model, question by question, so "more evidence" and "better evidence" can be told apart.

- The budget is matched in **messages**: per question, the messages whose whole line reached the other side's
  primary answer context (tmem.analysis.funnel, "after_compression"; the count `recall`'s budget-matched table uses
  for R'(q) when nothing is cut). A seeds-only method is re-run with k = that count; a method that reranks to
  final_k (the control, T-Mem reranked) keeps its seeds and reranks to that count. The re-run context is then cut
  at B like any context, and its evidence verdict is read the same way.
- Only the stages up to the answer context run, with the offline answer role (nothing is sent to a model, nothing
  is judged): the matched rows carry the evidence verdict, not an accuracy.
- A matched row's variant is named `<method>@<other>` ("flat@full"); `compare` pairs it with the other side and
  reads "more evidence, not better evidence" when a win of the unmatched comparison is gone at equal budget.
"""
from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import pandas as pd

from tmem.analysis import significance as sig
from tmem.analysis.funnel import stage_sets
from tmem.evaluation.metrics import recall_eligible
from tmem.models.factory import build_roles
from tmem.models.offline import OfflineAnswerer
from tmem.pipeline.methods import Method, methods
from tmem.pipeline.stages import STAGE_FUNCTIONS, Context, Earlier, StageOutput, assemble, decode_result, plan
from tmem.types import Gold, Question, Trace

BUDGET = "messages"
# the imported gold's version name (tmem.evaluation.gold_versions.ORIGINAL; that module imports review, which
# stores the rows a run computed under it, so the name is repeated here rather than imported)
ORIGINAL_GOLD = "original"
MORE_NOT_BETTER = "more evidence, not better evidence"
HOLDS = "holds at equal budget"
EXPLAIN = ("Budget-matched: the fixed-budget side re-run with as many messages as the other side's answer context "
           "held whole, question by question (budget matched in messages), then cut at B like any context; "
           "evidence verdict only (nothing is answered or judged).")


def fixed_budget(name: str) -> bool:
    """A method whose evidence size is set by k or final_k (a seeds-only method, or one that reranks to k)."""
    method = methods().get(name)
    return method is not None and (method.discovery == "off" or bool(method.final_k))


def matched_name(method: str, other: str) -> str:
    return f"{method}@{other}"


def at_budget(method: Method, messages: int) -> Method:
    """`method` showing `messages` messages: k seeds when the seeds are the evidence, else reranked to that many."""
    messages = max(1, int(messages))
    return replace(method, final_k=messages) if method.final_k else method.with_k(messages)


def context_trace(question: Question, scope, method: Method, roles, corpus: str, store=None) -> Trace:
    """The stages of `method` up to its answer context (the answer role offline, no judge), as a Trace."""
    return context_traces(question, scope, [method], roles, corpus, store)[0]


def context_traces(question: Question, scope, methods_at: Sequence[Method], roles, corpus: str,
                   store=None, recorded: Mapping[str, StageOutput | dict] | None = None) -> list[Trace]:
    """`context_trace` of each method of `methods_at`, which differ only in their compression settings (the budget
    B, say) and names: the stages before compression never read them, so they run once and every method continues
    from their results (the stages up to the forest are most of a question's time). `recorded`: those stages'
    outputs as a batch recorded them for this question and the first method ({stage: the record's "outputs"}, as
    the batch itself resumes from them), used instead of running them when it holds every one."""
    first = methods_at[0]
    for method in methods_at[1:]:
        if early_stages(method) != early_stages(first):
            raise ValueError(f"{method.name}: methods that share their early stages differ only in compression")
    answering = replace(roles, answer=OfflineAnswerer())
    stages = [name for name in plan(first) if name != "judge"]
    split = next((i for i, name in enumerate(stages) if name in ("compression", "answer")), len(stages))
    recorded = recorded if recorded and all(name in recorded for name in stages[:split]) else {}
    shared, earlier = {}, Earlier()
    for name in stages[:split]:
        if name in recorded:
            shared[name] = recorded[name]
            earlier = earlier.then(decode_result(name, recorded[name]["fields"]))
        else:
            shared[name] = out = STAGE_FUNCTIONS[name](question, scope, Context(first, answering, store), earlier)
            earlier = earlier.then(out)
    traces = []
    for method in methods_at:
        ctx, after, outputs = Context(method, answering, store), earlier, dict(shared)
        for name in stages[split:]:
            outputs[name] = out = STAGE_FUNCTIONS[name](question, scope, ctx, after)
            after = after.then(out)
        traces.append(assemble(question, ctx, corpus, outputs))
    return traces


def early_stages(method: Method) -> Method:
    """What the stages before compression read of `method`: equal for methods that differ only in their names and
    compression settings."""
    return replace(method, name="", description="",
                   config=replace(method.config, compression=type(method.config.compression)()))


def matched_rows(store, corpus: str, pairs: Mapping[tuple[str, str], Trace], method_name: str, other: str,
                 gold_of: Callable[[str, str], Gold | None], scope_of: Callable, roles=None) -> pd.DataFrame:
    """One result row per question of `pairs` ({(scope, question id): the other side's trace}): `method_name` at that
    trace's message count, under the variant name `<method>@<other>`, with the evidence columns significance reads."""
    roles = roles or build_roles(store=store)
    base = methods()[method_name]
    rows = []
    for (scope_name, question_id), other_trace in pairs.items():
        gold = gold_of(scope_name, question_id)
        question = other_trace.question
        row = {"scope": scope_name, "question_id": question_id, "qtype": question.type,
               "variant": matched_name(method_name, other), "status": "ok", "correct": None}
        shown = len(stage_sets(other_trace)["after_compression"])
        if gold is None or not recall_eligible(question, gold) or not shown:
            rows.append({**row, "messages": shown, "units": None, "units_in_context": None, "evidence_complete": None})
            continue
        trace = context_trace(question, scope_of(scope_name), at_budget(base, shown), roles, corpus, store)
        sets = stage_sets(trace)
        held = sum(bool(set(u) & sets["after_compression"]) for u in gold.evidence)
        rows.append({**row, "messages": shown, "units": len(gold.evidence), "units_in_context": held,
                     "units_recovered": sum(bool(set(u) & sets["selected"]) for u in gold.evidence),
                     "evidence_complete": held == len(gold.evidence)})
    return pd.DataFrame(rows)


def stored_key(store, corpus: str, run: str, version: str, baseline: str, compared: str, stamp: str,
               roles: str) -> str:
    """The key a run's matched rows are stored under: what they were computed from, down to the run's stored
    version `stamp` (rows and latest write), when the corpus (its messages and gold) was imported and the roles'
    backends, so a changed run, corpus or backend is computed anew."""
    imported = str(store.corpus_info(corpus).get("imported_at"))
    parts = ("matched", BUDGET, corpus, imported, run, version, baseline, compared, stamp, roles)
    return "matched:" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def run_stamp(rows: pd.DataFrame) -> str:
    """The stored version of a run's result rows: how many, and the latest written (a re-run or a new variant
    changes it)."""
    latest = rows["created_at"].max() if "created_at" in rows and len(rows) else ""
    return f"{len(rows)}:{latest}"


def to_bytes(rows: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    rows.to_parquet(buffer, index=False)
    return buffer.getvalue()


def from_bytes(data: bytes) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(data))


def verdict(unmatched: str, matched: str) -> str:
    """What a win at unequal budget means once the budget is matched."""
    if unmatched != sig.WIN:
        return ""
    return HOLDS if matched == sig.WIN else MORE_NOT_BETTER


def matched_pair(frame: pd.DataFrame, matched: pd.DataFrame, variant: str, method_name: str,
                 unmatched_outcome: str, **kw) -> dict:
    """The JSON of one matched comparison: `variant` against `method_name` at its message count (evidence)."""
    name = matched_name(method_name, variant)
    both = pd.concat([frame[frame["variant"] == variant], matched], ignore_index=True)
    head = sig.paired_deltas(both, variant, name, "evidence", by_type=False, **kw)[0].as_json()
    mean = pd.to_numeric(matched["messages"], errors="coerce").mean() if len(matched) else float("nan")
    return {"method": name, "budget": BUDGET, "mean_messages": None if mean != mean else round(float(mean), 2),
            "measure": "evidence", "baseline_value": head["baseline"], "variant_value": head["variant"],
            **{k: head[k] for k in ("n", "delta", "ci_low", "ci_high", "p_mcnemar", "outcome")},
            "reading": verdict(unmatched_outcome, head["outcome"])}
