"""The model roles as the CLI builds them from its flags (a browser session's go through `tmem.api.build_roles`,
which keeps to the operator's endpoints), and what the callers watch while they run: the response cache, calls in
flight, the first embedding of a scope, the local model's progress, the budget; then what a trace says about the
models that made it. Also the offline relation rules the `links` command compares."""
from __future__ import annotations

from tmem.baselines.ingestion import refusals as systems_refused
from tmem.models.embedders import embedding_progress
from tmem.models.factory import build_roles as roles_for
from tmem.models.factory import cache_stats, settings_budget
from tmem.models.llm.concurrency import mean_in_flight, peak_in_flight, reset_in_flight
from tmem.models.llm.tokens import default_token_counter
from tmem.models.local.server import ProgressWatch
from tmem.models.local.server import watch as local_progress
from tmem.models.offline import offline_roles
from tmem.models.relation import RULES, relation_backend, rule_for
from tmem.models.relation import WEIGHTS as RELATION_WEIGHTS
from tmem.models.reply_patterns import model_lines, trace_patterns

__all__ = ["RELATION_RULES", "RELATION_WEIGHTS", "ProgressWatch", "cache_stats", "default_token_counter",
           "systems_refused",
           "embedding_progress", "local_progress", "mean_in_flight", "model_lines", "offline_relation_roles",
           "offline_roles", "peak_in_flight", "relation_backend", "reset_in_flight", "roles_for", "settings_budget",
           "trace_patterns"]


RELATION_RULES = tuple(RULES)  # the offline relation rules by name, as structuring.relation_rule names them


def offline_relation_roles(rules, config, embedder) -> list:
    """The offline relation role each named rule gives under `config` (its thresholds, the embedder)."""
    return [rule_for(config.with_("structuring", relation_rule=rule).structuring, embedder) for rule in rules]
