"""Settings view: the backend preset, one model endpoint for all roles (with a connection test), per-role overrides,
the embedder, and the paper's parameters (k, epsilon, mu, budget, ...).
Backend choices live in this browser session; parameter overrides travel in the URL (`cfg=`). API keys are read
from the environment variable a setting names and are never stored or shown."""
from __future__ import annotations

import os

import streamlit as st

from pages import ctx
from tmem import api
from tmem.config import TMemConfig, field_help
from tmem.models.local import backend_presets
from tmem.models.probe import probe_endpoint
from tmem.models.settings import EMBEDDER_KINDS, BackendSettings
from tmem.viz import explorer
from tmem.viz.safe import md

ROLES = ("evidence_utility", "relation", "answer", "judge")
c = ctx()
st.subheader("Settings")
st.markdown("**Active backends**")
st.dataframe(explorer.role_rows(c.roles), hide_index=True)
st.caption("`offline = True` marks a deterministic stand-in, not a language model; its answers are labelled "
           "offline everywhere.")

current: dict = st.session_state.get("backend_overrides", {})
presets = backend_presets()
now = current.get("backend.preset", "") if set(current) <= {"backend.preset"} else None
names, labels = list(presets), list(presets.values())  # labels as options: AppTest sets them by label
label = st.radio("Backend preset", labels, index=names.index(now) if now in names else 0, key="backend-preset",
                 help="The local model is a packaged 1.5B model on this machine's CPU (make install-local): "
                      "it answers and judges, slowly and often wrongly on update questions; it does not "
                      "structure well, which is why 'local' keeps selection and structuring offline. "
                      "'Recorded' replays its stored replies to the demo's curated questions with no server.")
picked = names[labels.index(label)]
if picked != now and st.button("Apply preset", type="primary"):
    st.session_state["backend_overrides"] = {"backend.preset": picked} if picked else {}
    st.rerun()

effective = BackendSettings.from_sources(overrides=current)
first = effective.role("answer")
st.markdown("**Model endpoint — all roles**")
st.caption("One OpenAI-compatible endpoint (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp) for evidence utility, "
           "relation, answer and judge. *Test endpoint* sends one short request (the model list and a one-token "
           "reply) and shows the latency and the model that answered; nothing is stored.")
with st.form("endpoint", border=False):
    a, b, d, e = st.columns([1, 2, 3, 2])
    backend = a.selectbox("all roles", ["offline", "openai"], index=int(first.backend == "openai"), key="be-all")
    model = b.text_input("model", first.model, key="model-all", placeholder="gpt-4o-mini")
    url = d.text_input("OpenAI-compatible base URL", first.base_url, key="url-all",
                       placeholder="http://127.0.0.1:8000/v1 (empty = api.openai.com)")
    key_env = e.text_input("API key environment variable", first.api_key_env)
    st.caption(f"{md(key_env)} is {'set' if os.environ.get(key_env) else 'not set'} in the server's environment. "
               "The key itself is never stored or displayed.")
    kinds = list(EMBEDDER_KINDS)
    kind = st.selectbox("Embedder (in-window ranking)", kinds, index=kinds.index(effective.embedder.kind))
    left, right, _ = st.columns([1.2, 1, 4])
    apply = left.form_submit_button("Apply to all roles", type="primary", icon=":material/check:")
    test = right.form_submit_button("Test endpoint", icon=":material/network_ping:")
if test:
    if backend == "offline":
        st.session_state["endpoint_probe"] = None
        st.info("The offline stand-ins need no endpoint: choose *openai* and a model to test one.")
    else:
        with st.spinner(f"Asking {md(url or 'api.openai.com')}…"):
            st.session_state["endpoint_probe"] = probe_endpoint(url, model, key_env)
probe = st.session_state.get("endpoint_probe")
if probe is not None:
    timing = " · ".join(f"{what} {seconds * 1000:.0f} ms" for what, seconds in
                        (("GET /models", probe.models_s), ("one-token reply", probe.chat_s)) if seconds is not None)
    text = f"**{md(probe.url)}** — {md(probe.message)}" + (f"  \n{timing}" if timing else "")
    (st.success if probe.ok else st.error)(text, icon=":material/network_ping:" if probe.ok else ":material/error:")
if apply:
    chosen = {"llm.backend": backend, "llm.api_key_env": key_env, "embedder.kind": kind}
    if backend == "openai":
        chosen.update({"llm.model": model, "llm.base_url": url})
    st.session_state["backend_overrides"] = chosen
    st.rerun()

with st.expander("Per role (overrides the all-roles row)", icon=":material/cloud:", expanded=False):
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
        if st.form_submit_button("Apply backends", type="primary"):
            st.session_state["backend_overrides"] = {**chosen, "llm.api_key_env": effective.answer.api_key_env,
                                                     "embedder.kind": effective.embedder.kind}
            st.rerun()
if current and st.button("Back to offline defaults"):
    st.session_state["backend_overrides"] = {}
    st.session_state["endpoint_probe"] = None
    st.rerun()

st.markdown("**Paper parameters**")
st.caption(f"The form shows the effective values of variant `{c.variant}`: its preset of the paper defaults "
           "(Sec. 5.1, App. C; the table below lists both) plus the changes applied here. Changes are kept as "
           "differences from the variant's preset, change the configuration hash (stored traces are per hash) and "
           "travel in the URL.")
overrides: dict = dict(st.session_state.get("config_overrides", {}))
effective = explorer.config_values(c.config)
filled_for = (c.variant, api.format_overrides(overrides))
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
