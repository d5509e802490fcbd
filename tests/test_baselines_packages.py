"""The memory systems that run through their published packages (requirements-baselines.txt; tmem.baselines.mem0)
against the scripted server on 127.0.0.1 (tests/memory_server.py answers the package's own prompts): what the
package stored and where each memory is traced, where its files go (never the home folder, never the key),
telemetry off, the estimate, and the refusals (offline stand-ins, package not installed). The generic contract
(ingests once, a second run reuses the stored memory, construction tokens from the server's usage) is
tests/test_baselines.py's, parametrized over every system."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter, defaultdict

import pytest
from memory_server import mem0_records
from test_baselines import KEY, ROOT, run, server, small  # noqa: F401 (fixtures)

from tmem.baselines import SYSTEMS
from tmem.baselines import mem0 as mem0_module
from tmem.store import Store

MEM0 = SYSTEMS["mem0"]
needs_mem0 = pytest.mark.skipif(bool(MEM0.unavailable()), reason=MEM0.unavailable() or "")


def extraction_requests(server) -> list[dict]:  # noqa: F811 (the fixture's value)
    return [r for r in server.requests if "You are a Memory Extractor" in r["messages"][0]["content"][:300]]


def channel_chunks(messages, size: int = 12) -> list[list]:
    """The chunks mem0 is given, computed here by hand: per channel, in time order, at most `size` messages."""
    by_channel = defaultdict(list)
    for m in sorted(messages, key=lambda m: (m.timestamp, m.id)):
        by_channel[m.channel].append(m)
    return [ms[i:i + size] for ms in by_channel.values() for i in range(0, len(ms), size)]


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


def test_mem0_does_not_run_on_the_offline_stand_ins(small, tmp_path, capsys):  # noqa: F811
    assert run(small, tmp_path / "off", "mem0") != 0
    err = capsys.readouterr().err
    assert "mem0" in err and ("does not run on them" in err or "requirements-baselines.txt" in err)
    assert not (tmp_path / "off" / "mem0").exists()


def test_mem0_without_its_package_is_refused_by_name(small, tmp_path, server, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setattr(mem0_module, "version", lambda: None)
    assert run(small, tmp_path / "np", "mem0") != 0
    err = capsys.readouterr().err
    assert "mem0ai, which is not installed" in err and "requirements-baselines.txt" in err
    assert server.requests == []
