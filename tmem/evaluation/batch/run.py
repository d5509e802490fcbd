"""Stage-wise batch runs of T-Mem variants and baselines over a corpus's questions, with resume and validators
(paper App. D, E.1).

Stage-wise (App. D.1): for each variant, every question finishes a stage before the next stage starts; each stage
appends one JSONL record per question to `<out>/<variant>/<stage>.jsonl` (tmem.evaluation.batch.records). Resume
(App. D.2): a restarted run reads the latest record per key and stage and skips a question whose record succeeded
for the same configuration and backend and was computed from the current record of the stage before; failed or
incomplete ones are retried, and a stage that is redone invalidates the later stages of that question. Validators
(App. D.3) run before the summary, which is computed from the same chains of records the resume test accepts (a
question without a complete chain is an error); only when they pass are the traces and one result row per (variant,
question) stored in DuckDB, under the run id kept in run.json, for the app's Failures and Compare pages.

The run's summary is tmem.evaluation.batch.summary, its manifest (run.json) tmem.evaluation.batch.manifest; the command
that parses arguments and prints is tmem/commands/evaluate/run.py.
"""
from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from tmem.analysis.funnel import attribute_failure
from tmem.evaluation.batch import validators as v
from tmem.evaluation.batch.flow import StageStats, run_flow
from tmem.evaluation.batch.records import ERROR, OK, RecordLog, RecordWriter, make_record, read_records
from tmem.evaluation.executors.batch_task import StageTask, run_stage_task
from tmem.evaluation.metrics import recall_eligible, units_recovered
from tmem.models.embedders import embedding_progress
from tmem.models.llm.budget_cap import BudgetExceeded
from tmem.models.llm.concurrency import map_with_limit
from tmem.pipeline.run import open_scope
from tmem.pipeline.stages import STAGE_FUNCTIONS, STAGE_PROMPTS, Context, Earlier, assemble, plan
from tmem.prompts import prompt_hash

# (label, total) -> a callable told (done, total) as questions finish: the command's progress bar
ProgressBar = Callable[[str, int], Callable[..., None]]


# --------------------------------------------------------------------------------------------- the runner
class BatchRun:
    """Execution of `methods` over `questions` with JSONL records under `out`: in this process a question's next
    stage starts as soon as its record of the stage before is written (`tmem.evaluation.batch.flow`); with
    `stage_barrier`, another executor (Ray) or a batch API, every question finishes a stage before the next."""

    def __init__(self, store, corpus: str, methods, questions, out: Path, roles, run_id: str, *, jobs: int = 1,
                 progress: ProgressBar | None = None, log: Callable[[str], None] = lambda line: None,
                 executor=None, stage_barrier: bool = False, stage_runner=None, spend=None):
        self.store, self.corpus, self.methods, self.questions = store, corpus, list(methods), list(questions)
        self.executor = executor  # None: this process's threads; else a tmem.evaluation.executors executor (Ray)
        self.out, self.roles, self.run_id, self.jobs, self.progress, self.log = out, roles, run_id, jobs, \
            progress, log
        self.stage_barrier = stage_barrier or executor is not None or stage_runner is not None
        self.stage_runner = stage_runner  # e.g. tmem.evaluation.batch.batch_stages.BatchAPIStages (--batch-api)
        self.spend = spend  # a tmem.evaluation.batch.spend.SpendFile: tokens and cost so far, for progress and caps
        self.backend = roles.label
        self._scopes: dict[str, object] = {}
        self.logs: dict[tuple[str, str], RecordLog] = {}
        self.stats: list[StageStats] = []
        self.stopped = ""  # why the run stopped before the end (a budget cap)
        self.delay = float(os.environ.get("TMEM_BATCH_DELAY", 0) or 0)  # testing aid: seconds per question

    # --- helpers
    def key(self, q) -> tuple[str, str, str]:
        return (q.scope, q.type or "", q.id)

    def scope(self, name: str):
        if name not in self._scopes:  # open_scope keeps the message vectors in the same database
            self._scopes[name] = open_scope(self.store, self.corpus, name, embedding_progress(self.log))
        return self._scopes[name]

    def path(self, method, stage: str) -> Path:
        return self.out / method.name / f"{stage}.jsonl"

    def record_log(self, method, stage: str) -> RecordLog:
        if (method.name, stage) not in self.logs:
            self.logs[(method.name, stage)] = read_records(self.path(method, stage))
        return self.logs[(method.name, stage)]

    def context(self, method):
        return Context(method, self.roles, self.store,
                       gold=lambda q: self.store.gold(self.corpus, q.scope, q.id))

    def chain(self, method, key) -> list[dict]:
        """The current records of `key` for every stage of the method in order, while they form an unbroken chain:
        each made for this configuration, backend and prompt templates, from the record before it."""
        out: list[dict] = []
        for stage in plan(method):
            r = self.record_log(method, stage).latest.get(key)
            if self.break_reason(method, stage, r, out[-1]["record_id"] if out else None):
                break
            out.append(r)
        return out

    def break_reason(self, method, stage: str, record: dict | None, parent: str | None) -> str | None:
        """Why `record` cannot follow the record `parent` in a chain of this run (None: it can). Resume and the
        validators use this one test."""
        if not record:
            return "no record (the run stopped before this stage)"
        if record.get("config_hash") != method.hash:
            return "the latest record was made for another configuration"
        if record.get("backend") != self.backend:
            return "the latest record was made with other roles, models or decoding settings"
        if not record["outputs"]:
            return f"failed: {record.get('error')}"
        if any(record["prompt_hashes"].get(n) != prompt_hash(n) for n in STAGE_PROMPTS.get(stage, ())):
            return "the latest record was made with other prompt templates"
        if record.get("parent_id") != parent:
            return "the latest record was computed from a superseded record of the stage before"
        return None

    def start_position(self, method, q) -> tuple[int, list[dict]]:
        """(the first stage the run must compute for `q`, its current chain): stages whose record is ok are
        skipped; a record with a failed role is redone, and so is everything after it."""
        chain = self.chain(method, self.key(q))
        position = 0
        while position < len(chain) and chain[position]["status"] == OK:
            position += 1
        return position, chain

    def writer(self, method, stage: str) -> RecordWriter:
        writer = RecordWriter(self.path(method, stage))
        log = self.record_log(method, stage)
        for line, why in log.torn:
            self.log(f"  {method.name}/{stage}: line {line} ignored: {why}")
        if writer.moved_torn:
            self.log(f"  {method.name}/{stage}: moved a torn last line ({writer.moved_torn} bytes) to "
                     f"{self.path(method, stage).name}.torn")
        return writer

    def compute(self, method, stage: str, q, earlier: list[dict], ctx) -> object:
        """The stage's output for `q` from its earlier records (what a worker runs)."""
        out = STAGE_FUNCTIONS[stage](q, self.scope(q.scope), ctx, Earlier.from_records(earlier))
        if self.delay:
            time.sleep(self.delay)
        return out

    def write(self, method, stage: str, writer: RecordWriter, outcome) -> dict | None:
        """Append the record of a finished (question, stage) and return it; None when a budget cap refused its
        calls (no record: the run stops and a resumed run computes it)."""
        q, earlier = outcome.item
        if isinstance(outcome.error, BudgetExceeded):
            self.stopped = self.stopped or str(outcome.error)
            return None
        log = self.record_log(method, stage)
        attempt = log.counts.get(self.key(q), 0) + 1
        record = stage_record(self.key(q), outcome, earlier, run_id=self.run_id, variant=method.name, stage=stage,
                              config_hash=method.hash, backend=self.backend, seconds=outcome.seconds, attempt=attempt)
        writer.append(record)
        log.latest[self.key(q)] = record
        log.counts[self.key(q)] = attempt
        log.records += 1
        if self.spend is not None:
            self.spend.update()
        return record

    # --- running
    def run(self) -> None:
        for method in self.methods:
            if self.stopped:
                break
            if not self.stage_barrier:
                run_flow(self, method)
                continue
            for i, stage in enumerate(plan(method)):
                if not self.stopped:
                    self.run_stage(method, stage, i)
        if self.spend is not None:
            self.spend.update(force=True)

    def run_stage(self, method, stage: str, position: int) -> StageStats:
        started = time.perf_counter()
        todo, skipped, blocked = [], 0, 0
        for q in self.questions:
            start, chain = self.start_position(method, q)
            if start > position:
                skipped += 1
            elif len(chain) >= position:
                todo.append((q, chain[:position]))
            else:
                blocked += 1  # an earlier stage has no usable record
        failed = 0
        if todo:
            ctx = self.context(method)
            writer = self.writer(method, stage)
            bar = self.progress(f"{method.name} / {stage}", len(todo)) if self.progress else None

            def done(outcome):
                nonlocal failed
                record = self.write(method, stage, writer, outcome)
                failed += record is not None and record["status"] == ERROR

            try:
                if self.stage_runner is not None:  # a provider's batch API: one batch of the stage's calls
                    self.stage_runner.run(self, method, stage, todo, ctx, bar, done)
                elif self.executor is None:
                    map_with_limit(lambda item: self.compute(method, stage, item[0], item[1], ctx), todo,
                                   max_in_flight=self.jobs, progress=bar, on_result=done,
                                   stop=lambda: bool(self.stopped))
                else:  # the stage runs where the executor puts it; the records are still written by this process
                    tasks = [StageTask(self.corpus, q.scope, stage, method, q, Earlier.from_records(earlier))
                             for q, earlier in todo]
                    self.executor.run(run_stage_task, tasks, progress=bar,
                                      on_result=lambda o: done(replace(o, item=todo[o.index])))
            finally:
                writer.close()
        return self.report(StageStats(method.name, stage, len(todo), skipped, failed, blocked,
                                      time.perf_counter() - started))

    def report(self, stats: StageStats) -> StageStats:
        self.stats.append(stats)
        if stats.skipped or stats.blocked or stats.failed:
            self.log(f"  {stats.variant}/{stats.stage}: ran {stats.ran}, skipped {stats.skipped} already done"
                     + (f", {stats.failed} failed" if stats.failed else "")
                     + (f", {stats.blocked} blocked by an earlier stage" if stats.blocked else ""))
        return stats

    # --- results
    def traces(self, method):
        """(question, trace or None, chain of records, error) per question, from the latest records."""
        ctx = self.context(method)
        stages = plan(method)
        for q in self.questions:
            chain = self.chain(method, self.key(q))
            error = next((r["error"] for r in chain if r["status"] == ERROR), None)
            if len(chain) < len(stages):
                latest = self.record_log(method, stages[len(chain)]).latest.get(self.key(q))
                error = error or (latest or {}).get("error") or f"incomplete: no record for stage {stages[len(chain)]}"
            trace = assemble(q, ctx, self.corpus, {s: r["outputs"] for s, r in zip(stages, chain)}) if chain else None
            yield q, trace, chain, error


def _usage(usage) -> dict:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "calls": usage.calls, "cached_calls": usage.cached_calls, "source": usage.source}


# ------------------------------------------------------------------------------------------------ results
def stage_record(key, outcome, earlier: list[dict], **common) -> dict:
    """The record of one finished (question, stage): its outputs, or the error a worker raised; `record_id` new,
    `parent_id` the record of the stage before it was computed from."""
    if outcome.ok:
        out = outcome.value
        errors = [f"{e.message} -> {e.fallback}" for e in out.trace.errors if e.fallback != "ignored"]
        record = make_record(key, prompt_hashes=out.prompt_hashes, status=ERROR if out.failed else OK,
                             selected_ids=out.selected_ids, outputs=out.to_record(),
                             error="; ".join(errors) or None, usage=_usage(out.trace.usage), **common)
        record["role"] = out.trace.backend  # what ran this stage (`backend` keys the configured roles: a variant
        # such as state-structuring runs another offline relation role than the one that key names)
    else:
        record = make_record(key, prompt_hashes={}, status=ERROR,
                             error=f"{type(outcome.error).__name__}: {outcome.error}", **common)
    record["record_id"] = uuid.uuid4().hex
    record["parent_id"] = earlier[-1]["record_id"] if earlier else None
    return record


def result_row(run: BatchRun, method, q, trace, chain, error, gold, messages) -> dict:
    """One row of Store.RUN_RESULT_COLUMNS for the app's Failures and Compare pages."""
    primary = trace.answers[0] if trace and trace.answers else None
    verdict = trace.verdict(primary.presentation) if primary else None
    flat = trace.verdict("flat") if trace and primary and primary.presentation != "flat" else None
    row = {"run_id": run.run_id, "corpus": run.corpus, "variant": method.name, "config_hash": method.hash,
           "backend": run.backend, "scope": q.scope, "question_id": q.id, "qtype": q.type,
           "status": "error" if error else "ok", "correct": verdict.correct if verdict else None,
           "correct_flat": flat.correct if flat else None, "failure": None, "failure_detail": None,
           "units": None, "units_recovered": None,
           "evidence_messages": len(trace.evidence_ids) if trace else None,
           "prompt_tokens": sum(s.usage.prompt_tokens for s in trace.stages) if trace else 0,
           "completion_tokens": sum(s.usage.completion_tokens for s in trace.stages) if trace else 0,
           "seconds": round(sum(r["seconds"] for r in chain), 4), "error": error,
           "created_at": chain[-1]["created_at"] if chain else None,
           "complete": len(chain) == len(plan(method))}  # not a stored column: the summary counts it
    if trace is not None and recall_eligible(q, gold):
        row.update(units=len(gold.evidence), units_recovered=units_recovered(gold, trace.evidence_ids))
        if verdict is not None:
            blame = attribute_failure(trace, gold, messages)
            row.update(failure=blame.category, failure_detail=blame.detail)
    return row


def collect(run: BatchRun):
    """(findings, {variant: (traces, rows)}) after validating every variant's records and forests."""
    findings: list = []
    keys = [run.key(q) for q in run.questions]
    findings += v.check_unique_keys(keys)
    results = {}
    stored = {(q.scope, q.id): q for q in run.store.questions(run.corpus)}
    for method in run.methods:
        findings += check_chains(run, method, keys)
        traces, rows = [], []
        for q, trace, chain, error in run.traces(method):
            gold = run.store.gold(run.corpus, q.scope, q.id)
            ids = set(gold.evidence_ids) if gold else set()
            if trace is not None:
                ids |= set(trace.evidence_ids) | {a.message_id for a in trace.anchors}
            messages = {m.id: m for m in run.store.messages_by_ids(run.corpus, q.scope, ids)} if ids else {}
            if trace is not None:
                findings += v.check_forest(trace, messages)
                query = chain[0]["outputs"].get("extras", {}).get("query") if chain else None
                findings += [f for f in v.check_leakage(trace, stored[(q.scope, q.id)], gold,
                                                        {i: messages[i] for i in trace.evidence_ids if i in messages},
                                                        query) if f.level != v.NOTE]
                traces.append(trace)
            rows.append(result_row(run, method, q, trace, chain, error, gold, messages))
        results[method.name] = (traces, rows)
    return findings, results


def check_chains(run: BatchRun, method, keys) -> list:
    """The records the summary is computed from pass the resume test (`BatchRun.chain`): per stage, every
    question that reached it has a record made for this configuration, backend and prompt templates from its
    record of the stage before. A question whose chain breaks is incomplete (an error, reported at the stage where
    it breaks); a chain record whose role failed and used its fallback is a warning."""
    findings = []
    chains = {k: run.chain(method, k) for k in keys}
    for i, stage in enumerate(plan(method)):
        log = run.record_log(method, stage)
        reached = [k for k in keys if len(chains[k]) >= i]
        usable = {k for k in reached if len(chains[k]) > i}
        reasons = {k: run.break_reason(method, stage, log.latest.get(k), chains[k][-1]["record_id"] if i else None)
                   for k in reached if k not in usable}
        failed = [k for k in usable if chains[k][i]["status"] == ERROR]
        if failed:
            findings.append(v.Finding(v.WARNING, "records", f"{method.name}/{stage}: {len(failed)} question(s) "
                                      "failed and used a fallback; rerun the same command to retry them"))
        findings += v.check_records(method.name, stage, {k: c for k, c in log.counts.items() if k in usable},
                                    usable, reached, log.torn, reasons)
    return findings


def store_results(store, run: BatchRun, results, valid: bool) -> str:
    """Put a validated run's traces and result rows in DuckDB for the app, replacing what earlier passes of the
    run stored for the same variants; a run that failed validation stores nothing and those earlier rows are
    removed, so the app never shows results that are not a valid report. -> what was done, for the output."""
    if valid:
        for traces, _ in results.values():
            for trace in traces:
                store.save_trace(trace, run.backend)
    rows = [r for _, variant_rows in results.values() for r in variant_rows] if valid else []
    removed = store.replace_run_results(run.run_id, list(results), rows)
    if valid:
        return f"results stored as run {run.run_id!r} for the app"
    return "validation failed: nothing stored for the app" + (
        f" (the {removed} result rows an earlier pass stored as run {run.run_id!r} were removed)" if removed else "")



def select_questions(questions: Sequence, types: str | None, limit: int | None) -> list:
    wanted = {t.strip() for t in types.split(",") if t.strip()} if types else None
    chosen = [q for q in questions if wanted is None or (q.type or "") in wanted]
    if wanted:
        unknown = wanted - {q.type for q in questions}
        if unknown:
            raise ValueError(f"no questions of type {', '.join(sorted(unknown))}; types: "
                             f"{', '.join(sorted({q.type or '' for q in questions}))}")
    return chosen[:limit] if limit is not None else chosen
