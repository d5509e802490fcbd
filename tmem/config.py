"""TMemConfig: one frozen configuration object whose fields carry the paper's defaults (Sec. 5.1, App. C).

Each stage has its own section; every field has help text (`field_help`), so the CLI, the README and the app's
settings page describe the same knobs. Ablations of Sec. 5.5 / 5.7 / App. E are named presets in `VARIANTS`.
`config_hash` identifies a configuration in run records and caches.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
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
class DiscoveryConfig(_Checked):
    enabled: bool = _f(True, "Run Temporal Evidence Discovery (Sec. 4.2); off = seeds only.")
    use_topic: bool = _f(True, "Cluster anchors per topic and search windows within the topic (off: Exp-6).")
    eps_hours: float = _f(12.0, "DBSCAN temporal radius epsilon in hours.")
    min_samples: int = _f(2, "DBSCAN MinPts.")
    delta_hours: float = _f(2.0, "Span floor delta in the density rho = |C| / max(dt, delta) (Eq. 2), hours.")
    mu: float = _f(0.25, "Density threshold mu in anchors per hour; clusters with rho > mu become windows.")
    pad_hours: float = _f(12.0, "Padding added on both sides of an accepted cluster's span, hours.")
    top_n: int = _f(100, "Messages per window passed to Evidence Utility Selection, ranked by embedding similarity.")
    locality: str = _f("topic", "What a window stays inside: 'topic' (the paper: the anchor's topic, or the whole "
                       "scope without topics); 'channel' = the topic, or the anchor's channel where the scope has no "
                       "topic (a workspace export's conversations).", ("topic", "channel"))
    clock: str = _f("hours", "Clock of the radius, span floor, padding and density: 'hours' (the paper: eps_hours, "
                    "delta_hours, pad_hours, mu per hour) or 'messages' = the message's position among the "
                    "messages of its topic or channel (eps_messages, delta_messages, pad_messages), so a window "
                    "holds as many messages in a busy scope as in a quiet one.", ("hours", "messages"))
    eps_messages: int = _f(40, "clock 'messages': DBSCAN radius in messages.")
    delta_messages: int = _f(10, "clock 'messages': span floor of the density, in messages.")
    pad_messages: int = _f(20, "clock 'messages': padding on both sides of an accepted cluster, in messages.")
    density_test: str = _f("absolute", "'absolute' = rho > mu (the paper's fixed threshold); 'background' = the "
                           "likelihood-ratio rule of App. F.1 (Prop. 1): rho > mu* = (l1 - l0) / ln(l1 / l0), with l0 "
                           "the background anchor rate of the cluster's topic or channel (its anchors over its "
                           "span on the clock) and l1 = rate_ratio * l0.", ("absolute", "background"))
    rate_ratio: float = _f(10.0, "density_test 'background': assumed in-episode anchor rate over the background "
                           "rate, l1 / l0 (> 1).")
    prior_boost: float = _f(0.0, "Locality as a prior, not a filter: > 0 ranks each topic's window messages and its "
                            "global embedding top-n together, window messages' similarity raised by this much; "
                            "0 = windows only (the paper).")


@dataclass(frozen=True)
class StructuringConfig(_Checked):
    enabled: bool = _f(True, "Run Temporal Memory Structuring (Sec. 4.3); off = a flat list.")
    use_topic: bool = _f(True, "Require parent and child to share a topic (Eq. 4).")
    use_phase: bool = _f(True, "Require (stage, phase_order, phase_progress) of the parent <= the child's (Eq. 4).")
    typed: bool = _f(True, "Keep UPDATE/EXPAND labels; off = every edge is RELATED (untyped forest, App. E.3).")
    max_candidates: int = _f(0, "Most recent eligible parents shown to the relation role per child; 0 = all.")
    relation_rule: str = _f(
        "revision-first", "Offline relation role: 'revision-first' (the default) lets a precision-first layer decide "
        "first (an explicit revision that names a new value for a slot stated earlier is an UPDATE of that slot's "
        "latest statement, tmem/models/relation/revision.py) and the 'fitted' role the rest; 'fitted' weighs the "
        "signals of a superseded or elaborated state (the state "
        "rule's own choice among them) with a small model fitted on dev gold edges only (tmem/models/"
        "relation/weights.json; better than 'state' on held-out case studies and IRC test, docs/evaluation.md); "
        "'state' is the hand-ordered rule that looks for the earlier state a message changes (UPDATE) or elaborates "
        "(EXPAND); 'cue-overlap' is the earlier reply/cue/word-overlap rule, kept as a baseline. An LLM relation "
        "role ignores it.", ("revision-first", "fitted", "state", "cue-overlap"))
    revision_relevance: float = _f(0.45, "Offline 'revision-first' rule: least relevance (embedding similarity and "
                                         "IDF-weighted overlap) of an earlier statement of the slot an explicit "
                                         "revision gives a new value for (dev: docs/evaluation.md, issue 38).")
    update_tip: bool = _f(False, "Follow each UPDATE to the tip of its parent's chain among the evidence: a later "
                          "revision of a state that an earlier child already UPDATEd attaches to that child "
                          "(tmem/pipeline/structuring.py, follow_update_tips). Off by default: measured on dev "
                          "(docs/evaluation.md, issue 38).")
    update_relevance: float = _f(0.25, "Offline 'state' rule: least relevance (embedding similarity and IDF-weighted "
                                       "overlap) of the stated state a state-changing message UPDATEs.")
    expand_relevance: float = _f(0.45, "Offline 'state' rule: least relevance for an EXPAND without a reply, address "
                                       "or continuation; below it the message is a ROOT.")
    query_ties: bool = _f(False, "Offline 'fitted' rule: when its two most probable parents are within "
                          "query_tie_margin, the one clearly more relevant to the question wins (Eq. 5 is "
                          "conditioned on q; tmem/models/relation/query.py). Off by default: on cases dev (links "
                          "--questions) it moved edge accuracy 0.757 -> 0.758 with the sixth iteration's weights "
                          "(0.744 -> 0.751 with the previous ones, the gain in two scopes; docs/evaluation.md).")
    query_tie_margin: float = _f(0.15, "Offline 'fitted' rule with query_ties: largest P(best) - P(runner-up) between "
                                      "two parents that the question may settle.")


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
    flat_budget: str = _f("same", "Budget rule of the flat list beside a forest: 'same' = the forest's (the spans "
                          "compression omitted stay omitted, then the cut at B); 'truncate' = only cut at B (anchors "
                          "first, so recovered messages are cut first).", ("same", "truncate"))
    flat_order: str = _f("rank", "Order of every flat list (the flat answer, the flat list beside a forest): "
                         "'rank' = retrieval-rank order, anchors first (App. I); 'chronological' = by timestamp, as "
                         "Sec. 5.4's BM25 (Expand) list (a cut at B then drops the latest messages first).",
                         ("rank", "chronological"))


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

# Each description says exactly which settings the preset changes against `full` (tests/test_ablations.py checks
# the configuration differs in those settings only, and that the trace differs from full's only from the first
# stage those settings reach).
VARIANTS: dict[str, tuple[str, _Preset]] = {
    "full": ("Full T-Mem: seeds, discovery, typed forest, compression.", lambda c: c),
    "flat": ("BM25 (Expand) baseline: discovery and structuring off, flat prompt (discovery.enabled, "
             "structuring.enabled, answer.presentation).",
             lambda c: c.with_("discovery", enabled=False).with_("structuring", enabled=False)
             .with_("answer", presentation="flat")),
    "no-discovery": ("w/o Temporal Evidence Discovery: forest over the BM25 seeds (discovery.enabled).",
                     lambda c: c.with_("discovery", enabled=False)),
    "no-structuring": ("w/o Temporal Memory Structuring: discovered evidence as a flat list, cut at B (no forest to "
                       "compress) (structuring.enabled, answer.presentation).",
                       lambda c: c.with_("structuring", enabled=False).with_("answer", presentation="flat")),
    "no-metadata": ("w/o metadata expansion: BM25 over message text only (retrieval.metadata_fields).",
                    lambda c: c.with_("retrieval", metadata_fields=())),
    "no-compression": ("w/o compression: contexts over B are cut at B (compression.mode).",
                       lambda c: c.with_("compression", mode="truncate")),
    "untyped-forest": ("App. E.3: the BM25-forest of Exp-3 with every relation labelled RELATED and the untyped "
                       "answer prompt (discovery.enabled, compression.mode, structuring.typed).",
                       lambda c: c.with_("discovery", enabled=False).with_("compression", mode="truncate")
                       .with_("structuring", typed=False)),
    "untyped-full": ("Full T-Mem with every relation labelled RELATED and the untyped answer prompt "
                     "(structuring.typed).", lambda c: c.with_("structuring", typed=False)),
    "flat-chronological": ("Full T-Mem, the flat list beside the forest in chronological order (Sec. 5.4) instead of "
                           "retrieval rank (App. I) (answer.flat_order).",
                           lambda c: c.with_("answer", flat_order="chronological")),
    "flat-truncated": ("Full T-Mem, the flat answer's list only cut at B instead of the forest's budget rule "
                       "(answer.flat_budget).", lambda c: c.with_("answer", flat_budget="truncate")),
    "no-topic-discovery": ("Exp-6: no topic in Temporal Evidence Discovery (discovery.use_topic).",
                           lambda c: c.with_("discovery", use_topic=False)),
    "no-topic-phase-structuring": ("Exp-6: no topic or phase in Temporal Memory Structuring (structuring.use_topic, "
                                   "structuring.use_phase).",
                                   lambda c: c.with_("structuring", use_topic=False, use_phase=False)),
    "no-topic-phase-both": ("Exp-6: no topic in discovery and no topic/phase in structuring (discovery.use_topic, "
                            "structuring.use_topic, structuring.use_phase).",
                            lambda c: c.with_("discovery", use_topic=False)
                            .with_("structuring", use_topic=False, use_phase=False)),
    "state-structuring": ("Full T-Mem with the hand-ordered state-seeking offline relation rule instead of the "
                          "default revision-first role (structuring.relation_rule).",
                          lambda c: c.with_("structuring", relation_rule="state")),
    "fitted-structuring": ("Full T-Mem with the fitted offline relation role alone, without the revision layer "
                           "that decides first by default (structuring.relation_rule).",
                           lambda c: c.with_("structuring", relation_rule="fitted")),
    "cue-overlap-structuring": ("Full T-Mem with the earlier offline cue-overlap relation rule (baseline) "
                                "(structuring.relation_rule).",
                                lambda c: c.with_("structuring", relation_rule="cue-overlap")),
    "channel-discovery": ("Full T-Mem with discovery windows kept inside the anchor's channel where the scope has no "
                          "topics (discovery.locality).", lambda c: c.with_("discovery", locality="channel")),
    "prior-discovery": ("Full T-Mem with locality as a prior: window messages (similarity + 0.1) and the topic's "
                        "global embedding top-n ranked together (discovery.prior_boost).",
                        lambda c: c.with_("discovery", prior_boost=0.1)),
    "adaptive-discovery": ("Full T-Mem with channel locality and locality as a prior, boost 0.1 (discovery.locality, "
                           "discovery.prior_boost).",
                           lambda c: c.with_("discovery", locality="channel", prior_boost=0.1)),
    "background-discovery": ("Full T-Mem with windows on the message clock of the anchor's channel and App. F.1's "
                             "likelihood-ratio test against the channel's background anchor rate (discovery.locality, "
                             "discovery.clock, discovery.density_test).",
                             lambda c: c.with_("discovery", locality="channel", clock="messages",
                                               density_test="background")),
    "bm25-forest": ("Exp-3: BM25 seeds + structuring, no discovery, no compression (discovery.enabled, "
                    "compression.mode).",
                    lambda c: c.with_("discovery", enabled=False).with_("compression", mode="truncate")),
    "bm25-forest-chronological": ("Sec. 5.4: the same BM25 (Expand) messages as a forest and, beside it, as a flat "
                                  "chronological list; no discovery, no compression (discovery.enabled, "
                                  "compression.mode, answer.flat_order).",
                                  lambda c: c.with_("discovery", enabled=False).with_("compression", mode="truncate")
                                  .with_("answer", flat_order="chronological")),
}


def variant_config(name: str, base: TMemConfig | None = None) -> TMemConfig:
    if name not in VARIANTS:
        raise KeyError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    return VARIANTS[name][1](base or TMemConfig())


# ------------------------------------------------------------------------------------------ overrides
# One grammar for every override, the CLI's `--set` and the app's `cfg=` URL parameter alike, so a link's value can
# be pasted into `--set`: `section.field=value` items joined by ",", a tuple's elements joined by "|" (a "," inside
# a tuple value also works: a new item starts only where "section.field=" follows the comma).
_ITEM_START = re.compile(r",(?=\s*[A-Za-z_]\w*\.[A-Za-z_]\w*\s*=)")
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _override_value(default: Any, raw: str) -> Any:
    if isinstance(default, bool):
        if raw.lower() not in _TRUE + _FALSE:
            raise ValueError(raw)
        return raw.lower() in _TRUE
    if isinstance(default, tuple):
        return tuple(v.strip() for v in re.split(r"[|,]", raw) if v.strip())
    return type(default)(raw)


def parse_overrides(text: str | Sequence[str] | None, *, strict: bool = True) -> dict[str, Any]:
    """"retrieval.k=12,retrieval.metadata_fields=channel|topic" (or several such strings, one per `--set`) ->
    {"retrieval.k": 12, "retrieval.metadata_fields": ("channel", "topic")}, each value of its field's type.
    strict: an unknown name or a bad value raises ValueError; otherwise (a pasted URL) it is dropped."""
    known = field_help()
    parts = [text] if isinstance(text, str) else list(text or ())
    out: dict[str, Any] = {}
    for item in (i for part in parts for i in _ITEM_START.split(part) if i.strip()):
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or name not in known:
            if strict:
                raise ValueError(f"bad setting {item!r}: expected section.field=value with a name from "
                                 f"{', '.join(known)}")
            continue
        default = known[name][0]
        try:
            out[name] = _override_value(default, raw.strip())
        except ValueError:
            if strict:
                raise ValueError(f"bad value in {item!r}: expected {type(default).__name__}") from None
    return out


def format_overrides(overrides: Mapping[str, Any]) -> str:
    """The inverse of `parse_overrides`: what the app puts in `cfg=` and what `--set` accepts."""
    fmt = lambda v: "|".join(v) if isinstance(v, tuple) else str(v).lower() if isinstance(v, bool) else str(v)
    return ",".join(f"{k}={fmt(v)}" for k, v in sorted(overrides.items()))


def apply_overrides(config: TMemConfig, overrides: Mapping[str, Any] | str | Sequence[str] | None) -> TMemConfig:
    """`config` with the overrides applied: a {"section.field": value} mapping, or text in the override grammar
    (parsed strictly: unknown names or bad values raise ValueError)."""
    if not isinstance(overrides, Mapping):
        overrides = parse_overrides(overrides)
    for key, value in overrides.items():
        section, name = key.split(".", 1)
        config = config.with_(section, **{name: value})
    return config
