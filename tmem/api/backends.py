"""The model backends as the CLI and the app choose them: the operator's settings (environment, tmem.toml) and the
endpoints a browser session may pick from them (tmem.models.llm.endpoints: the one gate for browser overrides), the
presets, a connection test, the recorded demo, the local model's progress, prices, and what a trace says about
the models that made it. The roles themselves are built by `tmem.api.build_roles` (a browser session) or
`roles_for` (the CLI's flags)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tmem.models.llm.budget_cap import Prices
from tmem.models.llm.endpoints import (
    ALLOW_ENV,
    FIELDS,
    SESSION_KEY_ENV,
    OperatorEndpoint,
    browser_endpoints_allowed,
    check_overrides,
    embedder_kinds,
    operator_endpoints,
    session_keys,
)
from tmem.models.llm.probe import probe_endpoint
from tmem.models.local.recorded import RECORDING, Recording, is_recorded, load_recording
from tmem.models.local.server import backend_presets
from tmem.models.local.server import watch as local_progress
from tmem.models.offline import offline_roles
from tmem.models.patterns import model_lines, trace_patterns
from tmem.models.settings import BackendSettings

__all__ = ["ALLOW_ENV", "FIELDS", "RECORDING", "SESSION_KEY_ENV", "BackendSettings", "OperatorEndpoint", "Prices",
           "Recording", "backend_presets", "browser_endpoints_allowed", "check_overrides", "embedder_kinds",
           "is_recorded", "load_recording", "local_progress", "model_lines", "offline_roles", "operator_endpoints",
           "operator_prices", "operator_settings", "probe_endpoint", "session_keys", "trace_patterns"]


def operator_settings(overrides: Mapping[str, Any] | None = None) -> BackendSettings:
    """The server's backend settings (environment, tmem.toml), with `overrides` on top."""
    return BackendSettings.from_sources(overrides=dict(overrides or {}))


def operator_prices() -> Prices:
    """The operator's token prices (TMEM_PRICE_INPUT / _OUTPUT, tmem.toml), for estimates and the cost cap."""
    settings = operator_settings()
    return Prices(settings.price_input, settings.price_output)
