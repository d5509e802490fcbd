"""A batch run's questions flowing through their stages (the latency floor of a run with a model server).

The records are the stage-wise ones (App. D.1: one JSONL line per question and stage, each from the record of the
stage before, resumed the same way), but a question's next stage starts as soon as its own record of the stage
before is written: its relation calls need its selection, not every window of every question. A strict barrier
(every question finishes a stage before the next starts) made each stage wait for its slowest question and left the
endpoint's slots idle at every stage boundary. Up to `jobs` (question, stage) tasks run at once; of the tasks that
are ready, later stages go first, so questions complete (and their traces can be stored) early and the number of
half-done questions stays small. With `--stage-barrier`, Ray or a batch API the run is strictly stage-wise.
"""
from __future__ import annotations

import heapq
import itertools
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from tmem.evaluation.batch.records import ERROR
from tmem.models.llm.concurrency import Outcome
from tmem.pipeline.stages import plan


@dataclass
class StageStats:
    """What a run did in one stage of one variant (summary.json's `stage_runs`)."""

    variant: str
    stage: str
    ran: int
    skipped: int
    failed: int
    blocked: int
    wall_seconds: float


def run_flow(run, method) -> None:
    """Every question of `run` through the method's stages, each stage starting when its input record exists."""
    stages = plan(method)
    ctx = run.context(method)
    expected, skipped = [0] * len(stages), [0] * len(stages)
    ready: list = []  # (-stage position, order, (question, position, earlier records))
    order = itertools.count()
    for q in run.questions:
        start, chain = run.start_position(method, q)
        for i in range(len(stages)):
            expected[i] += i >= start
            skipped[i] += i < start
        if start < len(stages):
            heapq.heappush(ready, (-start, next(order), (q, start, chain[:start])))
    bars = [run.progress(f"{method.name} / {s}", n) if run.progress and n else None
            for s, n in zip(stages, expected)]
    writers: dict[int, object] = {}
    ran, failed, blocked, finished = [0] * len(stages), [0] * len(stages), [0] * len(stages), [0] * len(stages)
    first, last = [None] * len(stages), [0.0] * len(stages)

    def compute(item) -> Outcome:
        q, i, earlier = item
        start = time.perf_counter()
        first[i] = first[i] or start
        try:
            return Outcome(i, (q, earlier), run.compute(method, stages[i], q, earlier, ctx), None,
                           time.perf_counter() - start)
        except Exception as exc:  # noqa: BLE001 - an error record, never dropped
            return Outcome(i, (q, earlier), None, exc, time.perf_counter() - start)

    pool = ThreadPoolExecutor(max_workers=max(1, run.jobs), thread_name_prefix="tmem-flow")
    pending: set[Future] = set()
    try:
        while True:
            while ready and len(pending) < max(1, run.jobs) and not run.stopped:
                pending.add(pool.submit(compute, heapq.heappop(ready)[2]))
            if not pending:
                break
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                outcome = future.result()
                i, (q, earlier) = outcome.index, outcome.item
                if i not in writers:
                    writers[i] = run.writer(method, stages[i])
                record = run.write(method, stages[i], writers[i], outcome)
                last[i] = time.perf_counter()
                if record is None:  # refused by a budget cap: no record, the run stops
                    continue
                ran[i] += 1
                failed[i] += record["status"] == ERROR
                finished[i] += 1
                if bars[i]:
                    bars[i](finished[i], expected[i])
                if not record["outputs"]:  # the stage raised: its later stages have no input
                    for later in range(i + 1, len(stages)):
                        blocked[later] += 1
                elif i + 1 < len(stages):
                    heapq.heappush(ready, (-(i + 1), next(order), (q, i + 1, earlier + [record])))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for writer in writers.values():
            writer.close()
    for i, stage in enumerate(stages):
        run.report(StageStats(method.name, stage, ran[i], skipped[i], failed[i], blocked[i],
                              (last[i] - first[i]) if first[i] else 0.0))
