"""`run --batch-api`: each stage's model calls for all questions as one batch of a provider's batch API (stage-wise,
App. D.1, is exactly a batch's shape), its replies written as the stage's records.

A stage goes in passes. Each pass runs the stage function of every question still to do with its role's client
replaced by a `BatchCollector`: a request the response cache or an earlier batch answers is served at once; any
other is collected for the batch and its caller gets a fallback it never uses. A question whose calls were all
answered gets its record now, through the stage's own code; the others wait for the batch. The collected requests
become one JSONL file (`<variant>/<stage>.batch-N.jsonl`, one line per distinct request, custom_id = question key |
stage | config hash | prompt hash), uploaded, submitted and polled with progress; its replies (key scrubbed) are
saved beside it and cached like online replies, and the next pass writes those questions' records. Lines that
failed, or replies that do not parse (asked again with the online client's repair turn), go into a follow-up batch,
at most the role's `retries` times; then the call fails like an online call (its fallback, an error record that
a rerun retries).

Resume: run.json's `batches` records each submission before each step (file written, uploaded, created, done), so
a restarted run finds the file it uploaded (by name) and the batch it created (by metadata), polls it instead of
submitting again, and reads replies it already downloaded from disk.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from tmem.evaluation.batch.manifest import all_batch_entries, batch_entries, save_batch_entry
from tmem.models.factory import online_role
from tmem.models.llm.batch_client import MAX_BYTES, MAX_LINES, BatchClient, LineResult, read_results, request_line
from tmem.models.llm.budget_cap import ROLE_STAGE, BudgetExceeded
from tmem.models.llm.cache import CachedReply, request_key
from tmem.models.llm.concurrency import Outcome
from tmem.models.llm.failures import CallFailed, MalformedReply
from tmem.models.llm.tokens import chat_prompt_tokens
from tmem.pipeline.stages import Context
from tmem.types import Usage

STAGE_ROLE = {stage: role for role, stage in ROLE_STAGE.items()}


class Deferred(CallFailed):
    """The request went into the batch: the caller's fallback stands in until the batch answers (never recorded)."""


class BatchCollector:
    """A role's client during a batch pass: answers from the cache or from downloaded batch replies, collects
    every other request (deduplicated by its response-cache key)."""

    def __init__(self, inner, max_attempts: int):
        self.inner, self.max_attempts = inner, max(1, max_attempts)
        self.settings, self.label = inner.settings, inner.label
        self.results: dict[str, LineResult] = {}  # request key -> latest batch result
        self.attempts: dict[str, int] = {}  # request key -> batch lines sent for it
        self.requests: dict[str, tuple[str, dict]] = {}  # key -> (custom_id, request body)
        self.held: dict[str, object] = {}  # key -> its budget reservation while its line is out
        self.owner = ""  # the question (key | stage | config hash) being computed
        self.deferred = False

    def begin(self, owner: str) -> None:
        self.owner, self.deferred = owner, False

    def complete(self, system: str, user: str, parse, schema: dict | None = None, schema_name: str = "reply"):
        inner = self.inner
        key, prompt_hash, blob = request_key(self.settings.model, self.settings.role, system, user,
                                             inner.params(schema), inner.endpoint.url)
        # looked up once: a request the batch answers is not counted as a cache miss again on the next pass
        hit = inner.cache.get(key, f"{self.settings.role} / prompt {prompt_hash}") \
            if inner.cache and key not in self.results and key not in self.requests else None
        if hit is not None:
            try:
                return parse(hit.text), hit.text, Usage(hit.prompt_tokens, hit.completion_tokens, 0, 1, "cache")
            except MalformedReply:
                pass
        result, repair = self.results.get(key), None
        if result is not None and result.text is not None:
            try:
                value = parse(result.text)
            except MalformedReply as exc:
                repair, result = (result.text, str(exc)), LineResult(None, error=f"malformed reply: {exc}")
            else:
                if inner.cache:
                    inner.cache.put(key, self.settings.role, self.settings.model, prompt_hash, blob,
                                    CachedReply(result.text, result.prompt_tokens, result.completion_tokens), "batch")
                return value, result.text, Usage(result.prompt_tokens, result.completion_tokens, 1, 0, "batch")
        if result is not None and self.attempts.get(key, 0) >= self.max_attempts:
            raise CallFailed(f"{self.label}: batch API: failed after {self.attempts[key]} batch line(s): "
                             f"{result.error}"[:600], Usage())
        if key not in self.requests:
            body = inner._kwargs(system, user, schema, schema_name)
            if repair is not None:
                from tmem.models.llm.openai_backend import repair_messages  # loads the openai client

                body["messages"] += repair_messages(*repair)
            custom_id = f"{self.owner}|{prompt_hash}"
            if any(c == custom_id for c, _ in self.requests.values()):
                custom_id += f"|{key[:12]}"
            self.requests[key] = (custom_id, body)
        self.deferred = True
        raise Deferred(f"{self.label}: in the batch", Usage())


class BatchAPIStages:
    """The stage runner of `BatchRun` with `--batch-api` (one instance per run)."""

    def __init__(self, settings, roles, poll_seconds: float = 30.0, log: Callable[[str], None] = print,
                 sleep: Callable[[float], None] = time.sleep):
        if settings.cache_mode == "replay":
            raise ValueError("--batch-api sends requests: it cannot run in replay-only mode (--cache replay)")
        here = [r for r in STAGE_ROLE.values() if settings.role(r).backend in ("local", "recorded")]
        if here:
            raise ValueError(f"--batch-api needs OpenAI-compatible endpoints; role(s) {', '.join(here)} use the "
                             "local model or its recording")
        self.poll_seconds, self.log, self.sleep = max(0.01, poll_seconds), log, sleep

    def run(self, run, method, stage: str, todo: list, ctx: Context, bar, done: Callable[[Outcome], None]) -> None:
        role_name = STAGE_ROLE.get(stage)
        role = getattr(run.roles, role_name) if role_name else None
        if role is None or getattr(role, "offline", True) or not hasattr(role, "client"):
            for i, (q, earlier) in enumerate(todo):  # no model call in this stage: computed here
                done(_compute(run, method, stage, q, earlier, ctx, i))
                if bar:
                    bar(i + 1, len(todo))
            return
        part = f"{method.name}/{stage}"
        collector = BatchCollector(role.client, role.client.settings.retries + 1)
        for entry in batch_entries(run.out, part):
            if entry.get("downloaded"):
                self._load(run, method, entry, collector, fresh=False)
        ctx = Context(method, replace(run.roles, **{role_name: online_role(role_name, collector)}), ctx.store,
                      ctx.gold, ctx.progress)
        remaining, written = list(todo), 0
        while remaining:
            waiting = []
            for i, (q, earlier) in enumerate(remaining):
                collector.begin(f"{'/'.join(run.key(q))}|{stage}|{method.hash}")
                outcome = _compute(run, method, stage, q, earlier, ctx, i)
                if collector.deferred:
                    waiting.append((q, earlier))
                    continue
                done(outcome)
                written += 1
                if bar:
                    bar(written, len(todo))
            entries = [e for e in batch_entries(run.out, part) if not e.get("downloaded")] or \
                (self._new_entries(run, method, stage, part, collector) if waiting else [])
            if not entries:  # all done, or a budget cap left nothing to submit: the rest waits for a rerun
                return
            for entry in entries:
                self._finish(run, method, part, entry, collector, bar)
            collector.requests.clear()
            remaining = waiting

    # ------------------------------------------------------------------------------------------ one batch
    def _new_entries(self, run, method, stage: str, part: str, collector: BatchCollector) -> list[dict]:
        """Write the collected requests as batch files (split at the provider's limits), recorded in run.json."""
        budget = collector.inner.budget
        if run.stopped:
            return []
        size, files = 0, [[]]
        for key, (custom_id, body) in collector.requests.items():
            if budget is not None and budget.capped:
                try:  # the line's worst case must fit the cap; what does not waits for a rerun
                    collector.held[key] = budget.reserve(collector.settings.role,
                                                         chat_prompt_tokens(collector.inner.counter, body["messages"]),
                                                         collector.settings.max_tokens)
                except BudgetExceeded as exc:
                    run.stopped = run.stopped or str(exc)
                    break
            line = request_line(custom_id, body)
            if len(files[-1]) >= MAX_LINES or size + len(line) > MAX_BYTES:
                files.append([])
                size = 0
            files[-1].append((key, line))
            size += len(line) + 1
        first = len(batch_entries(run.out, part))
        entries = []
        for n, chunk in enumerate((c for c in files if c), start=first):
            name = f"{stage}.batch-{n}.jsonl"
            path = run.out / method.name / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line + "\n" for _, line in chunk), encoding="utf-8")  # prompts only: no key
            entry = {"n": n, "file": name, "lines": len(chunk), "tag": f"{run.run_id}/{part}/{n}",
                     "keys": {collector.requests[k][0]: k for k, _ in chunk}}
            save_batch_entry(run.out, part, entry)
            entries.append(entry)
        return entries

    def _finish(self, run, method, part: str, entry: dict, collector: BatchCollector, bar) -> None:
        """Upload, submit, poll and download one batch, each step resumed where a killed run left it."""
        api = BatchClient(collector.inner.endpoint)
        if not entry.get("input_file_id"):
            data = (run.out / method.name / entry["file"]).read_bytes()
            filename = f"tmem-{entry['tag'].replace('/', '-')}.jsonl"
            entry["input_file_id"] = api.find_file(filename) or api.upload(filename, data)
            save_batch_entry(run.out, part, entry)
        if not entry.get("batch_id"):
            entry["batch_id"] = api.find_batch(entry["tag"]) or api.create(entry["input_file_id"], entry["tag"])
            entry["submitted_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
            save_batch_entry(run.out, part, entry)
            self.log(f"  {part}: batch {entry['batch_id']} submitted ({entry['lines']} requests)")
        last = None
        while True:
            status = api.status(entry["batch_id"])
            if bar and status.total:
                bar(min(status.completed + status.failed, status.total), status.total)
            if status.status != last:
                self.log(f"  {part}: batch {status.id} {status.status} ({status.completed + status.failed}/"
                         f"{status.total or entry['lines']})" + (f": {status.errors}" if status.errors else ""))
                last = status.status
            if status.done:
                break
            self.sleep(self.poll_seconds)
        out = run.out / method.name / entry["file"].replace(".jsonl", ".output.jsonl")
        files = [f for f in (status.output_file_id, status.error_file_id) if f]
        earlier = _downloaded_files(run.out)
        out.write_bytes(b"")
        for file_id in dict.fromkeys(files):  # streamed, key scrubbed; a file an earlier pass fetched: not again
            if file_id in earlier and earlier[file_id].exists() and earlier[file_id] != out:
                with out.open("ab") as dest, earlier[file_id].open("rb") as src:
                    while chunk := src.read(1 << 20):
                        dest.write(chunk)
            else:
                api.download(file_id, out, append=True)
        entry.update(status=status.status, errors=status.errors or None, downloaded=True, file_ids=files)
        self._load(run, method, entry, collector, fresh=True)
        save_batch_entry(run.out, part, entry)
        if run.spend is not None:
            run.spend.update(force=True)

    def _load(self, run, method, entry: dict, collector: BatchCollector, fresh: bool) -> None:
        """A downloaded batch's replies into the collector; a request without a reply in the files failed."""
        path = run.out / method.name / entry["file"].replace(".jsonl", ".output.jsonl")
        keys = entry.get("keys", {})
        found = read_results(path, keys) if path.exists() else {}  # line by line; a malformed line is its failure
        budget = collector.inner.budget
        for custom_id, key in keys.items():
            result = found.get(custom_id) or LineResult(None, error=f"no reply in the batch output (batch "
                                                                     f"{entry.get('status')}: {entry.get('errors')})")
            collector.results[key] = result
            collector.attempts[key] = collector.attempts.get(key, 0) + 1
            held = collector.held.pop(key, None)
            if held is not None:  # the worst case reserved at submission, replaced by what the line spent
                budget.settle(held, result.prompt_tokens, result.completion_tokens, int(result.text is not None))
            elif fresh and budget is not None and result.text is not None:  # (downloaded before: metered then)
                budget.spend(collector.settings.role, result.prompt_tokens, result.completion_tokens)


def _downloaded_files(out) -> dict:
    """{file id: the saved output holding it} of the run's batches downloaded before (a server that names the
    same output file again is not asked for it again)."""
    found = {}
    for part, entries in all_batch_entries(out).items():
        for e in entries:
            if e.get("downloaded"):
                path = out / part.split("/")[0] / e["file"].replace(".jsonl", ".output.jsonl")
                found.update({f: path for f in e.get("file_ids") or [] if isinstance(f, str)})
    return found


def _compute(run, method, stage: str, q, earlier: list, ctx: Context, index: int) -> Outcome:
    start = time.perf_counter()
    try:
        value = run.compute(method, stage, q, earlier, ctx)
        return Outcome(index, (q, earlier), value, None, time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - an error record, as the online runner writes it
        return Outcome(index, (q, earlier), None, exc, time.perf_counter() - start)


