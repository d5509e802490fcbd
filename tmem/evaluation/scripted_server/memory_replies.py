"""Scripted replies for the memory systems' construction and query-time prompts (tmem.baselines), so that each system
runs end to end against the fault server on 127.0.0.1: every reply is valid for its prompt and names only message
ids it was shown; anything else (answer, judge, T-Mem's roles) gets the scripted server's scripted_reply."""
from __future__ import annotations

import json
import threading

from tmem.baselines.graphiti import episode_lines
from tmem.baselines.mem0 import extraction_records
from tmem.evaluation.scripted_server import counted_usage, scripted_reply


def data_records(request: dict) -> list[dict]:
    """The JSON records between BEGIN/END markers of the user message."""
    out, inside = [], False
    for line in request["messages"][-1]["content"].splitlines():
        if line.startswith("<<<BEGIN"):
            inside = True
        elif line.startswith("<<<END"):
            inside = False
        elif inside:
            try:
                out.append(json.loads(line))
            except ValueError:  # another prompt's passages (the answer role's), not JSON records
                pass
    return out


def _first_words(text: str, n: int = 6) -> str:
    return " ".join(str(text).split()[:n])


def mem0_records(request: dict) -> list[dict]:
    """The message records of a mem0 extraction prompt's New Messages (`user: {json}` lines; tmem.baselines.mem0)."""
    text = request["messages"][-1]["content"].split("## New Messages", 1)[-1].split("## Observation Date", 1)[0]
    return extraction_records(text)


def graphiti_records(request: dict) -> list[dict]:
    """The message records of a Graphiti prompt's current episode (`speaker: {json}` lines; tmem.baselines.graphiti)."""
    return [record for _, record in episode_lines(request["messages"][-1]["content"])]


def _place(record: dict) -> str:
    """Where a message was said: its channel, else (a two-person conversation such as LoCoMo's) the conversation."""
    return record.get("channel") or "the conversation"


def graphiti_reply(request: dict) -> str | None:
    """Graphiti's extraction prompts: the speakers and the channel (else the conversation) as entities, one fact
    per message (the speaker SAID_IN it); any other response model gets its smallest valid reply, read from the
    schema the package appends to the prompt."""
    system, user = request["messages"][0]["content"], request["messages"][-1]["content"]
    records = graphiti_records(request)
    if system.startswith("You are an entity extraction specialist"):
        names = list(dict.fromkeys([*(r.get("author", "?") for r in records), *(_place(r) for r in records)]))
        return json.dumps({"extracted_entities": [{"name": n, "entity_type_id": 0} for n in names]})
    if system.startswith("You are an expert fact extractor"):
        return json.dumps({"edges": [{"source_entity_name": r.get("author", "?"), "target_entity_name": _place(r),
                                      "relation_type": "SAID_IN", "valid_at": None, "invalid_at": None,
                                      "fact": f"{r.get('author', '?')} said: {r['text']}"}
                                     for r in records]})
    marker = "Respond with a JSON object in the following format:"
    if marker not in user:
        return None
    schema = json.loads(user.split(marker, 1)[1].strip().split("\n\n", 1)[0])
    kinds = {"array": [], "string": "", "integer": -1, "number": 0.0, "boolean": False}
    return json.dumps({n: kinds.get(f.get("type")) for n, f in schema.get("properties", {}).items()})


def memory_reply(request: dict) -> str:
    system = request["messages"][0]["content"]
    graphiti = graphiti_reply(request)
    if graphiti is not None:
        return graphiti
    if "You are a Memory Extractor" in system[:300]:  # mem0ai's additive extraction: one memory per message
        return json.dumps({"memory": [{"id": str(n), "text": f"{r.get('author', '?')} said: {_first_words(r['text'])}",
                                       "attributed_to": "user"} for n, r in enumerate(mem0_records(request))]})
    records = data_records(request)
    ids = [r["message_id"] for r in records if "message_id" in r]
    texts = [r.get("text", "") for r in records]
    if system.startswith("You build an event memory"):  # StructMem extraction: one fact per message
        return json.dumps({"factual": [{"text": f"fact: {_first_words(t)}", "message_ids": [i]}
                                       for i, t in zip(ids, texts)],
                           "relational": [{"text": "relation: " + _first_words(texts[-1], 4),
                                           "message_ids": [ids[0], ids[-1]]}]})
    if system.startswith("Two memories of a conversation"):
        return json.dumps({"text": " / ".join(texts)})
    if system.startswith("Summarize these memories"):
        return json.dumps({"summary": "summary: " + _first_words(" ".join(texts), 10)})
    if system.startswith("Extract the named entities"):  # HippoRAG 2 NER: the author and first word of each
        return json.dumps({"named_entities": [w for t in texts for w in t.split()[:2]]})
    if system.startswith("Build an RDF graph"):
        words = [w for t in texts for w in t.split()[:3]]
        return json.dumps({"triples": [words[:3]] if len(words) >= 3 else []})
    if system.startswith("Given a question and candidate facts"):
        return json.dumps({"fact": [r["fact"] for r in records if "fact" in r][:3]})
    if system.startswith("Analyze the message and build a memory note"):  # A-Mem
        return json.dumps({"keywords": texts[0].split()[:3], "context": "context: " + _first_words(texts[0], 3),
                           "tags": ["t"]})
    if system.startswith("A new memory note arrived"):
        n = sum(1 for r in records if "number" in r)
        return json.dumps({"should_evolve": True, "actions": ["strengthen", "update_neighbor"],
                           "suggested_connections": [0], "tags_to_update": ["t2"],
                           "new_context_neighborhood": ["evolved"] * n, "new_tags_neighborhood": [["t3"]] * n})
    if system.startswith("Extract the facts worth remembering"):  # Hindsight
        return json.dumps({"facts": [{"text": f"fact: {_first_words(t)}", "type": "world", "entities": t.split()[:1],
                                      "message_ids": [i]} for i, t in zip(ids, texts)]})
    if system.startswith("Summarize this conversation session"):  # MemGAS
        return json.dumps({"summary": "session: " + _first_words(" ".join(texts), 12), "keywords": ["k"]})
    if system.startswith("Given a question and numbered memory sessions"):
        return json.dumps({"selected": [r["number"] for r in records if "number" in r][:4]})
    return scripted_reply(request)


class Tally:
    """A reply function that also counts, per construction stage (the role in the system prompt's first words),
    the calls and the prompt tokens the server received; `stop_after` makes the server hang after that many calls
    (a process killed in the middle of an ingestion)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = 0
        self.prompt_tokens = 0

    def __call__(self, request: dict) -> str:
        reply = memory_reply(request)
        with self.lock:
            self.calls += 1
            self.prompt_tokens += counted_usage(request, reply)["prompt_tokens"]
        return reply
