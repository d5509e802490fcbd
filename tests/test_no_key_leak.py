"""The API key never reaches a file the project writes: the DuckDB file (cache, vectors, traces), JSONL traces or
logs, even when a server echoes the Authorization header back in an error body."""
import logging
import uuid

import pytest
from golden import GOLD, MESSAGES, QUESTION
from llm_server import FaultServer, fault_settings, scripted_reply

from tmem.config import TMemConfig
from tmem.models.factory import build_roles, vector_store
from tmem.pipeline import run_question
from tmem.scope import Scope
from tmem.store import Store


@pytest.fixture
def debug_log(tmp_path):
    handler = logging.FileHandler(tmp_path / "debug.log", encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)  # openai / httpx debug logging included
    yield tmp_path / "debug.log"
    root.removeHandler(handler)
    root.setLevel(old_level)
    handler.close()


def test_api_key_is_never_written(tmp_path, monkeypatch, debug_log):
    key = f"sk-tmem-canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("TMEM_TEST_API_KEY", key)
    server = FaultServer(default=("echo_auth",))
    store = Store(tmp_path / "tmem.duckdb")
    config = TMemConfig().with_("discovery", top_n=5).with_("structuring", max_candidates=3)
    try:
        traces = []
        for default in (("echo_auth",), ("reply", scripted_reply)):
            server.default = default
            roles = build_roles(fault_settings(server.base_url, **{"llm.retries": 0}), store=store)
            scope = Scope("g", "golden", MESSAGES)
            vector_store(store).install(scope)
            for _ in range(2):  # the second run is served from the cache
                trace = run_question(QUESTION, scope, config, roles, corpus="g", gold=GOLD)
                store.save_trace(trace, roles.label)
                traces.append(trace)
        assert server.requests, "the key was sent to the server"
        echoed = [e.message for e in traces[0].errors if "upstream failed" in e.message]
        assert echoed and all("[redacted]" in m for m in echoed)  # the echo path was exercised
        assert traces[-1].stage("answer").usage.source == "cache"
        (tmp_path / "traces.jsonl").write_text("\n".join(t.to_json() for t in traces), encoding="utf-8")
    finally:
        server.close()
        store.close()
    logging.getLogger("tmem-test").debug("log file is live")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"tmem.duckdb", "traces.jsonl", "debug.log"} <= {p.name for p in written}
    for path in written:
        assert key.encode() not in path.read_bytes(), f"API key found in {path.name}"
