"""map_with_limit, the rate limiter and backoff; the backend is thread-safe and parallel calls overlap."""
import json
import threading
import time
from datetime import datetime

import pytest
from llm_server import fault_settings
from waiting import scaled

from tmem.evaluation.scripted_server import FaultServer
from tmem.models.factory import build_roles
from tmem.models.llm.concurrency import (
    CircuitBreaker,
    CircuitOpen,
    RateLimiter,
    TokenLimiter,
    backoff_delays,
    map_with_limit,
)
from tmem.types import Message, Question


class Gauge:
    """Counts calls running at once and remembers the peak; `busy(seconds)` is one such call, `together(n)` one
    that returns only once n calls run at the same time (overlap shown as a state: a busy machine delays it, never
    breaks it; calls that never overlap break the barrier after its scaled timeout)."""

    def __init__(self):
        self.running, self.peak, self._lock = 0, 0, threading.Lock()
        self._barriers: dict[int, threading.Barrier] = {}

    def busy(self, seconds: float) -> None:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        time.sleep(seconds)
        with self._lock:
            self.running -= 1

    def together(self, n: int) -> None:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            barrier = self._barriers.setdefault(n, threading.Barrier(n, timeout=scaled(30)))
        try:
            barrier.wait()
        finally:
            with self._lock:
                self.running -= 1


def test_results_come_back_in_input_order_with_errors_captured():
    def fn(x):
        time.sleep(0.01 * (5 - x % 5))
        if x == 3:
            raise ValueError("three")
        return x * x

    out = map_with_limit(fn, list(range(10)), max_in_flight=4)
    assert [o.index for o in out] == list(range(10))
    assert [o.value for o in out if o.ok] == [x * x for x in range(10) if x != 3]
    assert isinstance(out[3].error, ValueError) and not out[3].ok


def test_no_more_than_max_in_flight_run_at_once():
    gauge = Gauge()
    out = map_with_limit(lambda _: gauge.together(6), range(24), max_in_flight=6)
    assert all(o.ok for o in out)  # four rounds of 6 calls running at once: overlapped, not serial
    assert gauge.peak == 6  # and never a 7th beside them


def test_progress_and_on_result_are_called_per_item():
    seen, done = [], []
    map_with_limit(lambda x: x, range(5), 2, progress=lambda d, n: done.append((d, n)), on_result=seen.append)
    assert done[-1] == (5, 5) and len(done) == 5 and sorted(o.index for o in seen) == list(range(5))


def test_rate_limiter_spaces_starts_evenly():
    now, slept = [0.0], []

    def sleep(s):
        slept.append(s)
        now[0] += s

    limiter = RateLimiter(120, clock=lambda: now[0], sleep=sleep)  # one start every 0.5 s
    for _ in range(4):
        limiter.acquire()
    assert slept == pytest.approx([0.5, 0.5, 0.5])
    assert RateLimiter(0).acquire() == 0.0


def test_map_with_limit_honours_requests_per_minute():
    starts, before = [], time.monotonic()
    map_with_limit(lambda x: starts.append(time.monotonic()), range(4), max_in_flight=4, requests_per_minute=600)
    # the n-th start comes n x 0.1 s after the call at the earliest (a busy machine only makes it later)
    assert [round(t - before, 3) >= 0.1 * n - 0.001 for n, t in enumerate(sorted(starts))] == [True] * 4


def test_backoff_doubles_and_is_bounded():
    delays = list(backoff_delays(6, base=0.5, cap=4.0, jitter=0.0))
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert list(backoff_delays(0)) == []


def test_backend_calls_overlap_across_threads():
    gauge = Gauge()  # the server answers a request only once all 8 are in it at the same time
    server = FaultServer(default=("reply", lambda body: (gauge.together(8), json.dumps({"selected": []}))[1]))
    try:
        settings = fault_settings(server.base_url, **{"concurrency.max_in_flight": 8, "llm.timeout": scaled(60)})
        roles = build_roles(settings, env={})
        msgs = [Message("a", "s", "x", datetime(2025, 1, 1))]
        questions = [Question(f"q{i}", "s", f"question {i}") for i in range(8)]
        out = map_with_limit(lambda q: roles.evidence_utility.select(q, 0, msgs, [0.1], None), questions, 8)
        assert all(o.ok and not o.value.errors for o in out)  # 8 calls overlapped (serial ones break the barrier)
        assert gauge.peak == 8 and len(server.requests) == 8
    finally:
        server.close()


def test_endpoint_bounds_requests_in_flight():
    gauge = Gauge()

    def reply(body):
        gauge.busy(0.1)
        return json.dumps({"selected": []})

    server = FaultServer(default=("reply", reply))
    try:
        roles = build_roles(fault_settings(server.base_url, **{"concurrency.max_in_flight": 2}), env={})
        msgs = [Message("a", "s", "x", datetime(2025, 1, 1))]
        qs = [Question(f"q{i}", "s", f"question {i}") for i in range(6)]
        map_with_limit(lambda q: roles.evidence_utility.select(q, 0, msgs, [0.1], None), qs, 6)
        assert gauge.peak <= 2
    finally:
        server.close()


def test_roles_on_one_endpoint_share_its_bound_whatever_their_timeouts():
    """One semaphore per endpoint (base URL + key variable): a per-role timeout must not add a second one."""
    gauge = Gauge()

    def reply(body):
        gauge.busy(0.1)
        return json.dumps({"selected": [], "choices": []})

    server = FaultServer(default=("reply", reply))
    try:
        settings = fault_settings(server.base_url, **{"concurrency.max_in_flight": 2, "roles.relation.timeout": 5,
                                                      "roles.evidence_utility.timeout": 7})
        roles = build_roles(settings, env={})
        assert roles.relation.client.endpoint is roles.evidence_utility.client.endpoint is roles.judge.client.endpoint
        msgs = [Message("a", "s", "x", datetime(2025, 1, 1)), Message("b", "s", "y", datetime(2025, 1, 2))]
        calls = [lambda q: roles.evidence_utility.select(q, 0, msgs[:1], [0.1], None),
                 lambda q: roles.relation.label_pairs(q, msgs[1], msgs[:1], None)]
        qs = [Question(f"q{i}", "s", f"question {i}") for i in range(8)]
        out = map_with_limit(lambda i: calls[i % 2](qs[i]), range(8), 8)
        assert all(o.ok and not o.value.errors for o in out) and len(server.requests) == 8
        assert gauge.peak == 2
    finally:
        server.close()


def test_each_role_keeps_its_own_timeout_on_a_shared_endpoint():
    server = FaultServer(default=("sleep", 0.6))
    try:
        settings = fault_settings(server.base_url, **{"llm.retries": 0, "llm.timeout": 3,
                                                      "roles.relation.timeout": 0.2})
        roles = build_roles(settings, env={})
        assert roles.relation.client.endpoint is roles.evidence_utility.client.endpoint
        msgs = [Message("a", "s", "x", datetime(2025, 1, 1)), Message("b", "s", "y", datetime(2025, 1, 2))]
        slow = roles.relation.label_pairs(Question("q", "s", "?"), msgs[1], msgs[:1], None)
        assert "APITimeoutError" in slow.errors[0].message
        patient = roles.evidence_utility.select(Question("q", "s", "?"), 0, msgs[:1], [0.1], None)
        assert patient.usage.source == "server"  # the reply came back: 0.6 s is within its 3 s
    finally:
        server.close()


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_circuit_breaker_opens_after_consecutive_failures_then_lets_one_trial_through():
    clock = FakeClock()
    breaker = CircuitBreaker(failures=3, cooldown=10, clock=clock)
    for _ in range(2):
        assert breaker.allow() is False
        breaker.record(False, "APIConnectionError")
    breaker.record(True)  # an answer resets the count
    for _ in range(3):
        breaker.allow()
        breaker.record(False, "APITimeoutError")
    with pytest.raises(CircuitOpen, match=r"after 3 consecutive .* \(last: APITimeoutError\).* 10.0 s more"):
        breaker.allow()
    clock.now = 10.0
    assert breaker.allow() is True  # the half-open trial
    with pytest.raises(CircuitOpen, match="until the trial call in flight ends"):
        breaker.allow()  # only one trial at a time
    breaker.record(False, "APIConnectionError", trial=True)  # the trial failed: another full cool-down
    clock.now = 19.0
    with pytest.raises(CircuitOpen):
        breaker.allow()
    clock.now = 20.0
    assert breaker.allow() is True
    breaker.record(True, trial=True)
    assert not breaker.is_open and breaker.allow() is False


def test_circuit_breaker_attempt_counts_only_unreachable_errors():
    breaker = CircuitBreaker(failures=2, cooldown=60)
    for _ in range(5):  # an HTTP error means the server answered
        with pytest.raises(ValueError), breaker.attempt((ConnectionError,)):
            raise ValueError("HTTP 500")
    assert not breaker.is_open
    for _ in range(2):
        with pytest.raises(ConnectionError), breaker.attempt((ConnectionError,)):
            raise ConnectionError("refused")
    sent = []
    with pytest.raises(CircuitOpen), breaker.attempt((ConnectionError,)):
        sent.append(1)
    assert sent == [] and breaker.is_open
    assert CircuitBreaker(failures=0).allow() is False


# ------------------------------------------------------------------------ a batch: concurrent == sequential
def _without_timings(value):
    """A record without what legitimately differs between two runs: timings, ids and the run's identity."""
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items()
                if k not in ("seconds", "record_id", "parent_id", "created_at", "run_id", "backend")}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


@pytest.mark.integration
def test_a_concurrent_batch_gives_the_sequential_records_and_reports_calls_in_flight(tmp_path, monkeypatch, capsys):
    """Questions in flight and calls in flight (replies arriving in shuffled order) change nothing in the records
    or the figures: every record is placed by question and stage, every call's reply by window, child and
    presentation. The summary prints the most and the mean calls in flight."""
    import random

    from tmem.cli import main as cli
    from tmem.demo import generate
    from tmem.evaluation.batch.records import read_records
    from tmem.evaluation.scripted_server import scripted_reply
    from tmem.store import Store

    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    monkeypatch.setenv("TMEM_TEST_API_KEY", "sk-test")
    db = tmp_path / "mini.duckdb"
    store = Store(db)
    store.replace_corpus("mini", generate(7, 600, 1), format="demo")
    store.close()
    server = FaultServer(default=("reply", lambda body: (time.sleep(random.uniform(0, 0.03)),
                                                         scripted_reply(body))[1]))
    flags = ["--llm-model", "fault-model", "--llm-base-url", server.base_url, "--llm-api-key-env",
             "TMEM_TEST_API_KEY", "--llm-timeout", "10", "--cache", "off", "--embedder", "lexical"]
    runs = {}
    try:
        for name, jobs, bound in (("sequential", 1, 1), ("concurrent", 5, 16)):
            out = tmp_path / name
            assert cli(["run", "--db", str(db), "--corpus", "mini", "--out", str(out), "--quiet", "--variants",
                        "full", "--limit", "5", "--jobs", str(jobs), "--max-in-flight", str(bound), "--no-store",
                        *flags]) == 0
            printed = capsys.readouterr().out
            summary = json.loads((out / "summary.json").read_text())
            records = {stage: {tuple(k): _without_timings(r) for k, r in read_records(
                out / "full" / f"{stage}.jsonl").latest.items()}
                for stage in ("seed_retrieval", "discovery", "structuring", "compression", "answer", "judge")}
            runs[name] = (summary, records, printed)
    finally:
        server.close()
    (seq, seq_records, _), (con, con_records, printed) = runs["sequential"], runs["concurrent"]
    assert con_records == seq_records and len(seq_records["judge"]) == 5
    for key in ("accuracy", "accuracy_flat", "recall", "mean_evidence_messages"):
        assert con["variants"]["full"][key] == seq["variants"]["full"][key]
    assert seq["peak_calls_in_flight"] == 1 and 0 < seq["mean_calls_in_flight"] <= 1
    assert 1 < con["peak_calls_in_flight"] <= 16 and 1 < con["mean_calls_in_flight"] <= con["peak_calls_in_flight"]
    assert f"Calls in flight: at most {con['peak_calls_in_flight']} at once, " in printed
    assert "on average over the run" in printed


def test_in_flight_mean_is_request_seconds_per_second_since_the_reset():
    from tmem.models.llm.concurrency import InFlight

    now = [0.0]
    slots = InFlight(4, clock=lambda: now[0])
    first, second = slots.__enter__(), None  # t = 0: one request
    now[0] = 1.0
    second = slots.__enter__()  # t = 1: two
    now[0] = 2.0
    first.__exit__(None, None, None)  # t = 2: one
    now[0] = 3.0
    second.__exit__(None, None, None)  # t = 3: none
    now[0] = 4.0
    assert slots.mean() == pytest.approx((1 + 2 + 1) / 4) and slots.peak == 2
    slots.reset()
    now[0] = 6.0
    assert slots.mean() == 0.0 and slots.peak == 0


def test_a_breaker_on_a_server_that_answered_probes_soon_and_backs_off_while_trials_fail():
    clock = FakeClock()
    breaker = CircuitBreaker(failures=2, cooldown=10, clock=clock, first_trial=1.0)
    breaker.record(True)  # the server answered once
    for _ in range(2):
        breaker.record(False, "APIConnectionError")
    with pytest.raises(CircuitOpen, match="1.0 s more"):
        breaker.allow()
    assert breaker.wait_for_trial(0.5) is False  # the trial is due later than the caller may wait
    clock.now = 1.0
    assert breaker.wait_for_trial(5) is True and breaker.allow() is True  # the first trial, after 1 s
    breaker.record(False, "APIConnectionError", trial=True)
    with pytest.raises(CircuitOpen, match="2.0 s more"):  # failed trials double the wait ...
        breaker.allow()
    for now in (3.0, 7.0, 15.0):
        clock.now = now
        assert breaker.allow() is True
        breaker.record(False, "APIConnectionError", trial=True)
    with pytest.raises(CircuitOpen, match="10.0 s more"):  # ... up to the cool-down
        breaker.allow()
    clock.now = 25.0
    assert breaker.allow() is True
    breaker.record(True, trial=True)
    assert not breaker.is_open
    never = CircuitBreaker(failures=1, cooldown=10, clock=clock, first_trial=1.0)
    never.record(False, "APIConnectionError")  # never answered: the full cool-down, and waiting cannot help
    with pytest.raises(CircuitOpen, match="10.0 s more"):
        never.allow()
    assert never.wait_for_trial(60) is False


def test_token_limiter_holds_requests_to_the_tokens_per_minute():
    now, slept = [0.0], []

    def sleep(s):
        slept.append(s)
        now[0] += s

    limiter = TokenLimiter(6000, clock=lambda: now[0], sleep=sleep)  # 100 tokens a second
    assert limiter.acquire(5000) == 0.0 and limiter.acquire(1000) == 0.0  # the full bucket
    assert limiter.acquire(500) == pytest.approx(5.0)  # 500 tokens short: 5 s
    assert limiter.acquire(100_000) == pytest.approx(60.0)  # larger than the bucket: waits for a full bucket
    assert TokenLimiter(0).acquire(10**9) == 0.0


def test_a_pause_holds_every_caller_until_it_ends():
    now, slept = [0.0], []

    def sleep(s):
        slept.append(s)
        now[0] += s

    limiter = RateLimiter(0, clock=lambda: now[0], sleep=sleep)
    limiter.pause(2.5)
    limiter.pause(1.0)  # an earlier end changes nothing
    assert limiter.acquire() == pytest.approx(2.5) and limiter.acquire() == 0.0
