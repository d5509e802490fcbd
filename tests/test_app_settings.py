"""AppTest: the Settings page (backends per role, paper parameters, URL overrides) and the backend banner that
every page shows."""
from __future__ import annotations

import pytest

from tmem import api
from tmem.config import config_hash, field_help, variant_config

pytestmark = pytest.mark.app  # every test here runs the explorer under AppTest

SETTINGS = "pages/settings.py"
PAGES = ["pages/corpus.py", "pages/question.py", "pages/failures.py", "pages/compare.py", SETTINGS]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_shows_the_active_backend(app, page):
    at = app(page, corpus="golden", scope="golden", q="q1")
    assert not at.exception
    assert any("Backend: offline" in i.value for i in at.sidebar.info)


def test_the_banner_names_the_relation_role_of_the_selected_variant(app):
    at = app("pages/question.py", corpus="golden", scope="golden", q="q1")
    assert any("links: offline\\:revision\\-first" in i.value for i in at.sidebar.info)
    for variant, shown in (("state-structuring", "links: offline\\:state\\-relation"), ("flat", None)):
        at.selectbox(key="variant").set_value(variant).run()
        assert not at.exception
        banner = next(i.value for i in at.sidebar.info if "Backend: offline" in i.value)
        assert (shown in banner) if shown else "links:" not in banner, banner


def test_roles_table_and_parameters(app):
    at = app(SETTINGS)
    roles = next(d.value for d in at.dataframe if "role" in d.value.columns).set_index("role")
    assert roles.loc["answer", "offline"] == "yes" and roles.loc["answer", "backend"].startswith("offline:")
    params = next(d.value for d in at.dataframe if "parameter" in d.value.columns)
    assert "retrieval.k" in set(params["parameter"])


def test_changing_k_changes_the_configuration_everywhere(app):
    at = app(SETTINGS, edit="true")  # the parameter form open (its expander's state is in the URL)
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


def test_the_form_shows_the_selected_variants_values(app):
    at = app(SETTINGS, variant="no-compression", edit="true")
    assert at.selectbox(key="p-compression.mode").value == "truncate"
    assert at.checkbox(key="p-discovery.enabled").value is True
    at.query_params["variant"] = "flat"  # AppTest has no browser URL: mirror what the bound widget writes there
    at.selectbox(key="variant").set_value("flat").run()
    assert at.selectbox(key="p-compression.mode").value == "compress"  # refilled for the new variant
    assert at.checkbox(key="p-discovery.enabled").value is False
    assert at.selectbox(key="p-answer.presentation").value == "flat"


def test_a_preset_can_be_set_back_to_a_paper_default(app):
    at = app(SETTINGS, variant="flat", edit="true")
    at.checkbox(key="p-discovery.enabled").check()
    next(b for b in at.button if b.label == "Apply parameters").click().run()
    assert not at.exception
    assert at.session_state["config_overrides"] == {"discovery.enabled": True}  # the diff against flat's preset
    params = next(d.value for d in at.dataframe if "parameter" in d.value.columns).set_index("parameter")
    assert params.loc["discovery.enabled", "value"] == "on" and params.loc["structuring.enabled", "value"] == "off"
    assert at.checkbox(key="p-discovery.enabled").value is True
    next(b for b in at.button if b.label == "Reset to the variant's preset").click().run()
    assert at.session_state["config_overrides"] == {} and at.checkbox(key="p-discovery.enabled").value is False


def test_the_parameter_form_is_built_only_while_open(app):
    """Issue 42 item 9: the form's 40 inputs were most of the page's DOM on every visit. Closed (the default), its
    expander builds none of them while the table still lists every value; opened (a link opens it with `edit=true`, as
    the other tests do), all 40 with the effective values."""
    at = app(SETTINGS, cfg="retrieval.k=7")
    assert any(e.label == "Change parameters" for e in at.expander)
    assert not [w for w in (*at.number_input, *at.checkbox, *at.selectbox, *at.multiselect, *at.text_input)
                if str(w.key).startswith("p-")], "no parameter input while the form is closed"
    assert not any(b.label == "Apply parameters" for b in at.button)
    params = next(d.value for d in at.dataframe if "parameter" in d.value.columns).set_index("parameter")
    assert params.loc["retrieval.k", "value"] == "7" and len(params) == len(field_help())
    assert params["help"].str.len().min() > 0, "every parameter's help text readable in the table"
    at.session_state["edit"] = True  # what opening it in a browser sets
    at.run()
    inputs = [w for w in (*at.number_input, *at.checkbox, *at.selectbox, *at.multiselect, *at.text_input)
              if str(w.key).startswith("p-")]
    assert len(inputs) == len(field_help()) and at.number_input(key="p-retrieval.k").value == 7
