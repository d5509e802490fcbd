"""Call discipline for model backends: a thread-safe rate limiter, bounded exponential backoff, and
`map_with_limit`, which keeps a fixed number of jobs in flight so that a batch of 745 questions takes about
745 / max_in_flight times the latency of one (paper App. D.1-D.2: stage-wise runs with bounded retries).
"""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")
Progress = Callable[[int, int], None]  # (done, total)


class RateLimiter:
    """At most `requests_per_minute` starts per rolling minute, spaced evenly (0 or None = unlimited)."""

    def __init__(self, requests_per_minute: float | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._next = 0.0
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep

    def acquire(self) -> float:
        """Block until this caller may start; returns the seconds waited."""
        if not self.interval:
            return 0.0
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self.interval
        wait_s = start - now
        if wait_s > 0:
            self._sleep(wait_s)
        return wait_s


def backoff_delays(retries: int, base: float = 0.5, cap: float = 8.0, jitter: float = 0.25) -> Iterator[float]:
    """Seconds to wait before retry 1..retries: base * 2^n, capped, with +-jitter so parallel workers spread."""
    for n in range(retries):
        delay = min(cap, base * 2 ** n)
        yield max(0.0, delay * (1 + random.uniform(-jitter, jitter)))


@dataclass(frozen=True)
class Outcome(Generic[T, R]):
    """One item's result: `value` on success, `error` (the exception) on failure; never silently dropped."""

    index: int
    item: T
    value: R | None = None
    error: BaseException | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def map_with_limit(fn: Callable[[T], R], items: Sequence[T], max_in_flight: int = 8,
                   requests_per_minute: float | None = None, progress: Progress | None = None,
                   on_result: Callable[[Outcome], None] | None = None) -> list[Outcome[T, R]]:
    """Apply `fn` to every item on a thread pool with at most `max_in_flight` running and item starts
    rate-limited; results come back in input order. An exception becomes that item's `Outcome.error`.
    `on_result` is called (from the caller's thread) as each item finishes, e.g. to append a JSONL record;
    Ctrl-C cancels the items not yet started."""
    items = list(items)
    limiter = RateLimiter(requests_per_minute)
    results: list[Outcome | None] = [None] * len(items)

    def run(index: int) -> Outcome:
        limiter.acquire()
        start = time.perf_counter()
        try:
            return Outcome(index, items[index], fn(items[index]), None, time.perf_counter() - start)
        except Exception as exc:  # noqa: BLE001 - recorded per item, never dropped
            return Outcome(index, items[index], None, exc, time.perf_counter() - start)

    pool = ThreadPoolExecutor(max_workers=max(1, max_in_flight), thread_name_prefix="tmem-call")
    pending: set[Future] = set()
    todo = iter(range(len(items)))
    done_count = 0
    try:
        for index in todo:
            pending.add(pool.submit(run, index))
            if len(pending) >= max_in_flight:
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                outcome = future.result()
                results[outcome.index] = outcome
                done_count += 1
                if on_result:
                    on_result(outcome)
                if progress:
                    progress(done_count, len(items))
                nxt = next(todo, None)
                if nxt is not None:
                    pending.add(pool.submit(run, nxt))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [r for r in results if r is not None]

