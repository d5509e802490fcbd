"""Faults (paper App. D.2): timeouts, 429/5xx, malformed bodies and replies, unknown ids. Transient faults are
retried with backoff; a persistent one becomes an error record with a marked fallback; nothing hangs."""
import json
import time
from datetime import datetime, timedelta

import pytest
from llm_server import fault_settings
from waiting import finishes

from tmem.config import TMemConfig
from tmem.demo.golden import GOLD, MESSAGES, QUESTION
from tmem.evaluation.scripted_server import FaultServer, scripted_reply
from tmem.models.base import AnswerEvidence
from tmem.models.factory import build_roles
from tmem.pipeline.run import run_question
from tmem.pipeline.scope import Scope
from tmem.prompts import answer_prompt, judge_prompt
from tmem.types import Message, Question

T0 = datetime(2025, 3, 1, 9)
Q = Question("q1", "s", "When is the launch?", "u")
MSGS = [Message(f"m{i}", "s", f"message {i}", T0 + timedelta(hours=i), topic="t") for i in range(3)]
VALID = json.dumps({"selected": [{"message_id": "m1", "label": "KEY", "reason": "r"}]})


@pytest.fixture
def server():
    s = FaultServer()
    yield s
    s.close()


def utility(server, **values):
    values = {"llm.timeout": 0.4, "llm.retries": 2, **values}
    return build_roles(fault_settings(server.base_url, **values), env={}, backoff_base=0.01).evidence_utility


@pytest.mark.parametrize("fault", [("sleep", 1.5), ("status", 500, "boom"), ("status", 503, "busy"),
                                   ("status", 429, "slow down"), ("bad_body",), ("ok", "not json at all"),
                                   ("ok", ""), ("ok", '{"selected": "m1"}')])
def test_transient_fault_is_retried_then_succeeds(server, fault):
    server.push(fault, ("ok", VALID))
    result = utility(server).select(Q, 0, MSGS, [0.1, 0.2, 0.3], None)
    assert [s.message_id for s in result.selections] == ["m1"] and not result.errors
    assert len(server.requests) == 2


@pytest.mark.parametrize("fault,expected", [(("sleep", 1.5), "APITimeoutError"), (("status", 500, "boom"), "HTTP 500"),
                                            (("ok", "never json"), "malformed reply"), (("bad_body",), "")])
def test_persistent_fault_becomes_an_error_record_in_bounded_time(server, fault, expected):
    server.default = fault
    # bounded: 3 attempts, each ended by the 0.4 s timeout or the fault (a hang fails at the one wait timeout)
    result = finishes(lambda: utility(server).select(Q, 7, MSGS, [0.1, 0.2, 0.3], None), "3 failed attempts")
    assert result.selections == () and len(server.requests) == 3
    [error] = result.errors
    assert error.stage == "evidence_utility" and error.fallback == "window contributes nothing"
    assert "window 7" in error.message and "failed after 3 attempts" in error.message and expected in error.message


def test_client_errors_are_not_retried(server):
    server.default = ("status", 401, "invalid api key")
    result = utility(server).select(Q, 0, MSGS, [0.1, 0.2, 0.3], None)
    assert len(server.requests) == 1 and "not retryable" in result.errors[0].message
    assert "HTTP 401" in result.errors[0].message


def test_unknown_message_id_is_dropped_and_recorded(server):
    server.push(("ok", json.dumps({"selected": [{"message_id": "Msg_123", "label": "KEY", "reason": "prompt"}]})))
    result = utility(server).select(Q, 0, MSGS, [0.1, 0.2, 0.3], None)
    assert result.selections == ()
    assert "unknown message id 'Msg_123'" in result.errors[0].message and result.errors[0].fallback == "ignored"


def test_every_role_has_a_marked_fallback(server):
    server.default = ("status", 500, "down")
    roles = build_roles(fault_settings(server.base_url, **{"llm.timeout": 0.4, "llm.retries": 1}), env={},
                        backoff_base=0.01)
    rel = roles.relation.label_pairs(Q, MSGS[2], MSGS[:2], None)
    ans = roles.answer.answer(Q, answer_prompt("flat", None, Q.text, ""), AnswerEvidence(()), None)
    jud = roles.judge.judge(Q, "x", "y", judge_prompt(Q.text, "x", "y"))
    assert rel.choices == () and rel.errors[0].fallback == "child becomes a root"
    assert ans.text == "" and ans.errors[0].fallback == "empty answer"
    assert jud.correct is False and jud.errors[0].fallback == "counted as incorrect"


def test_failed_attempts_still_count_their_tokens(server):
    server.push(("ok", "garbage"), ("ok", "garbage again"), ("ok", VALID))
    result = utility(server).select(Q, 0, MSGS, [0.1, 0.2, 0.3], None)
    assert result.usage.calls == 3 and result.usage.prompt_tokens == 33  # 11 per reply, from the server


@pytest.mark.parametrize("fault", [("status", 500, "boom"), ("sleep", 1.0), ("ok", "not json"),
                                   ("ok", json.dumps({"selected": [{"message_id": "nope", "label": "KEY"}]}))])
def test_pipeline_finishes_with_errors_recorded(server, fault):
    server.default = fault
    settings = fault_settings(server.base_url, **{"llm.timeout": 0.3, "llm.retries": 1})
    roles = build_roles(settings, env={}, backoff_base=0.01)
    config = TMemConfig().with_("retrieval", k=8).with_("discovery", top_n=5).with_("structuring", max_candidates=3)
    trace = finishes(lambda: run_question(QUESTION, Scope("g", "golden", MESSAGES), config, roles, corpus="g",
                                          gold=GOLD), "the pipeline over a faulty server")
    assert [s.name for s in trace.stages][-2:] == ["answer", "judge"]
    assert trace.errors, "faults must be visible in the trace"
    if fault[0] != "ok":  # a text reply is a valid answer; JSON faults hit discovery and structuring only
        assert {e.fallback for e in trace.errors} >= {"empty answer", "counted as incorrect"}
        assert trace.verdict("forest").correct is False


def test_scripted_server_runs_a_clean_pipeline(server):
    server.default = ("reply", scripted_reply)
    roles = build_roles(fault_settings(server.base_url), env={}, backoff_base=0.01)
    config = TMemConfig().with_("retrieval", k=8).with_("discovery", top_n=5).with_("structuring", max_candidates=3)
    trace = run_question(QUESTION, Scope("g", "golden", MESSAGES), config, roles, corpus="g", gold=GOLD)
    assert not trace.errors and trace.verdict("forest").correct
    assert trace.stage("structuring").usage.source == "server" and trace.stage("structuring").usage.calls > 0


# ------------------------------------------------------------------------------- circuit breaker: fail fast
def closed_port_url() -> str:
    from llm_server import free_port

    return f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there: every connection is refused


def test_an_unreachable_server_fails_fast_once_its_circuit_opens():
    settings = fault_settings(closed_port_url(), **{"llm.retries": 3, "concurrency.circuit_failures": 3,
                                                    "concurrency.circuit_cooldown": 60})
    role = build_roles(settings, env={}, backoff_base=0.01).evidence_utility
    first = role.select(Q, 0, MSGS, [0.1, 0.2, 0.3], None)
    [error] = first.errors  # attempts 1-3 are refused, the third opens the circuit, the 4th is not sent
    assert "APIConnectionError" in error.message and "fail-fast: " in error.message
    assert "not sent: endpoint unreachable: circuit open after 3 consecutive" in error.message
    slept = []  # the client's backoff waits, recorded instead of slept
    role.client.sleep = slept.append
    later = [role.select(Q, w, MSGS, [0.1, 0.2, 0.3], None) for w in range(20)]
    assert slept == []  # no backoff, and (calls == 0) no connection attempt
    assert all(r.selections == () and "circuit open" in r.errors[0].message and r.usage.calls == 0 for r in later)
    assert all(r.errors[0].fallback == "window contributes nothing" for r in later)


def test_a_pipeline_against_a_closed_port_finishes_in_seconds_with_default_settings():
    """Defaults (3 retries, 0.5 s backoff, circuit after 5 failures): without the breaker every one of the ~20
    calls would spend ~3.5 s of backoff."""
    roles = build_roles(fault_settings(closed_port_url(), **{"llm.retries": 3}), env={})
    slept = []  # every role's backoff waits (one endpoint, one breaker), recorded instead of slept
    for role in (roles.evidence_utility, roles.relation, roles.answer, roles.judge):
        role.client.sleep = slept.append
    config = TMemConfig().with_("retrieval", k=8).with_("discovery", top_n=5).with_("structuring", max_candidates=3)
    trace = run_question(QUESTION, Scope("g", "golden", MESSAGES), config, roles, corpus="g", gold=GOLD)
    # the first call's 3 backoffs (0.5 + 1 + 2 s, jitter up to +25 %); the 5th refusal opens the circuit and no
    # later call waits (without the breaker: ~3.5 s for each of ~20 calls)
    assert len(slept) == 3 and sum(slept) <= 3.5 * 1.25
    assert {e.fallback for e in trace.errors} >= {"empty answer", "counted as incorrect", "child becomes a root"}
    assert sum("circuit open" in e.message for e in trace.errors) >= len(trace.errors) - 2


def test_timeouts_open_the_circuit_and_a_trial_call_closes_it(server):
    server.default = ("sleep", 1.0)
    role = utility(server, **{"llm.timeout": 0.2, "llm.retries": 0, "concurrency.circuit_failures": 2,
                              "concurrency.circuit_cooldown": 0.5})
    for _ in range(2):
        assert "APITimeoutError" in role.select(Q, 0, MSGS, [0.1, 0.2, 0.3], None).errors[0].message
    refused = role.select(Q, 0, MSGS, [0.1, 0.2, 0.3], None)
    assert "circuit open after 2 consecutive" in refused.errors[0].message and len(server.requests) == 2
    server.default = ("ok", VALID)  # the server recovers
    time.sleep(0.6)
    trial = role.select(Q, 0, MSGS, [0.1, 0.2, 0.3], None)
    assert [s.message_id for s in trial.selections] == ["m1"] and len(server.requests) == 3
    assert not role.select(Q, 0, MSGS, [0.1, 0.2, 0.3], None).errors and len(server.requests) == 4


def test_http_errors_prove_the_server_reachable_and_never_open_the_circuit(server):
    server.default = ("status", 500, "boom")
    role = utility(server, **{"llm.retries": 0, "concurrency.circuit_failures": 2})
    results = [role.select(Q, 0, MSGS, [0.1, 0.2, 0.3], None) for _ in range(5)]
    assert len(server.requests) == 5 and all("HTTP 500" in r.errors[0].message for r in results)
    assert not any("circuit" in r.errors[0].message for r in results)


def test_the_breaker_can_be_turned_off():
    settings = fault_settings(closed_port_url(), **{"llm.retries": 0, "concurrency.circuit_failures": 0})
    role = build_roles(settings, env={}).evidence_utility
    results = [role.select(Q, 0, MSGS, [0.1, 0.2, 0.3], None) for _ in range(8)]
    assert all("APIConnectionError" in r.errors[0].message and "circuit" not in r.errors[0].message
               for r in results)


def test_an_unreachable_embedding_server_trips_its_circuit_and_discovery_falls_back_at_once():
    url = closed_port_url()
    settings = fault_settings(url, **{"llm.backend": "offline", "embedder.kind": "openai", "embedder.model": "e",
                                      "embedder.base_url": url})
    roles = build_roles(settings, env={})
    config = TMemConfig().with_("retrieval", k=8).with_("discovery", top_n=5)
    traces = [run_question(QUESTION, Scope("g", "golden", MESSAGES), config, roles, corpus="g") for _ in range(4)]
    fallbacks = [[e for e in t.errors if e.stage == "discovery" and "lexical" in e.fallback] for t in traces]
    assert all(len(f) == 1 for f in fallbacks)
    # the third and fourth runs are refused by the open circuit: no connection attempt, no wait
    assert all("(CircuitOpen)" in f[0].message for f in fallbacks[2:])


def test_calls_queued_for_a_slot_are_refused_once_the_circuit_opens(server):
    from concurrent.futures import ThreadPoolExecutor

    server.default = ("sleep", 1.0)
    role = utility(server, **{"llm.timeout": 0.3, "llm.retries": 0, "concurrency.max_in_flight": 1,
                              "concurrency.circuit_failures": 1})
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda w: role.select(Q, w, MSGS, [0.1, 0.2, 0.3], None), range(4)))
    assert len(server.requests) == 1  # one timeout, not four in a row: the queued calls were never sent
    assert sum("circuit open" in r.errors[0].message for r in results) == 3


def test_a_burst_of_dropped_connections_half_opens_the_circuit_instead_of_failing_the_rest_of_the_run(server):
    """A server that was answering drops a burst of connections (a restart, a proxy hiccup): the circuit opens
    after 5 in a row, but its first trial goes out after ~1 s (doubling while trials fail) and the refused calls
    wait for it, so the run's remaining calls succeed instead of failing at once for the whole 30 s cool-down."""
    from tmem.models.llm.concurrency import fan_out

    server.default = ("ok", VALID)
    server.push(*[("ok", VALID)] * 3, *[("drop",)] * 6)  # the 5th drop opens the circuit, the 6th fails a trial
    role = utility(server, **{"llm.timeout": 2, "llm.retries": 6, "concurrency.max_in_flight": 2})
    breaker = role.client.endpoint.breaker
    assert (breaker.failures, breaker.cooldown) == (5, 30.0)  # the defaults
    opened, record = [], breaker.record

    def spy(*args, **kwargs):
        record(*args, **kwargs)
        opened.append(breaker.is_open)
    breaker.record = spy
    results = fan_out(lambda w: role.select(Q, w, MSGS, [0.1, 0.2, 0.3], None), range(20), workers=2)
    assert any(opened) and not breaker.is_open  # it did open, and it closed again
    assert [r.errors for r in results] == [()] * 20
    assert all([s.message_id for s in r.selections] == ["m1"] for r in results)
    # two trials (after ~1 s and ~2 s), not the 30 s cool-down: a refused call waits CIRCUIT_WAIT (8 s) at most
    # for a trial, so with the cool-down the calls behind the burst would have failed (errors above are none)
    assert len(server.requests) == 3 + 6 + 17


def test_a_server_that_never_answered_still_fails_fast_after_the_breaker_change():
    settings = fault_settings(closed_port_url(), **{"llm.retries": 3})  # default cool-down 30 s, 5 failures
    role = build_roles(settings, env={}, backoff_base=0.01).evidence_utility
    role.select(Q, 0, MSGS, [0.1, 0.2, 0.3], None)  # opens the circuit
    slept = []
    role.client.sleep = slept.append
    later = [role.select(Q, w, MSGS, [0.1, 0.2, 0.3], None) for w in range(10)]
    assert slept == [] and all("circuit open" in r.errors[0].message and r.usage.calls == 0 for r in later)


def test_a_429_retry_after_pauses_every_call_to_the_endpoint(server):
    """One call's 429 with Retry-After: 1 holds back the other callers of the endpoint too, not only its own
    retry (the limit is the endpoint's, shared by every call)."""
    from concurrent.futures import ThreadPoolExecutor

    server.default = ("ok", VALID)
    server.push(("status", 429, "rate limit reached for tokens", {"retry-after": "1"}))
    role = utility(server, **{"llm.timeout": 2})
    first = role.select(Q, 0, MSGS, [0.1, 0.2, 0.3], None)  # the 429, then the retry after >= 1 s
    assert not first.errors and len(server.requests) == 2
    server.push(("status", 429, "slow down", {"retry-after-ms": "800"}))
    start = time.monotonic()
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(role.select, Q, 0, MSGS, [0.1, 0.2, 0.3], None)]
        time.sleep(0.3)  # the 429 has arrived: the next calls start after the pause, not at once
        futures += [pool.submit(role.select, Q, w, MSGS, [0.1, 0.2, 0.3], None) for w in (1, 2)]
        results = [f.result() for f in futures]
    assert all(not r.errors for r in results) and time.monotonic() - start >= 0.75


def test_a_token_limit_spaces_requests_by_their_counted_tokens(server):
    from tmem.models.llm.tokens import chat_prompt_tokens, default_token_counter

    server.default = ("ok", VALID)
    role = utility(server, **{"llm.max_tokens": 50, "concurrency.tokens_per_minute": 3000})  # 50 tokens a second
    counted = chat_prompt_tokens(default_token_counter(), [{"content": "x"}] * 2)  # the chat format's overhead
    assert counted == 3 + 2 * 3 + 2 * default_token_counter().count("x")
    waits = []  # the token bucket's waits, recorded instead of slept
    role.client.endpoint.tokens._sleep = waits.append
    for w in range(3):
        role.select(Q, w, MSGS, [0.1, 0.2, 0.3], None)
    cost = role.client.endpoint.tokens.capacity - role.client.endpoint.tokens._level  # what 3 requests took
    assert cost > 3 * 50  # prompt tokens counted on top of the output limits
    assert waits == []  # the first minute's bucket covers them
