"""Faults (paper App. D.2): timeouts, 429/5xx, malformed bodies and replies, unknown ids. Transient faults are
retried with backoff; a persistent one becomes an error record with a marked fallback; nothing hangs."""
import json
import time
from datetime import datetime, timedelta

import pytest
from golden import GOLD, MESSAGES, QUESTION
from llm_server import FaultServer, fault_settings, scripted_reply

from tmem.config import TMemConfig
from tmem.models.base import AnswerEvidence
from tmem.models.factory import build_roles
from tmem.pipeline import run_question
from tmem.prompts import answer_prompt, judge_prompt
from tmem.scope import Scope
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
    start = time.monotonic()
    result = utility(server).select(Q, 7, MSGS, [0.1, 0.2, 0.3], None)
    assert time.monotonic() - start < 5  # 3 attempts x 0.4 s timeout + tiny backoff
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
    rel = roles.relation.choose_parent(Q, MSGS[2], MSGS[:2], None)
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
    start = time.monotonic()
    trace = run_question(QUESTION, Scope("g", "golden", MESSAGES), config, roles, corpus="g", gold=GOLD)
    assert time.monotonic() - start < 60
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
