"""Settings view: model backends per role, the embedder, and the paper's parameters (k, epsilon, mu, budget, ...).
Backend choices live in this browser session; parameter overrides travel in the URL (`cfg=`). API keys are read
from the environment variable a setting names and are never stored or shown."""
from __future__ import annotations

import os

import streamlit as st

from pages import ctx
from tmem.config import TMemConfig, field_help
from tmem.viz import explorer
from tmem.viz.safe import md

ROLES = ("evidence_utility", "relation", "answer", "judge")
c = ctx()
st.subheader("Settings")
st.markdown("**Active backends**")
st.dataframe(explorer.role_rows(c.roles), hide_index=True)
st.caption("`offline = True` marks a deterministic stand-in, not a language model; its answers are labelled "
           "offline everywhere.")

try:
    from tmem.models.settings import EMBEDDER_KINDS, BackendSettings
except ImportError:
    BackendSettings = None
current: dict = st.session_state.get("backend_overrides", {})
with st.expander("Model backends per role", icon=":material/cloud:", expanded=False):
    if BackendSettings is None:
        st.info("The backend settings module is not available in this build: every role runs offline.")
    else:
        effective = BackendSettings.from_sources(overrides=current)
        with st.form("backends", border=False):
            chosen: dict = {}
            for role in ROLES:
                r = effective.role(role)
                a, b, d = st.columns([1, 2, 3])
                backend = a.selectbox(role, ["offline", "openai"], index=0 if r.backend == "offline" else 1,
                                      key=f"be-{role}")
                model = b.text_input("model", r.model, key=f"model-{role}", placeholder="gpt-4o-mini")
                url = d.text_input("OpenAI-compatible base URL", r.base_url, key=f"url-{role}",
                                   placeholder="http://127.0.0.1:8000/v1 (empty = api.openai.com)")
                chosen[f"roles.{role}.backend"] = backend
                if backend == "openai":
                    chosen[f"roles.{role}.model"], chosen[f"roles.{role}.base_url"] = model, url
            key_env = st.text_input("API key environment variable", effective.answer.api_key_env)
            st.caption(f"{md(key_env)} is {'set' if os.environ.get(key_env) else 'not set'} in the server's "
                       "environment. The key itself is never stored or displayed.")
            kinds = list(EMBEDDER_KINDS)
            chosen["embedder.kind"] = st.selectbox("Embedder (in-window ranking)", kinds,
                                                   index=kinds.index(effective.embedder.kind))
            chosen["llm.api_key_env"] = key_env
            if st.form_submit_button("Apply backends", type="primary"):
                st.session_state["backend_overrides"] = chosen
                st.rerun()
        if st.button("Back to offline defaults"):
            st.session_state["backend_overrides"] = {}
            st.rerun()

st.markdown("**Paper parameters**")
st.caption(f"The form shows the effective values of variant `{c.variant}`: its preset of the paper defaults "
           "(Sec. 5.1, App. C; the table below lists both) plus the changes applied here. Changes are kept as "
           "differences from the variant's preset, change the configuration hash (stored traces are per hash) and "
           "travel in the URL.")
overrides: dict = dict(st.session_state.get("config_overrides", {}))
effective = explorer.config_values(c.config)
filled_for = (c.variant, explorer.format_overrides(overrides))
if st.session_state.get("params_filled_for") != filled_for:
    # keyed widgets keep their state when `value` changes: drop it, so another variant or new overrides refill the form
    for name in [k for k in st.session_state if str(k).startswith("p-")]:
        del st.session_state[name]
    st.session_state["params_filled_for"] = filled_for
with st.form("params"):
    values = {}
    sections = sorted({k.split(".")[0] for k in field_help()}, key=list(TMemConfig.__dataclass_fields__).index)
    for column, section in zip(st.columns(len(sections)), sections):
        column.markdown(f"*{section}*")
        for key, (default, help_) in field_help().items():
            if not key.startswith(section + "."):
                continue
            now, label = effective[key], key.split(".", 1)[1]
            if isinstance(default, bool):
                values[key] = column.checkbox(label, now, help=help_, key=f"p-{key}")
            elif isinstance(default, (int, float)):
                values[key] = column.number_input(label, value=now, help=help_, key=f"p-{key}")
            elif key in explorer.PARAM_CHOICES:
                choices = list(explorer.PARAM_CHOICES[key])
                values[key] = column.selectbox(label, choices, choices.index(now) if now in choices else 0,
                                               help=help_, key=f"p-{key}")
            elif isinstance(default, tuple):
                values[key] = tuple(column.multiselect(label, list(dict.fromkeys([*default, *now])), list(now),
                                                       help=help_, key=f"p-{key}"))
            else:
                values[key] = column.text_input(label, now, help=help_, key=f"p-{key}")
    if st.form_submit_button("Apply parameters", type="primary"):
        st.session_state["config_overrides"] = explorer.overrides_against_preset(c.variant, values)
        st.rerun()
if overrides and st.button("Reset to the variant's preset"):
    st.session_state["config_overrides"] = {}
    st.rerun()
st.markdown(f"**Configuration of variant `{c.variant}`**")
st.dataframe(explorer.config_rows(c.config), hide_index=True)
