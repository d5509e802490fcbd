"""Backend settings from defaults < tmem.toml < environment < flags; per-role overrides; keys never settings;
`python -m tmem backends` shows every role's backend; every setting is documented in docs/backends.md."""
import argparse
import json
from pathlib import Path

import pytest

from tmem.cli import main as cli_main
from tmem.commands.flags import add_backend_arguments, settings_from_args
from tmem.models.factory import build_roles
from tmem.models.settings import ROLES, SETTINGS, BackendSettings

DOCS = Path(__file__).resolve().parent.parent / "docs" / "backends.md"


def test_nothing_configured_means_all_roles_offline_with_paper_defaults():
    s = BackendSettings.from_sources({}, {})
    assert all(s.role(r).backend == "offline" for r in ROLES)
    assert s.evidence_utility.temperature == 0.0 and s.relation.temperature == 0.2  # App. C
    assert s.answer.max_tokens == 8192 and s.judge.max_tokens == 4096  # Sec. 5.1
    assert s.embedder.kind == "auto" and s.cache_mode == "on"
    roles = build_roles(s, env={})
    assert all(getattr(roles, r).offline for r in ROLES)


def test_one_model_for_all_roles_from_the_environment():
    env = {"TMEM_LLM_BASE_URL": "http://127.0.0.1:8000/v1", "TMEM_LLM_MODEL": "Qwen/Qwen2.5-7B-Instruct",
           "TMEM_LLM_API_KEY_ENV": "VLLM_KEY", "TMEM_ANSWER_MODEL": "gpt-4o-mini", "TMEM_JUDGE_BACKEND": "offline"}
    s = BackendSettings.from_sources(env, {})
    assert s.evidence_utility.model == s.relation.model == "Qwen/Qwen2.5-7B-Instruct"
    assert s.answer.model == "gpt-4o-mini" and s.answer.base_url == "http://127.0.0.1:8000/v1"
    assert s.judge.backend == "offline" and s.relation.api_key_env == "VLLM_KEY"
    assert dict(s.origins)["roles.answer.model"] == "env TMEM_ANSWER_MODEL"


def test_precedence_file_then_env_then_flags(tmp_path):
    path = tmp_path / "tmem.toml"
    path.write_text('[llm]\nmodel = "from-file"\ntimeout = 30\n[roles.relation]\ntemperature = 0.5\n'
                    '[embedder]\nkind = "lexical"\n[cache]\nmode = "replay"\n')
    s = BackendSettings.from_sources({"TMEM_LLM_MODEL": "from-env"}, path, {"roles.relation.temperature": "0.1"})
    assert s.relation.model == "from-env" and s.relation.timeout == 30.0 and s.relation.temperature == 0.1
    assert s.embedder.kind == "lexical" and s.cache_mode == "replay"
    origins = dict(s.origins)
    assert origins["llm.timeout"] == "file" and origins["roles.relation.temperature"].startswith("flag")


def test_role_key_beats_llm_key_whatever_the_source():
    s = BackendSettings.from_sources({"TMEM_LLM_TEMPERATURE": "0.9"}, {"roles": {"answer": {"temperature": 0.3}},
                                                                       "llm": {"model": "m"}})
    assert s.answer.temperature == 0.3 and s.judge.temperature == 0.9


def test_temperature_can_be_left_unset_for_reasoning_models():
    s = BackendSettings.from_sources({"TMEM_ANSWER_TEMPERATURE": "unset", "TMEM_LLM_MODEL": "m"}, {})
    assert s.answer.temperature is None


@pytest.mark.parametrize("tree,message", [
    ({"llm": {"api_key": "sk-123"}}, "looks like a secret"),
    ({"roles": {"judge": {"token": "x"}}}, "looks like a secret"),
    ({"llm": {"modle": "typo"}}, "unknown setting 'llm.modle'"),
    ({"llm": {"timeout": "soon"}}, "llm.timeout"),
    ({"embedder": {"kind": "bert"}}, "expected one of auto, minilm, openai, lexical"),
    ({"roles": {"answer": {"backend": "openai"}}}, "needs a model"),
])
def test_bad_settings_are_rejected_with_their_source(tree, message):
    with pytest.raises(ValueError, match=message):
        BackendSettings.from_sources({}, tree)


@pytest.mark.parametrize("flag,value,message", [
    ("--max-cost", "-1", "--max-cost \\(budget.max_cost\\)='-1': expected a finite number from 0 to"),
    ("--max-cost", "nan", "expected a finite number"),
    ("--max-tokens", "-5", "expected a whole number from 0 to"),
    ("--llm-max-tokens", "-100000", "--llm-max-tokens \\(llm.max_tokens\\)='-100000': expected a whole number "
                                    "from 1 to 1,000,000"),
    ("--answer-max-tokens", "0", "expected a whole number from 1"),
    ("--llm-retries", "1000000000", "expected a whole number from 0 to 100"),
    ("--llm-retries", "1e9", "llm.retries"),
    ("--llm-temperature", "nan", "expected a finite number from 0 to 2"),
    ("--judge-temperature", "-0.5", "expected a finite number from 0 to 2"),
    ("--price-input", "inf", "expected a finite number"),
    ("--max-in-flight", "0", "expected a whole number from 1"),
    ("--llm-timeout", "-1", "expected a finite number"),  # 0 is allowed: "follow the server" (local)
])
def test_caps_limits_and_counts_out_of_range_are_refused_not_read_as_none(flag, value, message, capsys):
    """--max-cost -1 or nan and --llm-max-tokens -100000 each meant "no cap" without a word (113,279 tokens were
    spent under them); every number a backend setting takes is checked for its range, whatever its source."""
    assert cli_main(["backends", flag, value]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    import re
    assert re.search(message, err), err


def test_out_of_range_numbers_are_refused_from_the_file_and_the_environment_too():
    with pytest.raises(ValueError, match=r"config file key 'budget.max_cost'=-1.0: expected a finite number"):
        BackendSettings.from_sources({}, {"budget": {"max_cost": -1.0}})
    with pytest.raises(ValueError, match=r"config file key 'llm.retries'=1000000000.0: expected a whole number"):
        BackendSettings.from_sources({}, {"llm": {"retries": 1e9}})
    with pytest.raises(ValueError, match=r"\$TMEM_MAX_COST='nan'"):
        BackendSettings.from_sources({"TMEM_MAX_COST": "nan"}, {})
    ok = BackendSettings.from_sources({"TMEM_MAX_COST": "2.5", "TMEM_MAX_TOKENS": "30000"}, {"llm": {"retries": 2.0}})
    assert (ok.max_cost, ok.max_tokens, ok.judge.retries) == (2.5, 30000, 2)


def test_bad_environment_value_names_the_variable():
    with pytest.raises(ValueError, match=r"\$TMEM_MAX_IN_FLIGHT"):
        BackendSettings.from_sources({"TMEM_MAX_IN_FLIGHT": "many"}, {})


def test_config_file_found_through_the_environment(tmp_path):
    path = tmp_path / "b.toml"
    path.write_text('[llm]\nmodel = "deepseek-chat"\nbase_url = "https://api.deepseek.com"\n')
    s = BackendSettings.from_sources({"TMEM_BACKEND_CONFIG": str(path)}, None)
    assert s.judge.model == "deepseek-chat" and s.judge.backend == "openai"


def test_cli_flags_are_shared_and_parsed():
    parser = argparse.ArgumentParser()
    add_backend_arguments(parser)
    args = parser.parse_args(["--llm-model", "m", "--llm-base-url", "http://127.0.0.1:1/v1", "--relation-temperature",
                              "0.4", "--answer-backend", "offline", "--cache", "replay", "--max-in-flight", "3",
                              "--embedder", "lexical"])
    s = settings_from_args(args, env={})
    assert s.relation.temperature == 0.4 and s.answer.backend == "offline" and s.evidence_utility.model == "m"
    assert s.cache_mode == "replay" and s.max_in_flight == 3 and s.embedder.kind == "lexical"
    offline = settings_from_args(parser.parse_args(["--llm-model", "m", "--offline"]), env={})
    assert all(offline.role(r).backend == "offline" for r in ROLES)


def test_backends_command_prints_roles_and_never_the_key(capsys, monkeypatch):
    monkeypatch.setenv("TMEM_LLM_MODEL", "deepseek-chat")
    monkeypatch.setenv("TMEM_LLM_BASE_URL", "https://user:pw@api.deepseek.com/v1")
    monkeypatch.setenv("TMEM_LLM_API_KEY_ENV", "DEEPSEEK_API_KEY")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-should-never-print-4711")
    assert cli_main(["backends", "--judge-backend", "offline"]) == 0
    out = capsys.readouterr().out
    assert "evidence_utility  openai   deepseek-chat" in out and "https://api.deepseek.com/v1" in out
    assert "judge             offline" in out and "$DEEPSEEK_API_KEY (set)" in out
    assert "sk-should-never-print-4711" not in out and "pw@" not in out
    assert cli_main(["backends", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["role"] for r in rows] == [*ROLES, "embedder", "cache"]


def test_every_setting_is_documented():
    text = DOCS.read_text(encoding="utf-8")
    for s in SETTINGS.values():
        if not s.key.startswith("roles."):
            assert s.env in text and s.key.split(".", 1)[1] in text, s.key
            assert s.flag is None or s.flag in text, s.flag
    for field in ("backend", "model", "base_url", "temperature", "max_tokens", "api_key_env", "response_format"):
        assert f"TMEM_ANSWER_{field.upper()}" in text or f"TMEM_<ROLE>_{field.upper()}" in text
    for role in ROLES:
        assert f"[roles.{role}]" in text


# ------------------------------------------------------------ the config file, read like an import (issue 44, row 5)
@pytest.fixture
def no_hang():
    import signal

    def stuck(*_):
        raise TimeoutError("reading the backend config hung")
    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_the_backend_config_is_a_regular_file_of_bounded_size(tmp_path, no_hang, capsys):
    """`--backend-config /dev/zero` grew to 2.7 GB in 15 s, and a FIFO hung: the file is read as an import's are
    (tmem.corpora.files: a regular file, at most limits.MAX_CONFIG_BYTES)."""
    import os

    from tmem import limits

    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * (limits.MAX_CONFIG_BYTES // 10 + 1))
    for path, message in (("/dev/zero", "/dev/zero: is a device; only regular files are read"),
                          (str(fifo), "pipe.toml: is a FIFO (named pipe); only regular files are read"),
                          (str(tmp_path), "is a folder; a file is expected here"),
                          (str(big), f"over the limit of {limits.MAX_CONFIG_BYTES:,} bytes for a backend config")):
        assert cli_main(["backends", "--backend-config", path]) == 1
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
        with pytest.raises(ValueError, match="only regular files|a file is expected|over the limit"):
            BackendSettings.from_sources({"TMEM_BACKEND_CONFIG": path}, None)
    ok = tmp_path / "ok.toml"
    ok.write_text('[llm]\nmodel = "m"\n')
    assert BackendSettings.from_sources({}, ok).judge.model == "m"
