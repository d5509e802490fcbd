"""Response cache in DuckDB (paper App. D.2): keyed by (model, role, prompt hash, parameters); a re-run costs
nothing and works offline; replay-only mode fails clearly on a miss and never calls out."""
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from golden import GOLD, MESSAGES, QUESTION
from llm_server import FaultServer, fault_settings, scripted_reply

from tmem.config import TMemConfig
from tmem.models.cache import ReplayMissError, ResponseCache, request_key
from tmem.models.factory import build_roles
from tmem.pipeline import run_question
from tmem.scope import Scope
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


def test_request_key_covers_model_role_prompt_and_parameters():
    base = request_key("m", "relation", "sys", "user", {"temperature": 0.2})
    assert base == request_key("m", "relation", "sys", "user", {"temperature": 0.2})
    for other in (request_key("m2", "relation", "sys", "user", {"temperature": 0.2}),
                  request_key("m", "answer", "sys", "user", {"temperature": 0.2}),
                  request_key("m", "relation", "sys", "user2", {"temperature": 0.2}),
                  request_key("m", "relation", "sys", "user", {"temperature": 0.0})):
        assert other[0] != base[0]


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
