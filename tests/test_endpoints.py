"""Endpoints are the operator's, not the visitor's: which endpoints a browser session may use, and that no server
variable ever reaches a URL the operator did not pair it with (Settings' Test endpoint and Apply, the roles every
page builds, the app's batches)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tmem.evaluation.batch import jobs
from tmem.models.llm import endpoints
from tmem.models.llm.endpoints import SESSION_KEY_ENV, EndpointRefused, check_overrides, operator_endpoints

CANARY = "sk-canary-0123456789abcdefghijklmnop"
SETTINGS = "pages/settings.py"


class CaptureServer:
    """An OpenAI-compatible server on 127.0.0.1 that records every Authorization header it is sent."""

    def __init__(self):
        self.auth: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, payload: dict):
                outer.auth.append(self.headers.get("Authorization", ""))
                body = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._reply({"object": "list", "data": [{"id": "m", "object": "model", "created": 0,
                                                         "owned_by": "x"}]})

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self._reply({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "OK"}}]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def capture():
    server = CaptureServer()
    yield server
    server.close()


@pytest.fixture
def no_operator_settings(monkeypatch):
    """A server with no model settings (the suite drops the developer's TMEM_* variables) and a key in its
    environment that must never reach a URL the operator did not pair with it."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)


def toml(tmp_path, text: str) -> str:
    path = tmp_path / "backends.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------------------------------------ the policy
def test_a_url_the_operator_did_not_configure_is_refused(no_operator_settings):
    with pytest.raises(EndpointRefused, match="not an endpoint the operator configured"):
        check_overrides({"llm.backend": "openai", "llm.model": "m", "llm.base_url": "http://evil.example/v1",
                         "llm.api_key_env": "OPENAI_API_KEY"})
    with pytest.raises(EndpointRefused, match="role answer"):
        check_overrides({"roles.answer.backend": "openai", "roles.answer.model": "m",
                         "roles.answer.base_url": "http://evil.example/v1"})


def test_even_when_browser_endpoints_are_allowed_a_server_variable_never_goes_to_them(no_operator_settings,
                                                                                      monkeypatch):
    monkeypatch.setenv(endpoints.ALLOW_ENV, "1")
    for variable in ("OPENAI_API_KEY", "HOME", "PATH"):
        with pytest.raises(EndpointRefused, match="only a key typed in this session"):
            check_overrides({"llm.backend": "openai", "llm.model": "m", "llm.base_url": "http://evil.example/v1",
                             "llm.api_key_env": variable})
    settings = check_overrides({"llm.backend": "openai", "llm.model": "m", "llm.base_url": "http://x/v1",
                                "llm.api_key_env": SESSION_KEY_ENV})
    assert settings.answer.api_key_env == SESSION_KEY_ENV


def test_the_operators_variable_goes_only_to_the_url_it_is_paired_with(no_operator_settings, monkeypatch, tmp_path):
    monkeypatch.setenv("TMEM_BACKEND_CONFIG", toml(tmp_path, """
[endpoints.team]
base_url = "http://127.0.0.1:9/v1"
model = "gpt-team"
api_key_env = "TEAM_KEY"
"""))
    (team,) = operator_endpoints()
    assert (team.name, team.model, team.api_key_env, team.source) == ("team", "gpt-team", "TEAM_KEY",
                                                                      f"{tmp_path / 'backends.toml'}: [endpoints.team]")
    assert check_overrides(team.overrides("llm")).judge.model == "gpt-team"
    assert check_overrides(team.overrides("roles.answer")).answer.base_url == "http://127.0.0.1:9/v1"
    moved = {**team.overrides("llm"), "llm.base_url": "http://evil.example/v1"}
    with pytest.raises(EndpointRefused):
        check_overrides(moved)
    with pytest.raises(EndpointRefused):  # the same URL with another variable is another pairing
        check_overrides({**team.overrides("llm"), "llm.api_key_env": "OPENAI_API_KEY"})
    with pytest.raises(EndpointRefused):  # nor another model on the operator's account
        check_overrides({**team.overrides("llm"), "llm.model": "gpt-expensive"})


def test_the_servers_own_settings_are_an_endpoint_and_the_rest_stays_the_operators(no_operator_settings,
                                                                                   monkeypatch):
    monkeypatch.setenv("TMEM_LLM_MODEL", "served")
    monkeypatch.setenv("TMEM_LLM_BASE_URL", "http://127.0.0.1:9/v1/")
    (server,) = operator_endpoints()
    assert (server.name, server.base_url, server.api_key_env) == ("server", "http://127.0.0.1:9/v1", "OPENAI_API_KEY")
    assert check_overrides({}).answer.model == "served"
    assert check_overrides({"backend.preset": "offline"}).answer.backend == "offline"
    for foreign in ({"cache.db": "/tmp/x.duckdb"}, {"local.port": 22}, {"llm.timeout": 1},
                    {"embedder.base_url": "http://evil.example"}):
        with pytest.raises(EndpointRefused, match="operator's settings"):
            check_overrides(foreign)
    with pytest.raises(EndpointRefused, match="embedder"):  # no embeddings endpoint configured: none to use
        check_overrides({"embedder.kind": "openai"})
    assert "openai" not in endpoints.embedder_kinds()


@pytest.mark.parametrize("table, problem", [
    ('[endpoints.x]\nbase_url = "http://h/v1"\nmodel = "m"\napi_key = "sk-1"\n', "api_key_env"),
    ('[endpoints.x]\nbase_url = "http://h/v1"\n', "needs a model"),
    ('endpoints = 3\n', "must be a table"),
])
def test_a_bad_endpoint_table_is_one_clear_line(no_operator_settings, tmp_path, table, problem):
    with pytest.raises(ValueError, match=problem) as info:
        operator_endpoints(file=toml(tmp_path, table))
    assert "backends.toml" in str(info.value) and "sk-1" not in str(info.value)


def test_the_session_key_hides_a_server_variable_of_the_same_name(monkeypatch):
    monkeypatch.setenv(SESSION_KEY_ENV, "operator-value")
    assert endpoints.session_keys(None)[SESSION_KEY_ENV] == ""
    assert endpoints.session_keys("typed")[SESSION_KEY_ENV] == "typed"


def test_a_local_preset_sends_no_server_variable_to_its_loopback_server(no_operator_settings):
    settings = check_overrides({"backend.preset": "local"})
    assert settings.answer.backend == "local" and settings.answer.api_key_env == ""


# ------------------------------------------------------------------------------------------ app batches
def test_an_app_batch_cannot_take_a_visitors_endpoint(no_operator_settings, tmp_path):
    with pytest.raises(EndpointRefused):
        jobs.start_batch(tmp_path / "x.duckdb", "c", ["full"], 1,
                         backend={"llm.backend": "openai", "llm.model": "m", "llm.base_url": "http://evil.example/v1",
                                  "llm.api_key_env": "OPENAI_API_KEY"})
    assert not jobs.jobs(tmp_path / "x.duckdb")


def test_a_session_key_reaches_the_batch_child_only_through_its_environment(no_operator_settings, monkeypatch,
                                                                           tmp_path):
    monkeypatch.setenv(endpoints.ALLOW_ENV, "1")
    backend = {"llm.backend": "openai", "llm.model": "m", "llm.base_url": "http://127.0.0.1:9/v1",
               "llm.api_key_env": SESSION_KEY_ENV}
    job = jobs.BatchJob(tmp_path / "x.duckdb", "c", ("full",), 1, tmp_path, backend=backend,
                        secrets={SESSION_KEY_ENV: CANARY[::-1]})
    env = job.env()
    assert env[SESSION_KEY_ENV] == CANARY[::-1] and env["TMEM_LLM_API_KEY_ENV"] == SESSION_KEY_ENV
    assert CANARY[::-1] not in repr(job) and CANARY[::-1] not in " ".join(job.command("full"))


# -------------------------------------------------------------------------------------- the Settings page
def _texts(at) -> str:
    return " ".join(str(getattr(e, "value", "")) for kind in ("caption", "markdown", "info", "error", "success")
                    for e in getattr(at, kind))


@pytest.mark.app
def test_settings_offers_no_way_to_type_an_endpoint_or_name_a_variable(app, no_operator_settings):
    at = app(SETTINGS)
    assert not at.exception
    labels = [t.label for t in at.text_input]
    assert not any("URL" in label or "variable" in label or "key" in label for label in labels), labels
    assert at.selectbox(key="endpoint-all").options == ["offline"]
    shown = _texts(at)
    assert "server's environment" not in shown and "OPENAI_API_KEY" not in shown
    assert endpoints.ALLOW_ENV in shown  # how the operator allows typed endpoints


@pytest.mark.app
def test_settings_tests_and_applies_an_operator_endpoint_with_its_paired_key(app, no_operator_settings, monkeypatch,
                                                                            tmp_path, capture):
    monkeypatch.setenv("TEAM_KEY", "sk-team-key-value-000000000")
    monkeypatch.setenv("TMEM_BACKEND_CONFIG", toml(tmp_path, f"""
[endpoints.team]
base_url = "{capture.base_url}"
model = "m"
api_key_env = "TEAM_KEY"
"""))
    at = app(SETTINGS)
    (label,) = [o for o in at.selectbox(key="endpoint-all").options if o != "offline"]
    at.selectbox(key="endpoint-all").set_value(label)
    next(b for b in at.button if b.label == "Test endpoint").click().run()
    assert not at.exception
    assert "m answered in" in " ".join(s.value for s in at.success).replace("\\", "")
    assert capture.auth and set(capture.auth) == {"Bearer sk-team-key-value-000000000"}
    assert at.session_state["backend_overrides"] == {}, "testing applies nothing"
    at.selectbox(key="endpoint-all").set_value(label)
    next(b for b in at.button if b.label == "Apply to all roles").click().run()
    assert not at.exception
    assert at.session_state["backend_overrides"]["llm.api_key_env"] == "TEAM_KEY"
    roles = next(d.value for d in at.dataframe if "role" in d.value.columns).set_index("role")
    assert (roles.loc[["evidence_utility", "relation", "answer", "judge"], "offline"] == "no").all()  # read as words
    assert "sk-team" not in repr(dict(at.session_state))


@pytest.mark.app
def test_a_typed_endpoint_gets_only_the_typed_key(app, no_operator_settings, monkeypatch, capture):
    monkeypatch.setenv(endpoints.ALLOW_ENV, "1")
    at = app(SETTINGS)
    assert "custom" in at.selectbox(key="endpoint-all").options
    at.selectbox(key="endpoint-all").set_value("custom")
    at.text_input(key="model-custom").set_value("m")
    at.text_input(key="url-custom").set_value(capture.base_url)
    next(b for b in at.button if b.label == "Test endpoint").click().run()
    assert not at.exception and capture.auth
    assert all(CANARY not in a for a in capture.auth), "the server's OPENAI_API_KEY went to a typed URL"
    capture.auth.clear()
    at.text_input(key="key-custom").set_value("sk-typed-in-the-browser-00000")
    next(b for b in at.button if b.label == "Apply to all roles").click().run()
    assert not at.exception
    overrides = at.session_state["backend_overrides"]
    assert overrides["llm.base_url"] == capture.base_url and overrides["llm.api_key_env"] == SESSION_KEY_ENV
    assert "sk-typed" not in repr(overrides)
    next(b for b in at.button if b.label == "Test endpoint").click().run()
    assert set(capture.auth) == {"Bearer sk-typed-in-the-browser-00000"}


@pytest.mark.app
def test_an_unreachable_operator_endpoint_is_an_error_callout(app, no_operator_settings, monkeypatch, tmp_path):
    from llm_server import free_port

    monkeypatch.setenv("TMEM_BACKEND_CONFIG", toml(tmp_path, f"""
[endpoints.down]
base_url = "http://127.0.0.1:{free_port()}/v1"
model = "m"
"""))
    at = app(SETTINGS)
    at.selectbox(key="endpoint-all").set_value(at.selectbox(key="endpoint-all").options[1])
    next(b for b in at.button if b.label == "Test endpoint").click().run()
    assert not at.exception
    error = " ".join(e.value for e in at.error).replace("\\", "")
    assert "chat call failed" in error and "no connection" in error and "no API key is set" in error
