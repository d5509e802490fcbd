"""Call discipline for model backends: a thread-safe rate limiter, bounded exponential backoff, a per-endpoint
circuit breaker (an unreachable server fails fast instead of costing every call its retries), and
`map_with_limit`, which keeps a fixed number of jobs in flight so that a batch of 745 questions takes about
745 / max_in_flight times the latency of one (paper App. D.1-D.2: stage-wise runs with bounded retries).

Within one question the independent calls of a stage (one evidence-utility call per window, App. J; one relation
call per child, App. K; the flat and forest answers and their judgements) go out together through `fan_out`:
results come back in input order, so a concurrent run gives the trace a sequential one gives. `InFlight` is an
endpoint's bound on requests in flight and counts the most it has seen (`peak_in_flight`, printed by `ask` and
`run`).
"""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")
Progress = Callable[[int, int], None]  # (done, total)


class RateLimiter:
    """At most `requests_per_minute` starts per rolling minute, spaced evenly (0 or None = unlimited); `pause`
    holds every caller back until a time the server named (a 429's Retry-After), whatever the rate."""

    def __init__(self, requests_per_minute: float | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._next = 0.0
        self._paused_until = 0.0
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep

    def acquire(self) -> float:
        """Block until this caller may start; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            start = max(now, self._next, self._paused_until)
            if self.interval:
                self._next = start + self.interval
        wait_s = start - now
        if wait_s > 0:
            self._sleep(wait_s)
        return wait_s

    def pause(self, seconds: float) -> None:
        """No caller starts for `seconds` from now (a later pause extends it, an earlier one changes nothing)."""
        with self._lock:
            self._paused_until = max(self._paused_until, self._clock() + max(0.0, seconds))


class TokenLimiter:
    """At most `tokens_per_minute` tokens per rolling minute (0 or None = unlimited): a bucket of that size that
    refills evenly. A caller takes what its request may cost (counted prompt tokens plus its output limit: what
    a provider counts against the limit when the request arrives) and waits while the bucket is short; callers
    are served in arrival order. A request larger than the whole bucket waits for a full bucket."""

    def __init__(self, tokens_per_minute: float | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.capacity = float(tokens_per_minute or 0.0)
        self._rate = self.capacity / 60.0
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep
        self._level, self._at = self.capacity, clock()

    def acquire(self, tokens: float) -> float:
        """Block until `tokens` may be spent; returns the seconds waited."""
        if not self.capacity:
            return 0.0
        with self._lock:
            now = self._clock()
            self._level = min(self.capacity, self._level + (now - self._at) * self._rate)
            self._at = now
            self._level -= min(float(tokens), self.capacity)
            wait_s = -self._level / self._rate if self._level < 0 else 0.0
        if wait_s > 0:
            self._sleep(wait_s)
        return wait_s


def backoff_delays(retries: int, base: float = 0.5, cap: float = 8.0, jitter: float = 0.25) -> Iterator[float]:
    """Seconds to wait before retry 1..retries: base * 2^n, capped, with +-jitter so parallel workers spread."""
    for n in range(retries):
        delay = min(cap, base * 2 ** n)
        yield max(0.0, delay * (1 + random.uniform(-jitter, jitter)))


FIRST_TRIAL = 1.0  # seconds before an open circuit's first trial on a server that has answered before


class CircuitOpen(RuntimeError):
    """The endpoint's circuit is open: the call was refused at once and nothing was sent."""


class CircuitBreaker:
    """Fail fast on an unreachable endpoint. After `failures` consecutive connection failures or timeouts (from
    any caller) the circuit opens: calls are refused at once with `CircuitOpen`. Then one trial call goes out
    (half-open) while the others are still refused; if the server answers, the circuit closes, otherwise it opens
    again. Any HTTP answer, even an error status, proves the server reachable and resets the count.
    `failures=0` disables the breaker.

    When the trial goes out: a server that never answered in this process waits `cooldown` seconds (it is most
    likely down or misconfigured: fail fast). A server that has answered before probably dropped a burst of
    connections (a restart, a proxy hiccup), so with `first_trial` set the first trial goes out after that many
    seconds, each failed trial doubling the wait up to `cooldown`; callers may `wait_for_trial` instead of failing,
    so a blip does not fail every call of a run while a server that stays down soon fails fast again."""

    def __init__(self, failures: int = 5, cooldown: float = 30.0, clock: Callable[[], float] = time.monotonic,
                 first_trial: float | None = None):
        self.failures, self.cooldown = max(0, failures), max(0.0, cooldown)
        self.first_trial = None if first_trial is None else min(max(0.0, first_trial), self.cooldown)
        self._clock = clock
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._count = 0
        self._opened_at: float | None = None
        self._delay = self.cooldown  # before the next trial, from _opened_at
        self._trial = False
        self._last = ""
        self.answered = False  # the server answered at least once since this breaker was made

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._opened_at is not None

    def allow(self, take_trial: bool = True) -> bool:
        """Return when a call may go out (True: as the half-open trial); raise CircuitOpen when it may not.
        `take_trial=False` only checks, e.g. before queueing for a slot, and leaves the trial to the sender."""
        with self._lock:
            if self._opened_at is None:
                return False
            left = self._opened_at + self._delay - self._clock()
            if left <= 0 and not self._trial:
                self._trial = take_trial
                return take_trial
            count, last = self._count, self._last
        wait = f"{left:.1f} s more, then one trial call" if left > 0 else "until the trial call in flight ends"
        raise CircuitOpen(f"endpoint unreachable: circuit open after {count} consecutive connection failures or "
                          f"timeouts (last: {last}); calls fail at once for {wait}")

    def record(self, reachable: bool, reason: str = "", trial: bool = False) -> None:
        """The outcome of a call that `allow` let through: the server answered, or it could not be reached."""
        with self._lock:
            if trial:
                self._trial = False
            if reachable:
                self._count, self._opened_at, self.answered = 0, None, True
                self._changed.notify_all()
                return
            self._count, self._last = self._count + 1, reason
            if not self.failures or not (trial or self._count >= self.failures):
                return
            probing = self.first_trial is not None and self.answered
            if self._opened_at is None:  # opens now
                self._delay = self.first_trial if probing else self.cooldown
            elif trial:  # the trial failed: open again, for twice as long when probing
                self._delay = min(self.cooldown, max(self._delay * 2, 0.01)) if probing else self.cooldown
            else:  # a call sent before the circuit opened: the circuit stays as it is
                return
            self._opened_at = self._clock()
            self._changed.notify_all()

    def wait_for_trial(self, max_wait: float) -> bool:
        """Block while the circuit is open, at most `max_wait` seconds, until it closes or a trial may go out;
        True: try again now. False at once when waiting cannot help: the server never answered, or the next trial
        is due later than `max_wait` (the caller then fails fast)."""
        if self.first_trial is None or max_wait <= 0:
            return False
        deadline = self._clock() + max_wait
        with self._lock:
            while self._opened_at is not None:
                now = self._clock()
                due = self._opened_at + self._delay
                if not self.answered or due > deadline:
                    return False
                if now >= due and not self._trial:
                    return True
                if now >= deadline:
                    return False
                # until the trial is due, or (a trial in flight) until record() tells its outcome
                self._changed.wait(max(0.001, (min(due, deadline) if now < due else deadline) - now))
            return True

    @contextmanager
    def attempt(self, unreachable: tuple[type[BaseException], ...]) -> Iterator[None]:
        """`with breaker.attempt((ConnectionError,)): send()` — refuses at once when open, then records whether an
        exception of the `unreachable` types ended the call (any other outcome counts as an answer)."""
        trial = self.allow()
        try:
            yield
        except unreachable as exc:
            self.record(False, type(exc).__name__, trial)
            raise
        except BaseException:
            self.record(True, trial=trial)
            raise
        self.record(True, trial=trial)


class InFlight:
    """A bounded semaphore for an endpoint's requests in flight that also counts them: `now`, `peak` (the most
    at once since the last `reset`) and `mean()` (the time-weighted average since then: request-seconds / seconds,
    how many slots a run kept busy on average)."""

    def __init__(self, limit: int = 8, clock: Callable[[], float] = time.monotonic):
        self.limit = max(1, limit)
        self._slots = threading.BoundedSemaphore(self.limit)
        self._lock = threading.Lock()
        self._clock = clock
        self.now = self.peak = 0
        self._since = self._changed = clock()
        self._busy = 0.0  # request-seconds since `_since`

    def _count(self, step: int) -> None:  # under the lock
        now = self._clock()
        self._busy += self.now * (now - self._changed)
        self._changed, self.now = now, self.now + step

    def __enter__(self) -> InFlight:
        self._slots.acquire()
        with self._lock:
            self._count(+1)
            self.peak = max(self.peak, self.now)
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._count(-1)
        self._slots.release()

    def mean(self) -> float:
        with self._lock:
            self._count(0)
            elapsed = self._changed - self._since
            return self._busy / elapsed if elapsed > 0 else float(self.now)

    def reset(self) -> None:
        with self._lock:
            self._count(0)
            self.peak, self._since, self._busy = self.now, self._changed, 0.0


def role_slots(role) -> InFlight | None:
    """The in-flight bound of a language-model role's endpoint (None for an offline role)."""
    slots = getattr(getattr(getattr(role, "client", None), "endpoint", None), "slots", None)
    return slots if isinstance(slots, InFlight) else None


def role_workers(role) -> int:
    """How many of a role's calls a stage may issue at once: the endpoint's bound for a language-model role; 1 for
    an offline role, which computes in this process (threads would only contend for the interpreter)."""
    slots = role_slots(role)
    return slots.limit if slots is not None and not getattr(role, "offline", True) else 1


def peak_in_flight(roles, names: Sequence[str] = ("evidence_utility", "relation", "answer", "judge")) -> int | None:
    """The most model requests that were in flight at once on any endpoint of the roles (None: no model role)."""
    slots = {id(s): s for s in (role_slots(getattr(roles, n, None)) for n in names) if s is not None}
    return max((s.peak for s in slots.values()), default=None) if slots else None


def mean_in_flight(roles, names: Sequence[str] = ("evidence_utility", "relation", "answer", "judge")) -> float | None:
    """The time-weighted mean of model requests in flight since the endpoints' last reset, summed over the roles'
    endpoints (None: no model role)."""
    slots = {id(s): s for s in (role_slots(getattr(roles, n, None)) for n in names) if s is not None}
    return sum(s.mean() for s in slots.values()) if slots else None


def reset_in_flight(roles, names: Sequence[str] = ("evidence_utility", "relation", "answer", "judge")) -> None:
    """Start the peak and the mean afresh on every endpoint of the roles (e.g. when a batch starts)."""
    for slots in {id(s): s for s in (role_slots(getattr(roles, n, None)) for n in names) if s is not None}.values():
        slots.reset()


def fan_out(fn: Callable[[T], R], items: Sequence[T], workers: int = 1,
            progress: Progress | None = None) -> list[R]:
    """[fn(item) for item in items] with up to `workers` running at once; results in input order whatever order
    they finish in. When calls fail, the first failure in input order is raised once all have ended (as a
    sequential loop would raise it, though the later items were called too)."""
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        out = []
        for done, item in enumerate(items, 1):
            out.append(fn(item))
            if progress:
                progress(done, len(items))
        return out
    outcomes = map_with_limit(fn, items, max_in_flight=workers, progress=progress)
    failed = next((o.error for o in outcomes if not o.ok), None)
    if failed is not None:
        raise failed
    return [o.value for o in outcomes]


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
                   on_result: Callable[[Outcome], None] | None = None,
                   stop: Callable[[], bool] | None = None) -> list[Outcome[T, R]]:
    """Apply `fn` to every item on a thread pool with at most `max_in_flight` running and item starts
    rate-limited; results come back in input order. An exception becomes that item's `Outcome.error`.
    `on_result` is called (from the caller's thread) as each item finishes, e.g. to append a JSONL record;
    once `stop()` is true no further item starts (those running finish; the others get no Outcome); Ctrl-C
    cancels the items not yet started."""
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
                nxt = next(todo, None) if stop is None or not stop() else None
                if nxt is not None:
                    pending.add(pool.submit(run, nxt))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [r for r in results if r is not None]

