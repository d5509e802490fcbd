"""A malformed reply is retried with a repair instruction (the reply shown back and what is wrong with it), not
with the identical request; transport faults are retried with the identical request."""
import json
from datetime import datetime, timedelta

import pytest
from llm_server import fault_settings

from tmem.evaluation.scripted_server import FaultServer
from tmem.models.factory import build_roles
from tmem.models.llm.openai_backend import REPAIR_ECHO_CHARS, repair_messages
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


def utility(server):
    settings = fault_settings(server.base_url, **{"llm.timeout": 2.0, "llm.retries": 2})
    return build_roles(settings, env={}, backoff_base=0.01).evidence_utility


def test_malformed_reply_is_retried_with_a_repair_instruction(server):
    server.push(("ok", "Sure! The KEY message is m1."), ("ok", VALID))
    result = utility(server).select(Q, 0, MSGS, [0.1, 0.2, 0.3], None)
    assert [s.message_id for s in result.selections] == ["m1"] and not result.errors
    first, second = server.requests
    assert second["messages"][:2] == first["messages"]  # the original request, unchanged
    assert second["messages"][2] == {"role": "assistant", "content": "Sure! The KEY message is m1."}
    repair = second["messages"][3]
    assert repair["role"] == "user" and "could not be used" in repair["content"]
    assert "only the JSON object" in repair["content"]


def test_a_transport_fault_is_retried_with_the_identical_request(server):
    server.push(("status", 503, "busy"), ("ok", VALID))
    utility(server).select(Q, 0, MSGS, [0.1, 0.2, 0.3], None)
    first, second = server.requests
    assert first["messages"] == second["messages"]


def test_the_echoed_reply_is_bounded():
    reply, instruction = repair_messages("x" * 10_000, "no JSON object " * 100)
    assert len(reply["content"]) == REPAIR_ECHO_CHARS and len(instruction["content"]) < 600
