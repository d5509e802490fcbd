"""The model backends as the CLI and the app choose them: the operator's settings (environment, tmem.toml) with
their flags' registry, the endpoints a browser session may pick from them (tmem.models.llm.endpoints: the one gate
for browser overrides), the presets and the local models, a connection test, what the settings would build, the
recorded demo and prices. Building and watching the roles is `tmem.api.models`."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tmem.models.describe import check, describe
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
from tmem.models.local.server import MODELS, backend_presets
from tmem.models.settings import ROLES, SETTINGS, BackendSettings

__all__ = ["ALLOW_ENV", "FIELDS", "MODELS", "RECORDING", "ROLES", "SESSION_KEY_ENV", "SETTINGS", "BackendSettings",
           "OperatorEndpoint", "Prices", "Recording", "backend_presets", "browser_endpoints_allowed", "check",
           "check_overrides", "describe", "embedder_kinds", "is_recorded", "load_recording", "operator_endpoints",
           "operator_prices", "operator_settings", "probe_endpoint", "session_keys"]


def operator_settings(overrides: Mapping[str, Any] | None = None) -> BackendSettings:
    """The server's backend settings (environment, tmem.toml), with `overrides` on top."""
    return BackendSettings.from_sources(overrides=dict(overrides or {}))


def operator_prices() -> Prices:
    """The operator's token prices (TMEM_PRICE_INPUT / _OUTPUT, tmem.toml), for estimates and the cost cap."""
    settings = operator_settings()
    return Prices(settings.price_input, settings.price_output)
