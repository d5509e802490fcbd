"""Response cache in DuckDB (paper App. D.2): keyed by (model, role, prompt hash, parameters); a re-run costs
nothing and works offline; replay-only mode fails clearly on a miss and never calls out."""
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from llm_server import fault_settings

from tmem.config import TMemConfig
from tmem.demo.golden import GOLD, MESSAGES, QUESTION
from tmem.evaluation.scripted_server import FaultServer, scripted_reply
from tmem.models.factory import build_roles
from tmem.models.llm.cache import ReplayMissError, ResponseCache, request_key
from tmem.pipeline.run import run_question
from tmem.pipeline.scope import Scope
from tmem.store import Store

VALID = json.dumps({"selected": [{"message_id": "m04", "label": "KEY", "reason": "r"}]})
CANDIDATES = [m for m in MESSAGES if m.topic == "launch"]


@pytest.fixture
def server():
    s = FaultServer(default=("ok", VALID))
    yield s
    s.close()


def utility(server, store, mode="on", **values):
    cache = ResponseCache(store, mode)
    roles = build_roles(fault_settings(server.base_url, **{"cache.mode": mode, **values}), store=store, env={},
                        cache=cache, backoff_base=0.01)
    return roles.evidence_utility, cache


def select(role):
    return role.select(QUESTION, 0, CANDIDATES, [0.5] * len(CANDIDATES), None)


def test_request_key_covers_url_model_role_prompt_and_parameters():
    url = "http://127.0.0.1:8080/v1"
    base = request_key("m", "relation", "sys", "user", {"temperature": 0.2}, url)
    assert base == request_key("m", "relation", "sys", "user", {"temperature": 0.2}, url)
    for other in (request_key("m2", "relation", "sys", "user", {"temperature": 0.2}, url),
                  request_key("m", "answer", "sys", "user", {"temperature": 0.2}, url),
                  request_key("m", "relation", "sys", "user2", {"temperature": 0.2}, url),
                  request_key("m", "relation", "sys", "user", {"temperature": 0.0}, url),
                  request_key("m", "relation", "sys", "user", {"temperature": 0.2}, "http://127.0.0.1:8081/v1")):
        assert other[0] != base[0]


def test_another_server_behind_the_same_model_name_is_a_miss(fresh_store):
    """llama.cpp answers to any model name: swapping the GGUF behind `local` must not replay the old replies."""
    first, second = FaultServer(default=("ok", VALID)), FaultServer(default=("ok", json.dumps({"selected": []})))
    try:
        def role(server, **values):
            return utility(server, fresh_store, **{"llm.model": "local", **values})[0]

        assert [s.message_id for s in select(role(first)).selections] == ["m04"]
        again = select(role(second))
        assert again.usage.source == "server" and again.selections == ()  # the second model's own reply
        assert len(first.requests) == 1 and len(second.requests) == 1 and fresh_store.response_count() == 2
        # credentials in the URL are not part of the key: the same server with them is still a hit
        with_credentials = first.base_url.replace("http://", "http://user:secret@")
        assert select(role(first, **{"llm.base_url": with_credentials})).usage.source == "cache"
        assert len(first.requests) == 1
    finally:
        first.close()
        second.close()


def test_second_call_is_served_from_the_cache_even_with_the_server_gone(server, fresh_store):
    role, cache = utility(server, fresh_store)
    first = select(role)
    assert first.usage.source == "server" and len(server.requests) == 1
    server.close()  # offline from here on
    again = select(role)
    assert again.selections == first.selections
    assert again.usage.source == "cache" and again.usage.calls == 0 and again.usage.cached_calls == 1
    assert again.usage.prompt_tokens == first.usage.prompt_tokens  # the recorded spend, labelled "cache"
    assert cache.stats() == {"hits": 1, "misses": 1, "hit_rate": 0.5}
    assert fresh_store.response_count() == 1


def test_a_changed_parameter_is_a_miss(server, fresh_store):
    select(utility(server, fresh_store)[0])
    select(utility(server, fresh_store, **{"roles.evidence_utility.temperature": 0.7})[0])
    assert len(server.requests) == 2


def test_replay_only_mode_fails_clearly_on_a_miss_without_calling(server, fresh_store):
    role, _ = utility(server, fresh_store, mode="replay")
    with pytest.raises(ReplayMissError, match="replay-only mode: no cached reply for evidence_utility"):
        select(role)
    assert server.requests == []
    select(utility(server, fresh_store, mode="on")[0])  # record it
    replayed = select(utility(server, fresh_store, mode="replay")[0])
    assert replayed.usage.source == "cache" and len(server.requests) == 1


def test_off_mode_always_calls_and_stores_nothing(server, fresh_store):
    role, _ = utility(server, fresh_store, mode="off")
    select(role), select(role)
    assert len(server.requests) == 2 and fresh_store.response_count() == 0


def test_failures_are_not_cached(server, fresh_store):
    server.default = ("status", 500, "down")
    role, _ = utility(server, fresh_store, **{"llm.retries": 0})
    assert select(role).errors
    assert fresh_store.response_count() == 0


def test_parallel_identical_calls_are_safe(server, fresh_store):
    role, cache = utility(server, fresh_store)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: select(role), range(16)))
    assert all(r.selections == results[0].selections and not r.errors for r in results)
    assert fresh_store.response_count() == 1 and cache.hits + cache.misses == 16


def test_cache_db_setting_uses_its_own_file(server, tmp_path):
    settings = fault_settings(server.base_url, **{"cache.db": str(tmp_path / "cache.duckdb")})
    role = build_roles(settings, env={}, backoff_base=0.01).evidence_utility
    select(role)
    assert role.client.cache.store.response_count() == 1


def test_rerunning_a_question_costs_nothing(server, fresh_store):
    server.default = ("reply", scripted_reply)
    config = TMemConfig().with_("discovery", top_n=5).with_("structuring", max_candidates=3)
    scope = Scope("g", "golden", MESSAGES)
    cache = ResponseCache(fresh_store, "on")
    roles = build_roles(fault_settings(server.base_url), store=fresh_store, env={}, cache=cache)
    first = run_question(QUESTION, scope, config, roles, corpus="g", gold=GOLD)
    calls, lookups = len(server.requests), cache.hits + cache.misses  # identical judge prompts hit already
    assert calls > 3 and cache.misses == calls
    second = run_question(QUESTION, scope, config, roles, corpus="g", gold=GOLD)
    assert len(server.requests) == calls and cache.hits + cache.misses == 2 * lookups and cache.misses == calls
    for stage in ("discovery", "structuring", "answer", "judge"):
        assert second.stage(stage).usage.calls == 0 and second.stage(stage).usage.source == "cache"
    assert [a.text for a in second.answers] == [a.text for a in first.answers]


def test_store_keeps_no_request_text(fresh_store):
    columns = [r[0] for r in fresh_store.cursor().execute("DESCRIBE model_responses").fetchall()]
    assert "api_key" not in columns and "prompt" not in columns and "base_url" not in columns


def test_a_read_only_replay_store_can_be_shared(tmp_path, server):
    path = tmp_path / "shared.duckdb"
    store = Store(path)
    select(utility(server, store)[0])
    assert store.response_count() == 1
    store.close()


# ---------------------------------------------------------------------------- replay-only mode and the embedder
def embedding_roles(server, store, mode):
    settings = fault_settings(server.base_url, **{"cache.mode": mode, "embedder.kind": "openai", "embedder.model": "e",
                                                  "embedder.base_url": server.base_url})
    return build_roles(settings, store=store, env={})


def test_replay_mode_never_sends_a_missing_query_or_message_vector(server, fresh_store):
    from tmem.models.factory import vector_store

    replay = embedding_roles(server, fresh_store, "replay")
    with pytest.raises(ReplayMissError, match="replay-only mode: no stored query vector for 1 text"):
        replay.embedder.embed(["a brand-new question text"], kind="query")
    scope = Scope("g", "golden", MESSAGES)
    vector_store(fresh_store).install(scope)
    with pytest.raises(ReplayMissError, match=f"no stored passage vector for {len(MESSAGES)} text"):
        scope.vectors(replay.embedder)
    assert server.requests == []
    recording = embedding_roles(server, fresh_store, "on")  # record once, then replay sends nothing
    query = recording.embedder.embed(["a brand-new question text"], kind="query")
    vectors = Scope("g", "golden", MESSAGES)
    vector_store(fresh_store).install(vectors)
    stored = vectors.vectors(recording.embedder)
    sent = len(server.requests)
    assert sent == 2
    again = Scope("g", "golden", MESSAGES)
    vector_store(fresh_store).install(again)
    assert (again.vectors(replay.embedder) == stored).all()
    assert (replay.embedder.embed(["a brand-new question text"], kind="query") == query).all()
    assert len(server.requests) == sent


def test_replay_mode_fails_a_question_whose_query_vector_is_missing(server, fresh_store):
    roles = embedding_roles(server, fresh_store, "replay")
    scope = Scope("g", "golden", MESSAGES)
    config = TMemConfig().with_("discovery", top_n=5).with_("structuring", max_candidates=3)
    with pytest.raises(ReplayMissError, match="no stored (query|passage) vector"):
        run_question(QUESTION, scope, config, roles, corpus="g", gold=GOLD)
    assert server.requests == []


def test_replay_mode_lets_a_local_embedder_compute_vectors(server, fresh_store):
    """MiniLM and the lexical embedder send nothing anywhere: replay mode does not apply to them."""
    settings = fault_settings(server.base_url, **{"cache.mode": "replay", "embedder.kind": "lexical"})
    embedder = build_roles(settings, store=fresh_store, env={}).embedder
    assert embedder.embed(["a brand-new question text"], kind="query").shape[0] == 1
