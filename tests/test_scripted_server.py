"""The scripted OpenAI-compatible server (tmem.evaluation.scripted_server) that the measurement scripts and the model
clients' tests run against: a valid reply for each role, the token tally, the script of behaviours, the Batch API."""
import json
import urllib.error
import urllib.request

import pytest
from waiting import wait_until

from tmem.evaluation.scripted_server import FaultServer, TokenTally, counted_usage, scripted_reply, scripted_settings
from tmem.models.llm.batch_client import BatchClient, request_line
from tmem.models.llm.openai_backend import Endpoint
from tmem.models.llm.tokens import default_token_counter


def request(system: str, *lines: str) -> dict:
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]}


CANDIDATES = ("<<<BEGIN CANDIDATE 1>>>", '{"message_id": "m1", "text": "a"}', "<<<END CANDIDATE 1>>>",
              "<<<BEGIN CANDIDATE 2>>>", '{"message_id": "m2", "text": "b"}', "<<<END CANDIDATE 2>>>")
SELECTION = request("Strict query-conditioned evidence selection ...", *CANDIDATES)
RELATION = request("Query-conditioned direct-parent selection ...", "<<<BEGIN CHILD>>>",
                   '{"message_id": "c9", "text": "c"}', "<<<END CHILD>>>", *CANDIDATES)


def test_a_scripted_reply_is_valid_for_each_role():
    assert json.loads(scripted_reply(SELECTION))["selected"] == [
        {"message_id": "m1", "label": "KEY", "reason": "scripted"}, {"message_id": "m2", "label": "KEY",
                                                                      "reason": "scripted"}]
    [choice] = json.loads(scripted_reply(RELATION))["choices"]
    assert (choice["child_id"], choice["parent_id"], choice["relation"]) == ("c9", "m2", "EXPAND")  # the latest
    assert scripted_reply(request("Judge the answer", "x")) == "Final: Correct"
    assert scripted_reply(request("Answer the question", "x")) == "scripted answer"


def test_the_tally_counts_per_role_what_the_server_received_and_starts_afresh():
    tally = TokenTally(select=1)
    kept = json.loads(tally(SELECTION))["selected"]
    assert [s["message_id"] for s in kept] == ["m1"]  # select=1: the window's first candidate only
    tally(SELECTION)
    judge = request("Judge the answer", "gold: March 17")
    tally(judge)
    counter = default_token_counter()
    # prompt: each message's tokens + 3 per message + 3 for the reply's priming (OpenAI's chat format)
    judge_prompt = counter.count(judge["messages"][0]["content"]) + counter.count("gold: March 17") + 3 * 2 + 3
    assert counted_usage(judge, "Final: Correct")["prompt_tokens"] == judge_prompt
    received = tally.take()
    assert received["judge"] == [1, judge_prompt, counter.count("Final: Correct")]
    assert received["evidence_utility"][0] == 2 and set(received) == {"judge", "evidence_utility"}
    assert tally.take() == {}


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json",
                                                                   "authorization": "Bearer sk-secret"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture
def server():
    s = FaultServer()
    yield s
    s.close()


def test_the_server_follows_its_script_then_its_default_and_keeps_no_header(server):
    server.push(("status", 503, "busy"), ("reply", lambda body: body["messages"][0]["content"].upper()))
    chat = server.base_url + "/chat/completions"
    assert post(chat, request("hello")) == (503, {"error": {"message": "busy", "type": "fault"}})
    code, body = post(chat, request("hello"))
    assert code == 200 and body["choices"][0]["message"]["content"] == "HELLO"
    code, body = post(chat, request("again"))  # the script is spent: the default ("ok", "{}")
    assert body["choices"][0]["message"]["content"] == "{}" and body["usage"]["total_tokens"] == 18
    assert [r["messages"][0]["content"] for r in server.requests] == ["hello", "hello", "again"]
    assert "sk-secret" not in json.dumps(server.requests)
    _, vectors = post(server.base_url + "/embeddings", {"input": ["abc", "abcdefgh"]})
    assert [d["embedding"] for d in vectors["data"]] == [[4.0, 1.0, 0.0], [2.0, 1.0, 1.0]]  # len % 7 + 1, 1, index


def test_a_batch_is_answered_line_by_line_by_the_scripted_reply(server, tmp_path):
    client = BatchClient(Endpoint(server.base_url, "K", 10, env={"K": "sk-test-0123456789abcdef"}))
    lines = [request_line("c1", RELATION), request_line("c2", request("Judge the answer", "x"))]
    batch = client.create(client.upload("part-1.jsonl", "\n".join(lines).encode()), "part-1")
    status = wait_until(lambda: (s := client.status(batch)).done and s, "the batch to complete")
    assert (status.status, status.total, status.completed, status.failed) == ("completed", 2, 2, 0)
    client.download(status.output_file_id, tmp_path / "out.jsonl")
    out = {r["custom_id"]: r["response"]["body"]["choices"][0]["message"]["content"]
           for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert out == {"c1": scripted_reply(RELATION), "c2": "Final: Correct"}
    assert server.batch.uploads == ["part-1.jsonl"] and server.batch.creates == [("part-1", "file-1", 2)]


def test_the_settings_point_every_role_at_the_server():
    settings = scripted_settings("http://127.0.0.1:9/v1", **{"llm.retries": 0})
    roles = [settings.role(r) for r in ("evidence_utility", "relation", "answer", "judge")]
    assert {(r.backend, r.base_url, r.timeout, r.retries) for r in roles} == {("openai", "http://127.0.0.1:9/v1", 2, 0)}
    assert settings.embedder.kind == "lexical"
