"""What a run is set up with and how it goes, as the explorer shows it: the Settings form's values and rows, the role
banner, progress-bar text and the per-stage summary of a trace. Pure functions of their arguments: no I/O.

The services the pages call to reach the store and the pipeline (open a store, resolve a configuration, build roles,
find or run and store a trace, import a corpus) are the library's front door, tmem.api, which the CLI uses too.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from tmem.config import TMemConfig, field_help, variant_config
from tmem.types import Trace


# ---------------------------------------------------------------------------------------- configuration
def config_values(config: TMemConfig) -> dict[str, Any]:
    """{"section.field": value} of every parameter in `config`: what the Settings form shows."""
    return {key: value for key, (value, _help) in field_help(config).items()}


def overrides_against_preset(variant: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The values that differ from the variant's preset: what the Settings form keeps as overrides (and `cfg=`).
    Diffing against the preset rather than the paper defaults lets a preset be set back to a default value (e.g.
    discovery on for `flat`) and keeps a preset's own values out of the overrides."""
    preset = config_values(variant_config(variant))
    return {key: value for key, value in values.items() if key in preset and value != preset[key]}


PARAM_CHOICES = {"compression.mode": ("compress", "truncate"), "answer.presentation": ("forest", "flat")}


def config_rows(config: TMemConfig) -> pd.DataFrame:
    """Every parameter with the value in `config`, the paper default and the help text."""
    defaults = field_help()
    rows = [{"parameter": key, "value": shown_value(getattr(getattr(config, key.split(".")[0]), key.split(".")[1])),
             "paper default": shown_value(default), "help": help_} for key, (default, help_) in defaults.items()]
    return pd.DataFrame(rows)


def shown_value(value: Any) -> str:
    """A parameter value as a person reads it: on / off, "a, b" for a tuple, "—" for none."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple | list):
        return ", ".join(map(shown_value, value)) or "—"
    return "—" if value is None else str(value)


# ------------------------------------------------------------------------------------------------ roles
def role_rows(roles) -> pd.DataFrame:
    """Role, backend, offline? — for the banner on every page and the Settings page."""
    offline = {name: getattr(getattr(roles, name), "offline", False)
               for name in ("evidence_utility", "relation", "answer", "judge")}
    offline["embedder"] = getattr(roles.embedder, "offline", True)
    offline["token_counter"] = not getattr(roles.tokens, "exact", True)
    return pd.DataFrame([{"role": k, "backend": v, "offline": "yes" if offline.get(k, False) else "no"}
                         for k, v in roles.describe().items()])


BANNER_ROLES = {"evidence_utility": "evidence selection", "relation": "relation", "answer": "answer",
                "judge": "judge"}


def backend_banner(roles, relation: str | None = None) -> list[str]:
    """One line per distinct model endpoint with the roles that use it ("openai:m@url: answer, judge"): the
    decoding settings in a backend's label differ per role, so listing labels repeated one endpoint per role.
    `relation`: the relation role the selected variant runs (tmem.pipeline.structuring.relation_backend), "" when
    it builds no forest; None: the one `roles` holds."""
    by_endpoint: dict[str, list[str]] = {}
    for name, shown in BANNER_ROLES.items():
        if name == "relation" and relation == "":
            continue
        label = relation if name == "relation" and relation else getattr(roles, name).backend
        by_endpoint.setdefault(label.split(" [", 1)[0], []).append(shown)
    return [f"{endpoint}: {', '.join(names)}" for endpoint, names in by_endpoint.items()]


def all_offline(roles) -> bool:
    return all(getattr(getattr(roles, n), "offline", False) for n in ("evidence_utility", "relation", "answer",
                                                                      "judge"))


STAGE_WEIGHTS = {"seed_retrieval": (0.0, 0.05), "embedding": (0.05, 0.3), "discovery": (0.05, 0.35),
                 "structuring": (0.35, 0.75), "compression": (0.75, 0.8), "answer": (0.8, 0.95), "judge": (0.95, 1.0)}


def overall_progress(stage: str, fraction: float) -> float:
    """Map a stage's own progress onto one 0..1 bar."""
    lo, hi = STAGE_WEIGHTS.get(stage, (0.0, 1.0))
    return min(1.0, lo + (hi - lo) * max(0.0, min(1.0, fraction)))


def stage_text(stage: str, fraction: float) -> str:
    """Progress-bar text for one pipeline stage."""
    if stage == "embedding":
        return f"Embedding the scope's messages (once per scope and embedder): {fraction:.0%}"
    return f"{stage.replace('_', ' ').capitalize()}: {fraction:.0%}"


def trace_summary(trace: Trace) -> pd.DataFrame:
    """Stage, seconds, counts, backend, offline, errors — one row per stage."""
    return pd.DataFrame([{"stage": s.name, "seconds": round(s.seconds, 3),
                          "counts": ", ".join(f"{k}={v:g}" for k, v in s.counts.items()), "backend": s.backend,
                          "offline": "yes" if s.offline else "no",
                          "tokens in/out": f"{s.usage.prompt_tokens}/{s.usage.completion_tokens}",
                          "errors": "; ".join(f"{e.message} -> {e.fallback}" for e in s.errors)}
                         for s in trace.stages])
