"""The relation role of Temporal Memory Structuring (Eq. 5, App. K), in one place.

A run's relation role is chosen here and nowhere else (`resolve_relation`): a language-model role
(tmem/models/llm/roles.py) is used as configured; otherwise the offline rule that `structuring.relation_rule` names,
built from the run's StructuringConfig (its thresholds) with the scope's embedder. Until a run's configuration is
known (the roles are built before it) the offline role is `ConfiguredRule`, which names the choice and labels nothing.

The rules, one module each: `revision-first` (the default: revision_first.py, the precision-first revision layer of
revision.py deciding first, then the fitted role), `fitted` (fitted.py over features.py, with slots.py and query.py),
`state` (state.py, the state-seeking rule), `cue-overlap` (cue_overlap.py, the baseline). What a message says about a
state is values.py; the signals they share (IDF, overlap, addressing) are signals.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from tmem.config import StructuringConfig
from tmem.models.base import RelationResult
from tmem.models.relation.cue_overlap import CueOverlapRelation
from tmem.models.relation.fitted import WEIGHTS, FittedRelation, reread_seconds, shared_decisions
from tmem.models.relation.revision_first import RevisionFirstRelation
from tmem.models.relation.state import StateRelation

RULES = {"revision-first": RevisionFirstRelation, "fitted": FittedRelation, "state": StateRelation,
         "cue-overlap": CueOverlapRelation}

__all__ = ["RULES", "WEIGHTS", "ConfiguredRule", "CueOverlapRelation", "FittedRelation", "RevisionFirstRelation",
           "StateRelation",
           "relation_backend", "reread_seconds", "resolve_relation", "rule_for", "shared_decisions"]


@dataclass(frozen=True)
class ConfiguredRule:
    """The offline relation role of a Roles set: "the rule the run's `structuring.relation_rule` names", resolved by
    `resolve_relation` at the structuring stage. Its name is the default configuration's rule (what `Roles.describe`
    prints and what stored traces are keyed by; a variant that runs another rule names it, `relation_backend`).
    Calling it directly is a programming error, said as such."""

    backend: str = RULES[StructuringConfig().relation_rule].backend
    offline: bool = True

    def label_pairs(self, question, child, candidates, scope) -> RelationResult:
        raise RuntimeError("the offline relation role is chosen per run: call "
                           "tmem.models.relation.resolve_relation(role, config.structuring, embedder) first")


def rule_for(config: StructuringConfig, embedder=None):
    """The offline rule `config.relation_rule` names, built from the config, with `embedder`."""
    if config.relation_rule not in RULES:
        raise ValueError(f"unknown offline relation rule {config.relation_rule!r}; known: {', '.join(RULES)}")
    return RULES[config.relation_rule].from_config(config, embedder)


def resolve_relation(role, config: StructuringConfig, embedder=None):
    """The relation role a run under `config` uses: a language-model role as given; an offline one (ConfiguredRule,
    or any offline rule passed in) is replaced by the rule the config names. A counted role of `run --estimate`
    (tmem.models.llm.dry_run) takes that rule as the stand-in for what it does not send."""
    if role.offline:
        return rule_for(config, embedder)
    if hasattr(role, "with_offline_rule"):
        return role.with_offline_rule(rule_for(config, embedder))
    return role


def relation_backend(role, config: StructuringConfig) -> str | None:
    """The name of the relation role a run under `config` uses (None: it builds no forest), for headers and banners:
    a variant such as `state-structuring` is not announced under the default role's name."""
    return resolve_relation(role, config).backend if config.enabled else None
