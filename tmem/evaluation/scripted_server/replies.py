"""What the scripted server answers and counts: the body of a chat completion, a valid reply for any of the four
roles (`scripted_reply`: every candidate KEY, each child an EXPAND of its latest candidate, the answer "scripted
answer", the judge "Correct"), the usage an OpenAI server would report for a request (`counted_usage`), and
`TokenTally`, a reply function that counts per role what the server received.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable

from tmem.models.llm.tokens import chat_prompt_tokens, default_token_counter


def completion(content: str, usage: bool = True) -> dict:
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "fault",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}
    if usage:
        body["usage"] = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    return body


def counted_usage(request: dict, content: str) -> dict:
    """Usage as an OpenAI server reports it: the messages' o200k tokens plus the chat format's (3 per message, 3
    for the reply's priming), and the reply's tokens."""
    counter = default_token_counter()
    prompt = chat_prompt_tokens(counter, request.get("messages", []))
    done = counter.count(content)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


def candidate_ids(request: dict) -> list[str]:
    """The message ids between the CANDIDATE markers of a J/K user message (for scripted valid replies)."""
    user = request["messages"][-1]["content"]
    ids, inside = [], False
    for line in user.splitlines():
        if line.startswith("<<<BEGIN CANDIDATE"):
            inside = True
        elif line.startswith("<<<END CANDIDATE"):
            inside = False
        elif inside:
            ids.append(json.loads(line)["message_id"])
    return ids


def child_id(request: dict) -> str | None:
    user = request["messages"][-1]["content"].splitlines()
    for i, line in enumerate(user):
        if line.startswith("<<<BEGIN CHILD"):
            return json.loads(user[i + 1])["message_id"]
    return None


def scripted_reply(request: dict) -> str:
    """A valid reply for any role: select every candidate KEY, link a child to its latest candidate by EXPAND,
    answer 'ok', judge correct."""
    system = request["messages"][0]["content"]
    if system.startswith("Strict query-conditioned evidence selection"):
        return json.dumps({"selected": [{"message_id": i, "label": "KEY", "reason": "scripted"}
                                        for i in candidate_ids(request)]})
    if system.startswith("Query-conditioned direct-parent selection"):
        ids = candidate_ids(request)
        return json.dumps({"choices": [{"child_id": child_id(request), "parent_id": ids[-1], "relation": "EXPAND",
                                        "confidence": 0.8, "query_relevance": 0.5}]})
    if system.startswith("Judge"):
        return "Final: Correct"
    return "scripted answer"


Reply = Callable[[dict], str]


ROLE_SYSTEMS = (("Strict query-conditioned evidence", "evidence_utility"), ("Query-conditioned direct-parent",
                                                                        "relation"), ("Judge", "judge"))


class TokenTally:
    """A reply function for FaultServer(("reply", tally)): the scripted reply (its evidence utility keeping the first
    `select` candidates of a window, 0 = all), and per role what the server received: [calls, prompt tokens,
    completion tokens], counted as an OpenAI server counts them (`counted_usage`)."""

    def __init__(self, select: int = 0):
        self.select, self.lock = select, threading.Lock()
        self.received: dict[str, list[int]] = {}

    def __call__(self, request: dict) -> str:
        system = request["messages"][0]["content"]
        role = next((r for prefix, r in ROLE_SYSTEMS if system.startswith(prefix)), "answer")
        reply = scripted_reply(request)
        if self.select and role == "evidence_utility":
            reply = json.dumps({"selected": json.loads(reply)["selected"][:self.select]})
        usage = counted_usage(request, reply)
        with self.lock:
            got = self.received.setdefault(role, [0, 0, 0])
            got[0], got[1], got[2] = got[0] + 1, got[1] + usage["prompt_tokens"], got[2] + usage["completion_tokens"]
        return reply

    def take(self) -> dict[str, list[int]]:
        """What was received since the last take, per role; and start counting afresh."""
        with self.lock:
            out, self.received = self.received, {}
        return out
