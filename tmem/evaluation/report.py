"""A stored batch run assembled for its report (`python -m tmem report`, written by tmem.viz.report.site): result rows
re-scored under a gold version with the review columns, annotations joined, the paired comparisons of its variants
and the what-if on k of every gold unit. Reads the store and the scopes; one trace in memory at a time.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from tmem.analysis.annotations import label_counts, with_annotations
from tmem.analysis.verdicts import with_primary
from tmem.analysis.whatif_k import k_curve, units_for_traces
from tmem.evaluation.gold_versions import ORIGINAL, gold_function, load_version, rescore
from tmem.evaluation.metrics import recall_eligible
from tmem.evaluation.review import comparisons, ordered_variants, primary_of_rows
from tmem.pipeline.run import open_scope


@dataclass
class Site:
    """What the report shows (built by `build`; tmem.viz.report.site.write writes it and fills `pages`)."""

    corpus: str
    run_id: str
    version: str
    judge: str
    rows: pd.DataFrame
    variants: list[str]
    primary: str
    pairs: list[dict]
    labels: pd.DataFrame
    whatif: dict = field(default_factory=dict)  # variant -> (KCurve, units, drifted)
    pages: dict = field(default_factory=dict)  # (variant, scope, question) -> file name
    skipped_pages: int = 0
    corrections: int = 0
    gold_of: Callable | None = None  # (scope, question id) -> Gold under `version`


def build(store, corpus: str, run_id: str, *, version: str = ORIGINAL, judge: str = "keep",
          variants: Sequence[str] | None = None, log: Callable[[str], None] = lambda s: None) -> Site:
    """Re-score the run under `version`, join the annotations, compare the variants and compute the what-if on k
    (one trace in memory at a time)."""
    scopes: dict = {}
    units: dict[str, list] = {}
    drifted: dict[str, int] = {}

    def scope_of(name: str):
        if name not in scopes:
            scopes[name] = open_scope(store, corpus, name)
        return scopes[name]

    def what_if(row, trace, gold) -> None:  # during the re-scoring pass: each trace is read once
        if not recall_eligible(trace.question, gold):  # the units Eq. 10 counts, as `run`'s recall
            return
        found, drift = units_for_traces([(trace, gold)], scope_of)
        units.setdefault(row["variant"], []).extend(found)
        drifted[row["variant"]] = drifted.get(row["variant"], 0) + drift

    rows = rescore(store, corpus, run_id, version, judge, on_trace=what_if)
    rows = with_annotations(rows, store.annotations(corpus))
    variants = ordered_variants(rows["variant"], variants)
    rows = rows.sort_values("variant", key=lambda v: v.map(variants.index), kind="stable").reset_index(drop=True)
    fixes = load_version(store, corpus, version)
    primary = primary_of_rows(rows)
    rows = with_primary(rows, primary)  # the verdict, attribution and category the app shows (one verdict model)
    pairs = comparisons(rows, variants, primary) if len(variants) > 1 else []
    site = Site(corpus, run_id, version, judge, rows, variants, primary, pairs, label_counts(rows),
                corrections=len(fixes), gold_of=gold_function(store, corpus, fixes))
    for v in variants:
        if units.get(v):
            site.whatif[v] = (k_curve(units[v]), units[v], drifted[v])
        log(f"  what-if on k: {v}: {len(units.get(v, []))} gold units")
    return site
