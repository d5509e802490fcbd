"""The Settings page's connection test (tmem.models.llm.probe) against a scripted local server: a reachable
endpoint lists its models and answers one token; a failing chat call is one line without the key; no model name
asks nothing."""
import re

import pytest

from tmem.evaluation.scripted_server import FaultServer
from tmem.models.llm.probe import probe_endpoint

SECRET = "sk-probe-test-0123456789abcdef"


@pytest.fixture
def server():
    s = FaultServer()
    yield s
    s.close()


def test_a_reachable_endpoint_lists_its_models_and_answers(server):
    probe = probe_endpoint(server.base_url, "fault", "PROBE_KEY", timeout=5, env={"PROBE_KEY": SECRET})
    assert probe.ok and probe.listed == 1 and probe.model_listed is True and probe.answered_by == "fault"
    assert probe.models_s is not None and probe.chat_s is not None
    assert probe.message.startswith("reachable: fault answered in ")
    assert len(server.requests) == 1 and server.requests[0]["max_tokens"] == 1  # one one-token chat call


def test_a_model_the_server_does_not_list_is_named(server):
    probe = probe_endpoint(server.base_url, "other", "PROBE_KEY", timeout=5, env={"PROBE_KEY": SECRET})
    assert probe.ok and probe.model_listed is False
    assert probe.message.endswith("'other' is not in the server's list of 1 models")


def test_a_failing_chat_call_is_one_line_without_the_key(server):
    server.push(("status", 401, f"bad key {SECRET}"))
    probe = probe_endpoint(server.base_url, "fault", "PROBE_KEY", timeout=5, env={"PROBE_KEY": SECRET})
    assert not probe.ok and probe.chat_s is None
    assert "chat call failed" in probe.message and SECRET not in probe.message and "\n" not in probe.message


def test_no_model_name_asks_nothing(server):
    probe = probe_endpoint(server.base_url, "", "PROBE_KEY", timeout=5, env={"PROBE_KEY": SECRET})
    assert not probe.ok and probe.message == "no model name set: nothing to ask"
    assert server.requests == []


def test_a_failure_shows_its_status_and_latency_never_the_body(server):
    """Issue 44: with browser-typed endpoints allowed, a typed URL of an internal service answering 403 showed up
    to 300 characters of its body (ADMIN_TOKEN=...): a server-side request forgery that reads."""
    body = "ADMIN_TOKEN=hunter2-internal-only; role=admin"
    server.push(("status", 403, body), ("status", 403, body))
    probe = probe_endpoint(server.base_url, "fault", "PROBE_KEY", timeout=5, env={"PROBE_KEY": SECRET})
    assert not probe.ok
    assert "ADMIN_TOKEN" not in probe.message and "hunter2" not in probe.message and "admin" not in probe.message
    assert re.fullmatch(r"chat call failed: HTTP 403 after \d+ ms", probe.message), probe.message
    server.push(("bad_body",))
    probe = probe_endpoint(server.base_url, "fault", "PROBE_KEY", timeout=5, env={"PROBE_KEY": SECRET})
    assert "this is not json" not in probe.message and "chat call failed: " in probe.message


def test_the_model_that_answered_is_shown_only_when_it_is_a_model_name(server, monkeypatch):
    from tmem.evaluation import scripted_server

    def reply(request, content, usage=True):
        return scripted_server.completion(content, usage) | {"model": "ADMIN_TOKEN=hunter2 <b>internal</b>"}
    monkeypatch.setattr(server, "completion", reply)
    probe = probe_endpoint(server.base_url, "fault", "PROBE_KEY", timeout=5, env={"PROBE_KEY": SECRET})
    assert probe.ok and probe.answered_by == "fault" and "hunter2" not in probe.message
