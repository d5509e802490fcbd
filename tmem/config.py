"""TMemConfig: one frozen configuration object whose fields carry the paper's defaults (Sec. 5.1, App. C).

Each stage has its own section; every field has help text (`field_help`), so the CLI, the README and the app's
settings page describe the same knobs. Ablations of Sec. 5.5 / 5.7 / App. E are named presets in `VARIANTS`.
`config_hash` identifies a configuration in run records and caches.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any


def _f(default: Any, help: str, choices: tuple[str, ...] = ()) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


class _Checked:
    """Fields with `choices` accept only those values (a typo must not silently select another behaviour)."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            choices = f.metadata.get("choices")
            if choices and getattr(self, f.name) not in choices:
                raise ValueError(f"{type(self).__name__.removesuffix('Config').lower()}.{f.name} must be one of "
                                 f"{', '.join(map(repr, choices))}, not {getattr(self, f.name)!r}")


@dataclass(frozen=True)
class RetrievalConfig:
    k: int = _f(36, "Number of BM25 seed anchors R_k(q) (paper: 36).")
    metadata_fields: tuple[str, ...] = _f(
        ("channel", "phase", "topic", "author", "role"),
        "Metadata fields appended to the message text in the BM25 document (metadata expansion, App. C).")
    query_includes_user: bool = _f(True, "Prefix the query with the asking-user id (App. C).")
    k1: float = _f(1.5, "BM25 k1 (rank_bm25 BM25Okapi default).")
    b: float = _f(0.75, "BM25 b (rank_bm25 BM25Okapi default).")
    epsilon: float = _f(0.25, "BM25Okapi floor for negative idf, as a fraction of the mean idf.")


@dataclass(frozen=True)
class DiscoveryConfig:
    enabled: bool = _f(True, "Run Temporal Evidence Discovery (Sec. 4.2); off = seeds only.")
    use_topic: bool = _f(True, "Cluster anchors per topic and search windows within the topic (off: Exp-6).")
    eps_hours: float = _f(12.0, "DBSCAN temporal radius epsilon in hours.")
    min_samples: int = _f(2, "DBSCAN MinPts.")
    delta_hours: float = _f(2.0, "Span floor delta in the density rho = |C| / max(dt, delta) (Eq. 2), hours.")
    mu: float = _f(0.25, "Density threshold mu in anchors per hour; clusters with rho > mu become windows.")
    pad_hours: float = _f(12.0, "Padding added on both sides of an accepted cluster's span, hours.")
    top_n: int = _f(100, "Messages per window passed to Evidence Utility Selection, ranked by embedding similarity.")


@dataclass(frozen=True)
class StructuringConfig:
    enabled: bool = _f(True, "Run Temporal Memory Structuring (Sec. 4.3); off = a flat list.")
    use_topic: bool = _f(True, "Require parent and child to share a topic (Eq. 4).")
    use_phase: bool = _f(True, "Require (stage, phase_order, phase_progress) of the parent <= the child's (Eq. 4).")
    typed: bool = _f(True, "Keep UPDATE/EXPAND labels; off = every edge is RELATED (untyped forest, App. E.3).")
    max_candidates: int = _f(0, "Most recent eligible parents shown to the relation role per child; 0 = all.")


@dataclass(frozen=True)
class CompressionConfig(_Checked):
    budget_tokens: int = _f(8192, "Evidence-context budget B in tokens (Sec. 3, App. C).")
    mode: str = _f("compress", "'compress' = budgeted span compression (Eq. 6-7); 'truncate' = cut at B.",
                   ("compress", "truncate"))


@dataclass(frozen=True)
class AnswerConfig(_Checked):
    presentation: str = _f("forest", "Primary answer prompt: 'forest' (typed evidence forest) or 'flat' (App. I).",
                           ("forest", "flat"))
    also_flat: bool = _f(True, "Also answer from the same evidence as a flat list, for side-by-side comparison.")


@dataclass(frozen=True)
class TMemConfig:
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    structuring: StructuringConfig = field(default_factory=StructuringConfig)
    compression: CompressionConfig = field(default_factory=CompressionConfig)
    answer: AnswerConfig = field(default_factory=AnswerConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def with_(self, section: str, **changes: Any) -> TMemConfig:
        """A copy with some fields of one section changed: `cfg.with_("retrieval", k=12)`."""
        return replace(self, **{section: replace(getattr(self, section), **changes)})


def config_hash(config: TMemConfig) -> str:
    blob = json.dumps(config.to_dict(), sort_keys=True, default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def field_help(config: Any = None) -> dict[str, tuple[Any, str]]:
    """{"section.field": (default, help)} for every configurable field."""
    config = config or TMemConfig()
    out: dict[str, tuple[Any, str]] = {}
    for section in dataclasses.fields(config):
        for f in dataclasses.fields(getattr(config, section.name)):
            out[f"{section.name}.{f.name}"] = (getattr(getattr(config, section.name), f.name), f.metadata["help"])
    return out


# ---------------------------------------------------------------------------------------------- ablations
_Preset = Callable[[TMemConfig], TMemConfig]

VARIANTS: dict[str, tuple[str, _Preset]] = {
    "full": ("Full T-Mem: seeds, discovery, typed forest, compression.", lambda c: c),
    "flat": ("BM25 seeds only, flat prompt (the BM25 (Expand) baseline).",
             lambda c: c.with_("discovery", enabled=False).with_("structuring", enabled=False)
             .with_("answer", presentation="flat")),
    "no-discovery": ("w/o Temporal Evidence Discovery: forest over the BM25 seeds.",
                     lambda c: c.with_("discovery", enabled=False)),
    "no-structuring": ("w/o Temporal Memory Structuring: discovered evidence as a flat list.",
                       lambda c: c.with_("structuring", enabled=False).with_("answer", presentation="flat")),
    "no-metadata": ("w/o metadata expansion: BM25 over message text only.",
                    lambda c: c.with_("retrieval", metadata_fields=())),
    "no-compression": ("w/o compression: contexts over B are truncated.",
                       lambda c: c.with_("compression", mode="truncate")),
    "untyped-forest": ("Forest topology kept, every relation labelled RELATED (App. E.3).",
                       lambda c: c.with_("structuring", typed=False)),
    "no-topic-discovery": ("Exp-6: no topic in Temporal Evidence Discovery.",
                           lambda c: c.with_("discovery", use_topic=False)),
    "no-topic-phase-structuring": ("Exp-6: no topic or phase in Temporal Memory Structuring.",
                                   lambda c: c.with_("structuring", use_topic=False, use_phase=False)),
    "no-topic-phase-both": ("Exp-6: no topic in discovery and no topic/phase in structuring.",
                            lambda c: c.with_("discovery", use_topic=False)
                            .with_("structuring", use_topic=False, use_phase=False)),
    "bm25-forest": ("Exp-3: BM25 seeds + structuring, no discovery, no compression.",
                    lambda c: c.with_("discovery", enabled=False).with_("compression", mode="truncate")),
}


def variant_config(name: str, base: TMemConfig | None = None) -> TMemConfig:
    if name not in VARIANTS:
        raise KeyError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    return VARIANTS[name][1](base or TMemConfig())


def apply_overrides(config: TMemConfig, assignments: list[str]) -> TMemConfig:
    """Apply `section.field=value` assignments (e.g. `discovery.mu=0.5`, `retrieval.metadata_fields=topic,author`),
    converting each value to the field's type; unknown names or bad values raise ValueError."""
    for assignment in assignments:
        name, sep, raw = assignment.partition("=")
        section, _, field_name = name.strip().partition(".")
        current = getattr(config, section, None) if sep else None
        if current is None or not dataclasses.is_dataclass(current) or not hasattr(current, field_name):
            raise ValueError(f"bad setting {assignment!r}: expected section.field=value with a name from "
                             f"{', '.join(field_help())}")
        default = getattr(current, field_name)
        raw = raw.strip()
        try:
            if isinstance(default, bool):
                if raw.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                    raise ValueError(raw)
                value: Any = raw.lower() in ("true", "1", "yes", "on")
            elif isinstance(default, tuple):
                value = tuple(v.strip() for v in raw.split(",") if v.strip())
            else:
                value = type(default)(raw)
        except ValueError:
            raise ValueError(f"bad value in {assignment!r}: expected {type(default).__name__}") from None
        config = config.with_(section, **{field_name: value})
    return config
