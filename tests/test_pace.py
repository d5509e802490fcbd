"""Timeouts of the local backend that follow the server (tmem/models/local/pace.py): the speed measured at start with
a tiny request, each call's timeout from its prompt length within a floor and a cap, the speed followed after each
reply; a call that still times out is an error that names the role, the child and the fallback, never a silent root.

The server is tmem.evaluation.scripted_server's, standing in for llama.cpp on 127.0.0.1 (its /health and
/v1/models answer as llama.cpp's do, so the backend reuses it as its server): it replies at a set speed, with
llama.cpp's `timings`, and can stall on one child's relation call."""
from __future__ import annotations

import pytest

from tmem.config import TMemConfig
from tmem.demo.golden import GOLD, MESSAGES, QUESTION
from tmem.evaluation.scripted_server import FaultServer, scripted_reply
from tmem.models.factory import build_roles
from tmem.models.llm.openai_backend import request_timeout
from tmem.models.llm.tokens import chat_prompt_tokens, default_token_counter
from tmem.models.local import pace as pacing
from tmem.models.local import server as local
from tmem.models.settings import BackendSettings
from tmem.pipeline.run import run_question
from tmem.pipeline.scope import Scope
from tmem.prompts import Prompt
from tmem.viz.question import structuring as structuring_view

WRITE = 5.0  # reply tokens per second: a slow CPU under load


def speed(read: float, write: float, stall: str | None = None, stall_s: float = 0.0):
    """A reply function of the scripted server: the time its reply takes at `read` prompt and `write` reply tokens
    per second, with llama.cpp's timings; the relation call of child `stall` hangs `stall_s` seconds."""
    counter = default_token_counter()

    def reply(request: dict):
        user = request["messages"][-1]["content"]
        if user == pacing.PROBE:
            content = "one two three four five six"
        else:
            content = scripted_reply(request)
        prompt, written = chat_prompt_tokens(counter, request["messages"]), counter.count(content)
        seconds = prompt / read + written / write
        if stall and f'"message_id": "{stall}"' in user.split("CANDIDATE PARENTS")[0]:
            seconds = stall_s
        timings = {"prompt_n": prompt, "prompt_per_second": read, "predicted_n": written,
                   "predicted_per_second": write}
        return content, seconds, timings
    return reply


@pytest.fixture
def llama_like(monkeypatch):
    """The scripted server as the local backend's llama.cpp server (listing the local model), and its settings; the
    paces measured here stay here (a later test's server may get the same port)."""
    monkeypatch.setattr(pacing, "_PACES", {})
    servers = []

    def start(reply, **values) -> tuple[FaultServer, BackendSettings]:
        server = FaultServer(("paced", reply), counted_usage=True)
        server.model_ids = [local.DEFAULT_MODEL]
        servers.append(server)
        port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        return server, BackendSettings.from_sources({}, {}, {"local.port": port, "embedder.kind": "lexical",
                                                            "cache.mode": "off", **values})
    yield start
    for server in servers:
        server.close()


def test_a_server_writing_5_tokens_a_second_is_measured_at_start_and_its_calls_do_not_time_out(llama_like):
    server, settings = llama_like(speed(read=1000.0, write=WRITE), **{
        "backend.preset": "local", "local.timeout_floor": 1, "local.timeout_cap": 900})
    lines = []
    roles = build_roles(settings, env={}, log=lines.append)
    probe = server.requests[0]  # the backend's first request: the tiny probe, the prompt read for real
    assert probe["messages"][-1]["content"] == pacing.PROBE and probe["cache_prompt"] is False
    client = roles.answer.client
    measured = client.endpoint.pace.pace
    assert (measured.prompt_per_s, measured.reply_per_s, measured.source) == (1000.0, WRITE, "measured at start")
    assert any("5.0 reply tokens/s" in line for line in lines), lines

    prompt = Prompt("answer", "Answer from the evidence.", "Evidence: the launch moved to March 17. " * 40)
    prompt_tokens = chat_prompt_tokens(roles.tokens, [{"content": prompt.system}, {"content": prompt.user}])
    # the call's timeout: from its own prompt at the measured speed
    limit = request_timeout(client.settings, client.endpoint, prompt_tokens)
    expected = pacing.MARGIN * (prompt_tokens / 1000.0 + client.settings.max_tokens / WRITE)
    assert limit.seconds == pytest.approx(expected) and 1 < limit.seconds < 900
    assert f"{prompt_tokens:,} prompt tokens at 1000.0/s" in limit.why and "measured at start" in limit.why
    result = roles.answer.answer(QUESTION, prompt, None, None)
    assert not result.errors and result.text == "scripted answer"
    assert chat_prompt_tokens(roles.tokens, server.requests[1]["messages"]) == prompt_tokens


def test_the_pace_follows_a_server_that_slows_down_and_halves_after_a_timeout():
    start = pacing.Pace(100.0, 10.0, "measured at start")
    server = pacing.ServerPace(start, floor=5, cap=1000)
    first = server.timeout(1000, 100).seconds
    assert first == pytest.approx(3 * (10 + 10))

    class Reply:  # llama.cpp reports a reply read at 25 and written at 2.5 tokens/s: four times slower
        model_extra = {"timings": {"prompt_n": 900, "prompt_per_second": 25.0, "predicted_n": 40,
                                   "predicted_per_second": 2.5}}
    server.observe(Reply(), 900, 100, 76.0)
    assert server.timeout(1000, 100).seconds == pytest.approx(2 * first)  # halfway (in log) towards 4x
    server.timed_out()
    assert server.timeout(1000, 100).seconds == pytest.approx(4 * first)
    assert server.timeout(10 ** 6, 100).seconds == 1000 and "cut to the cap" in server.timeout(10 ** 6, 100).why
    assert server.timeout(1, 1).seconds == 5 and "raised to the floor" in server.timeout(1, 1).why

    class NoTimings:  # no timings (another server): the wall clock against the prediction
        model_extra, usage = {}, type("U", (), {"completion_tokens": 40})()
    slow = pacing.ServerPace(start, floor=5, cap=1000)
    slow.observe(NoTimings(), 900, 100, 4 * (9 + 4))  # 4x the predicted 13 s
    assert slow.pace.prompt_per_s == pytest.approx(50.0) and "wall clock" in slow.pace.source
    assert pacing.ServerPace(None, 5, 1000).timeout(10, 10).seconds == 1000  # not measured: the cap


def test_a_call_that_stalls_times_out_and_the_trace_names_the_role_the_child_and_the_fallback(llama_like):
    server, settings = llama_like(speed(read=4000.0, write=200.0, stall="m04", stall_s=20.0), **{
        "roles.relation.backend": "local", "roles.relation.max_tokens": 32, "local.timeout_floor": 0.2,
        "local.timeout_cap": 2})
    roles = build_roles(settings, env={}, log=lambda line: None)
    scope = Scope("g", "golden", MESSAGES)
    config = TMemConfig().with_("retrieval", k=6)
    trace = run_question(QUESTION, scope, config, roles, corpus="g", gold=GOLD)

    relation = [e for e in trace.errors if e.stage == "relation"]
    assert len(relation) == 1, [e.message for e in trace.errors]
    error = relation[0]
    assert error.message.startswith("child m04: local:") and "failed after 2 attempts" in error.message
    assert "APITimeoutError: no reply within" in error.message and "prompt tokens at 4000.0/s" in error.message
    assert error.fallback == "child becomes a root"
    decision = next(d for d in trace.decisions if d.child_id == "m04")
    assert decision.parent_id is None and decision.note == "relation role failed: root as fallback"
    note = structuring_view.fallback_note(trace)  # what the Question page's forest tab shows, in red
    assert note.startswith("The relation model failed on 1 of ") and "child m04" in note
    assert note.endswith("-> child becomes a root")
    # the other children's calls were answered: the stalled child is the only root by fallback
    assert sum("CHILD MESSAGE" in r["messages"][-1]["content"] for r in server.requests) >= 3
