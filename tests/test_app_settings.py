"""AppTest: the Settings page (backends per role, paper parameters, URL overrides) and the backend banner that
every page shows."""
from __future__ import annotations

import pytest

from tmem import api
from tmem.config import config_hash, variant_config

SETTINGS = "pages/settings.py"
PAGES = ["pages/corpus.py", "pages/question.py", "pages/failures.py", "pages/compare.py", SETTINGS]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_shows_the_active_backend(app, page):
    at = app(page, corpus="golden", scope="golden", q="q1")
    assert not at.exception
    assert any("Backend: offline" in i.value for i in at.sidebar.info)


def test_roles_table_and_parameters(app):
    at = app(SETTINGS)
    roles = next(d.value for d in at.dataframe if "role" in d.value.columns).set_index("role")
    assert roles.loc["answer", "offline"] and roles.loc["answer", "backend"].startswith("offline:")
    params = next(d.value for d in at.dataframe if "parameter" in d.value.columns)
    assert "retrieval.k" in set(params["parameter"])


def test_changing_k_changes_the_configuration_everywhere(app):
    at = app(SETTINGS)
    at.number_input(key="p-retrieval.k").set_value(12)
    next(b for b in at.button if b.label == "Apply parameters").click().run()
    assert not at.exception
    assert at.session_state["config_overrides"] == {"retrieval.k": 12}
    assert any("Parameter overrides" in c.value and "k=12" in c.value for c in at.sidebar.caption)
    params = next(d.value for d in at.dataframe if "parameter" in d.value.columns).set_index("parameter")
    assert params.loc["retrieval.k", "value"] == "12"
    at.switch_page("pages/question.py").run()
    expected = config_hash(api.resolve_config("full", {"retrieval.k": 12}))
    assert any(expected in c.value for c in at.caption)
    assert expected != config_hash(variant_config("full"))


def test_overrides_come_from_the_url(app):
    at = app(SETTINGS, cfg="retrieval.k=7,discovery.mu=0.5")
    params = next(d.value for d in at.dataframe if "parameter" in d.value.columns).set_index("parameter")
    assert params.loc["retrieval.k", "value"] == "7" and params.loc["discovery.mu", "value"] == "0.5"
    next(b for b in at.button if b.label == "Reset to the variant's preset").click().run()
    assert at.session_state["config_overrides"] == {}


def test_backend_form_keeps_keys_out_of_state(app, monkeypatch):
    monkeypatch.setenv("TMEM_TEST_KEY", "sk-secret-value")
    at = app(SETTINGS)
    next(t for t in at.text_input if t.label == "API key environment variable").set_value("TMEM_TEST_KEY")
    next(b for b in at.button if b.label == "Apply to all roles").click().run()  # the key variable: all-roles row
    assert not at.exception
    state = repr(at.session_state["backend_overrides"])
    assert "TMEM_TEST_KEY" in state and "sk-secret-value" not in state
    assert any("is set" in c.value for c in at.caption)


def test_the_form_shows_the_selected_variants_values(app):
    at = app(SETTINGS, variant="no-compression")
    assert at.selectbox(key="p-compression.mode").value == "truncate"
    assert at.checkbox(key="p-discovery.enabled").value is True
    at.query_params["variant"] = "flat"  # AppTest has no browser URL: mirror what the bound widget writes there
    at.selectbox(key="variant").set_value("flat").run()
    assert at.selectbox(key="p-compression.mode").value == "compress"  # refilled for the new variant
    assert at.checkbox(key="p-discovery.enabled").value is False
    assert at.selectbox(key="p-answer.presentation").value == "flat"


def test_a_preset_can_be_set_back_to_a_paper_default(app):
    at = app(SETTINGS, variant="flat")
    at.checkbox(key="p-discovery.enabled").check()
    next(b for b in at.button if b.label == "Apply parameters").click().run()
    assert not at.exception
    assert at.session_state["config_overrides"] == {"discovery.enabled": True}  # the diff against flat's preset
    params = next(d.value for d in at.dataframe if "parameter" in d.value.columns).set_index("parameter")
    assert params.loc["discovery.enabled", "value"] == "True" and params.loc["structuring.enabled", "value"] == "False"
    assert at.checkbox(key="p-discovery.enabled").value is True
    next(b for b in at.button if b.label == "Reset to the variant's preset").click().run()
    assert at.session_state["config_overrides"] == {} and at.checkbox(key="p-discovery.enabled").value is False


def test_one_endpoint_row_for_all_roles_and_its_test_button(app):
    from llm_server import FaultServer

    server = FaultServer(("ok", "OK"))
    try:
        at = app(SETTINGS)
        at.selectbox(key="be-all").set_value("openai")
        at.text_input(key="model-all").set_value("fault")
        at.text_input(key="url-all").set_value(server.base_url)
        next(b for b in at.button if b.label == "Test endpoint").click().run()
        assert not at.exception
        shown = " ".join(s.value for s in at.success).replace("\\", "")  # markdown escapes (md)
        assert "127.0.0.1" in shown and "fault answered in" in shown and "one-token reply" in shown
        assert server.requests and server.requests[-1]["max_tokens"] == 1
        assert at.session_state["backend_overrides"] == {}, "testing applies nothing"
        next(b for b in at.button if b.label == "Apply to all roles").click().run()
        assert at.session_state["backend_overrides"] == {
            "llm.backend": "openai", "llm.model": "fault", "llm.base_url": server.base_url,
            "llm.api_key_env": "OPENAI_API_KEY", "embedder.kind": "lexical"}
        roles = next(d.value for d in at.dataframe if "role" in d.value.columns).set_index("role")
        assert not roles.loc[["evidence_utility", "relation", "answer", "judge"], "offline"].any(), "all four roles"
    finally:
        server.close()


def test_an_unreachable_endpoint_is_an_error_callout(app):
    from llm_server import free_port

    at = app(SETTINGS)
    at.selectbox(key="be-all").set_value("openai")
    at.text_input(key="model-all").set_value("m")
    at.text_input(key="url-all").set_value(f"http://127.0.0.1:{free_port()}/v1")
    next(b for b in at.button if b.label == "Test endpoint").click().run()
    assert not at.exception
    error = " ".join(e.value for e in at.error).replace("\\", "")
    assert "chat call failed" in error and "APIConnectionError" in error
