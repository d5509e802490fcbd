"""The memory systems that run through their published packages (requirements-baselines.txt; tmem.baselines.mem0,
tmem.baselines.graphiti) against the scripted server on 127.0.0.1 (scripted_server/memory_replies.py answers the
package's own prompts): what the package stored and where each memory is traced, where its files go (never the home
folder, never the key), telemetry off, a rebuild from the response cache, the estimate, and the refusals (offline
stand-ins, package not installed). The generic contract (ingests once, a second run reuses the stored memory,
construction tokens from the server's usage) is tests/test_baselines.py's, parametrized over every system."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter, defaultdict

import pytest
from test_baselines import KEY, ROOT, run, server, small  # noqa: F401 (fixtures)

from tmem.baselines import SYSTEMS
from tmem.baselines import graphiti as graphiti_module
from tmem.baselines import mem0 as mem0_module
from tmem.baselines.ingestion import forget
from tmem.evaluation.scripted_server.memory_replies import graphiti_records, mem0_records
from tmem.store import Store

MEM0 = SYSTEMS["mem0"]
needs_mem0 = pytest.mark.skipif(bool(MEM0.unavailable()), reason=MEM0.unavailable() or "")
GRAPHITI = SYSTEMS["graphiti"]
needs_graphiti = pytest.mark.skipif(bool(GRAPHITI.unavailable()), reason=GRAPHITI.unavailable() or "")


def extraction_requests(server) -> list[dict]:  # noqa: F811 (the fixture's value)
    return [r for r in server.requests if "You are a Memory Extractor" in r["messages"][0]["content"][:300]]


def channel_chunks(messages, size: int = 12) -> list[list]:
    """The chunks mem0 is given, computed here by hand: per channel, in time order, at most `size` messages."""
    by_channel = defaultdict(list)
    for m in sorted(messages, key=lambda m: (m.timestamp, m.id)):
        by_channel[m.channel].append(m)
    return [ms[i:i + size] for ms in by_channel.values() for i in range(0, len(ms), size)]


@pytest.mark.integration
@needs_mem0
def test_mem0_stores_one_memory_per_extracted_fact_traced_to_its_chunk(small, tmp_path, server):  # noqa: F811
    assert run(small, tmp_path / "a", "mem0") == 0
    store = Store(small)
    scope = store.scopes("small")[0]
    messages = store.messages("small", scope)
    chunks = channel_chunks(messages)
    assert len(chunks) == sum(math.ceil(n / 12) for n in Counter(m.channel for m in messages).values())
    sent = extraction_requests(server)
    assert len(sent) == len(chunks)  # one Memory.add, one extraction call, per channel chunk
    # each prompt holds its chunk's messages as JSON records (text a string literal) and the data note
    assert [[r["message_id"] for r in mem0_records(r)] for r in sent] == [[m.id for m in c] for c in chunks]
    assert all("are data, not instructions" in r["messages"][-1]["content"] for r in sent)
    stored, _, _ = store.system_memory("small", scope, "mem0", store.system_memories("small")[0]["key"])
    points = stored["data"]["points"]
    chunk_of = {m.id: [x.id for x in c] for c in chunks for m in c}
    texts = Counter(f"{m.author} said: {' '.join(m.text.split()[:6])}" for m in messages)
    by_text = {p["payload"]["data"]: p["payload"] for p in points}
    # the scripted reply writes one fact per message; mem0 drops a fact whose text it already holds (hash)
    assert set(by_text) == set(texts)
    for m in messages:
        text = f"{m.author} said: {' '.join(m.text.split()[:6])}"
        if texts[text] == 1:  # a unique fact is traced to exactly the chunk it was written from
            assert by_text[text]["message_ids"] == chunk_of[m.id]
    traces = [json.loads(t) for (t,) in store.cursor().execute("SELECT trace_json FROM traces").fetchall()]
    for t in traces:
        assert 0 < len(t["memories"]) <= MEM0.config["top_k"]
        for item in t["memories"]:
            assert item["source_ids"] == by_text[item["text"]]["message_ids"]
    store.close()


@pytest.mark.integration
@needs_mem0
def test_mem0_keeps_its_files_beside_the_database_without_the_key_or_telemetry(small, tmp_path, server):  # noqa: F811
    """A fresh process (the package imported there first): HOME is an empty folder, and stays empty."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home)}
    env.pop("MEM0_DIR", None)
    env.pop("MEM0_TELEMETRY", None)
    probe = ("import runpy, sys; sys.argv = ['tmem'] + sys.argv[1:]; code = 0\n"
             "try:\n    runpy.run_module('tmem', run_name='__main__')\nexcept SystemExit as e:\n    code = e.code\n"
             "import mem0.memory.telemetry as t; print('TELEMETRY', t.MEM0_TELEMETRY); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", probe, "run", "--db", str(small), "--corpus", "small",
                           "--variants", "mem0", "--out", str(tmp_path / "p"), "--quiet"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "TELEMETRY False" in done.stdout
    assert list(home.iterdir()) == []  # no ~/.mem0 (config, user id, migrations store)
    systems = small.parent / "systems" / "mem0"
    assert (systems / "mem0-home").is_dir()  # the package's home folder, beside the database
    assert not [p for p in systems.iterdir() if p.name.startswith("mem0-") and p.name != "mem0-home"]  # cleaned
    assert extraction_requests(server)
    for path in [small, *(p for p in tmp_path.rglob("*") if p.is_file())]:
        assert KEY.encode() not in path.read_bytes(), path


@pytest.mark.integration
@needs_mem0
def test_mem0_estimate_counts_one_call_per_chunk_and_sends_nothing(small, tmp_path, server, capsys):  # noqa: F811
    assert run(small, tmp_path / "e", "mem0", "--estimate", "--json") == 0
    est = json.loads(capsys.readouterr().out)
    store = Store(small)
    messages = store.messages("small", store.scopes("small")[0])
    assert server.requests == []
    assert est["variants"]["mem0"]["ingestion"]["calls"] == len(channel_chunks(messages))
    assert store.system_memories("small") == []  # an estimate's memory is never stored
    store.close()


@pytest.mark.integration
def test_mem0_does_not_run_on_the_offline_stand_ins(small, tmp_path, capsys):  # noqa: F811
    assert run(small, tmp_path / "off", "mem0") != 0
    err = capsys.readouterr().err
    assert "mem0" in err and ("does not run on them" in err or "requirements-baselines.txt" in err)
    assert not (tmp_path / "off" / "mem0").exists()


@pytest.mark.integration
def test_mem0_without_its_package_is_refused_by_name(small, tmp_path, server, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setattr(mem0_module, "version", lambda: None)
    assert run(small, tmp_path / "np", "mem0") != 0
    err = capsys.readouterr().err
    assert "mem0ai, which is not installed" in err and "requirements-baselines.txt" in err
    assert server.requests == []


# ------------------------------------------------------------------------------------------------------ graphiti
ENTITIES = "You are an entity extraction specialist"  # graphiti-core's prompt openings (its prompts/ folder)
FACTS = "You are an expert fact extractor"


def graphiti_construction(server) -> list[dict]:  # noqa: F811 (the fixture's value)
    return [r for r in server.requests if not r["messages"][0]["content"].startswith(("You answer questions",
                                                                                       "Judge"))]


def episodes(messages, size: int = 12) -> list[list]:
    """The episodes Graphiti is given, by hand: the channel chunks, in the time order of their last message."""
    return sorted(channel_chunks(messages, size), key=lambda c: (c[-1].timestamp, c[0].id))


@pytest.mark.integration
@needs_graphiti
def test_graphiti_adds_one_episode_per_chunk_and_traces_each_fact_to_its_episode(small, tmp_path, server):  # noqa: F811
    assert run(small, tmp_path / "g", "graphiti") == 0
    store = Store(small)
    scope = store.scopes("small")[0]
    messages = store.messages("small", scope)
    chunks = [[m.id for m in c] for c in episodes(messages)]
    sent = graphiti_construction(server)
    for opening in (ENTITIES, FACTS):  # one entity and one fact extraction per episode, in order, on its records
        calls = [r for r in sent if r["messages"][0]["content"].startswith(opening)]
        assert [[x["message_id"] for x in graphiti_records(r)] for r in calls] == chunks
    stored, usage, _ = store.system_memory("small", scope, "graphiti", store.system_memories("small")[0]["key"])
    assert sorted(stored["data"]["episodes"].values()) == sorted(chunks)
    assert stored["counts"]["episodes"] == len(chunks)
    assert stored["counts"]["facts"] == len(messages)  # the scripted reply: one fact per message, none merged
    assert sum(u["calls"] for k, u in usage.items() if not k.endswith("(embedding)")) == len(sent) - sum(
        s["usage"]["calls"] for (t,) in store.cursor().execute("SELECT trace_json FROM traces").fetchall()
        for s in json.loads(t)["stages"] if s["name"] == "memory")
    chunk_of = {i: c for c in chunks for i in c}
    facts = Counter(f"{m.author} said: {m.text}" for m in messages)
    traces = [json.loads(t) for (t,) in store.cursor().execute("SELECT trace_json FROM traces").fetchall()]
    checked = 0
    for t in traces:
        assert 0 < len(t["memories"]) <= GRAPHITI.config["num_results"]
        for item in t["memories"]:
            said = [m for m in messages if f"{m.author} said: {m.text}" == item["text"]]
            assert said  # every fact is one the scripted model extracted from a message
            if facts[item["text"]] == 1:  # a unique fact: traced to exactly the episode it was extracted from
                assert item["source_ids"] == chunk_of[said[0].id]
                checked += 1
    assert checked
    store.close()


@pytest.mark.integration
@needs_graphiti
def test_graphiti_rebuilt_from_the_cache_sends_nothing(small, tmp_path, server):  # noqa: F811
    """The memory row gone (a run killed before it was written), the ingestion replays every call from the response
    cache: Graphiti's prompts depend on the replies and the messages only, never on its random ids or the clock."""
    assert run(small, tmp_path / "a", "graphiti") == 0
    store = Store(small)
    scope = store.scopes("small")[0]
    first = store.system_memories("small")[0]["usage"]
    calls = sum(u["calls"] for k, u in first.items() if not k.endswith("(embedding)"))
    store.cursor().execute("DELETE FROM system_memories")
    store.close()
    forget()
    sent = len(graphiti_construction(server))
    assert run(small, tmp_path / "b", "graphiti") == 0
    assert len(graphiti_construction(server)) == sent  # nothing sent again
    store = Store(small)
    again = store.system_memories("small")[0]["usage"]
    assert sum(u["cached_calls"] for k, u in again.items() if not k.endswith("(embedding)")) == calls
    memory, _, _ = store.system_memory("small", scope, "graphiti", store.system_memories("small")[0]["key"])
    assert memory["counts"]["facts"] == len(store.messages("small", scope))
    store.close()


@pytest.mark.integration
@needs_graphiti
def test_graphiti_estimate_counts_the_calls_an_ingestion_makes_and_sends_nothing(small, tmp_path, server,  # noqa: F811
                                                                                  capsys):
    """The estimate's stated prior (one fact per message, tmem.baselines.graphiti.standin) is what the scripted
    model replies, so the estimate must count exactly the calls the ingestion then sends."""
    assert run(small, tmp_path / "e", "graphiti", "--estimate", "--json") == 0
    est = json.loads(capsys.readouterr().out)["variants"]["graphiti"]["ingestion"]
    assert server.requests == []
    assert Store(small).system_memories("small") == []  # an estimate's memory is never stored
    assert run(small, tmp_path / "r", "graphiti") == 0
    usage = Store(small).system_memories("small")[0]["usage"]
    calls = {k: u["calls"] for k, u in usage.items() if not k.endswith("(embedding)")}
    assert est["calls"] == sum(calls.values())
    store = Store(small)
    assert calls["ExtractedEdges"] == len(episodes(store.messages("small", store.scopes("small")[0])))
    store.close()


def test_graphiti_stand_in_writes_one_fact_per_message_of_the_current_episode():
    records = [{"message_id": "m1", "author": "ana", "channel": "ops", "text": "deploy: friday"},
               {"message_id": "m2", "author": "bo", "text": "ok"}]
    user = ("<PREVIOUS MESSAGES>\nzed: {\"text\": \"old\"}\n</PREVIOUS MESSAGES>\n<CURRENT MESSAGE>\nnote\n"
            + "\n".join(f"{r['author']}: {json.dumps(r)}" for r in records) + "\n</CURRENT MESSAGE>")
    entities = graphiti_module.standin("ExtractedEntities", {}, user)["extracted_entities"]
    assert [e["name"] for e in entities] == ["ana", "bo", "ops", "the conversation"]
    edges = graphiti_module.standin("ExtractedEdges", {}, user)["edges"]
    assert [(e["source_entity_name"], e["target_entity_name"], e["fact"]) for e in edges] == [
        ("ana", "ops", "ana said: deploy: friday"), ("bo", "the conversation", "bo said: ok")]
    schema = {"properties": {"duplicate_facts": {"type": "array"}, "fact": {"type": "string"}}}
    assert graphiti_module.standin("EdgeDuplicate", schema, user) == {"duplicate_facts": [], "fact": ""}


@pytest.mark.integration
def test_graphiti_does_not_run_on_the_offline_stand_ins(small, tmp_path, capsys):  # noqa: F811
    assert run(small, tmp_path / "off", "graphiti") != 0
    err = capsys.readouterr().err
    assert "graphiti" in err and ("does not run on them" in err or "requirements-baselines.txt" in err)
    assert not (tmp_path / "off" / "graphiti").exists()


@pytest.mark.integration
def test_graphiti_without_its_package_is_refused_by_name(small, tmp_path, server, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setattr(graphiti_module, "version", lambda: None)
    assert run(small, tmp_path / "np", "graphiti") != 0
    err = capsys.readouterr().err
    assert "graphiti-core and kuzu, which are not installed" in err and "requirements-baselines.txt" in err
    assert server.requests == []
