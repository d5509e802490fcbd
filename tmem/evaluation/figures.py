"""The figures README.md and docs/*.md state about the shipped demo, measured from a fresh run and kept in one
checked-in file (docs/figures.json), so a stated figure cannot drift: `python -m tmem figures` re-measures and
rewrites the file, and tests/test_figures.py fails when a sentence of STATED, filled from the file, is not in its
document verbatim. When a change moves the demo's figures: run the command, then edit the sentences it names.

What is measured (offline stand-ins, the default embedder, a new database with the shipped demo):
- the demo batch (`run` over DEMO_VARIANTS, 48 questions): per variant evidence complete, Complete Chain Recall,
  stale answers by the rule that fired, revisions without rollback, the stand-in's accuracy; full against each
  other variant: the evidence delta unmatched and at equal budget (tmem.evaluation.matched), the stand-in's
  accuracy delta, per-type evidence wins before and after Holm;
- evidence complete per variant at B = 8,192 and B = SMALL_B (the cut at B, issue 39);
- what-if on k for full: its units found, and the units BM25 alone reaches at k = 36, 72, 144 (robust counts, not
  the order statistic "smallest k that matches", which one unit can move from 343 to 640);
- budget-matched recall at k = 36 (`recall --budgets`): tmem's own messages and each method's recall there.
Every value is a string as the documents write it. The file records when and on which commit it was measured.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tmem.analysis import significance as sig
from tmem.analysis.funnel import stage_sets
from tmem.evaluation.batch.records import OK
from tmem.evaluation.batch.run import BatchRun
from tmem.evaluation.matched import context_traces, early_stages
from tmem.evaluation.metrics import recall_eligible
from tmem.pipeline.methods import Method, get_method
from tmem.pipeline.run import open_scope
from tmem.types import Question

DEMO_VARIANTS = ("full", "flat", "no-discovery", "no-structuring", "bm25", "embedding", "global-control")
BUDGET_VARIANTS = ("full", "flat", "no-compression", "no-structuring", "bm25-forest")
SMALL_B = 1500
WHATIF_KS = (36, 72, 144)
FILE = Path(__file__).resolve().parents[2] / "docs" / "figures.json"

# (document, sentence with {figure} fields): each must appear verbatim, filled from the file.
STATED: tuple[tuple[str, str], ...] = (
    ("docs/reference.md", "on the demo batch, evidence complete full − flat is {full_flat_evidence}"),
    ("docs/reference.md", "while the stand-in's accuracy is {full_flat_accuracy}"),
    ("docs/reference.md", "flat given full's own {matched_messages} messages per question: {full_flat_matched}"),
    ("docs/reference.md", "at T-Mem's own {recall_messages} messages: **tmem {recall_tmem}** · global-control "
                  "{recall_control} · bm25 {recall_bm25} · embedding {recall_embedding}"),
    ("docs/evaluation.md", "(on the demo batch, {accuracy_range} for every"),
    ("docs/evaluation.md", "Demo (48 questions): {stale_sentence}"),
    ("docs/evaluation.md", "Demo, full at k = 36: {whatif_sentence}"),
    ("docs/evaluation.md", "per-type evidence wins of full against the other variants: {holm_wins}"),
    ("docs/evaluation.md", "evidence complete at B = 8,192 / B = 1,500: {budget_sentence}"),
    ("docs/evaluation.md", "Complete Chain Recall on the demo batch: {chain_sentence}"),
)


def pp(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f}".replace("-", "−")


def delta_text(d: Mapping) -> str:
    """"+27.5 pp [+15.0, +42.5], McNemar p < 0.001" from a comparison's JSON."""
    p = d.get("p_mcnemar")
    p_part = "" if p is None else (", McNemar p < 0.001" if p < 0.001 else f", p = {p:.3f}")
    return f"{pp(d['delta'])} pp [{pp(d['ci_low'])}, {pp(d['ci_high'])}]{p_part}"


def from_batch(summary: Mapping, stale_rules: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """The batch's figures from `run`'s summary.json and the stale findings per variant and rule."""
    pairs = {p["baseline"]: p for p in summary["comparisons"]}
    flat = pairs["flat"]
    counts = summary["review"]["counts"]
    acc = {n: v["accuracy"]["overall"]["accuracy"] for n, v in summary["variants"].items()}
    low, high = min(acc.values()), max(acc.values())
    before = sum(_per_type_wins(p, "p_mcnemar") for p in pairs.values())
    after = sum(_per_type_wins(p, "p_holm") for p in pairs.values())
    stale = "; ".join(f"{n} {counts[n]['stale — states the superseded state']} stale"
                      + (f" ({', '.join(f'{r} {c}' for r, c in stale_rules.get(n, {}).items())})"
                         if stale_rules.get(n) else "")
                      + f", {counts[n]['revision without rollback']} revision(s) without rollback"
                      for n in ("full", "flat"))
    chains = "; ".join(f"{n} {counts[n]['chains_complete']} of {counts[n]['chains']}" for n in summary["variants"])
    return {"full_flat_evidence": delta_text(flat), "full_flat_accuracy": delta_text(flat["measures"]["accuracy"][0]),
            "full_flat_matched": delta_text(flat["matched"]) + f" ({flat['matched']['outcome']}"
                                 + (f": {flat['matched']['reading']})" if flat["matched"]["reading"] else ")"),
            "matched_messages": f"{flat['matched']['mean_messages']:.1f}",
            "accuracy_range": f"{100 * low:.0f} to {100 * high:.0f} %",
            "stale_sentence": stale, "holm_wins": f"{before} before Holm, {after} after",
            "chain_sentence": chains}


def _per_type_wins(pair: Mapping, p_key: str) -> int:
    return sum(1 for d in pair["measures"]["evidence"][1:]
               if sig.outcome(d["n"], _nan(d["ci_low"]), _nan(d["ci_high"]), d.get(p_key)) == sig.WIN)


def _nan(value):
    return float("nan") if value is None else value


def whatif_sentence(found: int, units: int, reached: Mapping[int, int]) -> str:
    return (f"{found} of {units} units found; BM25 alone reaches "
            + ", ".join(f"{reached[k]} at k = {k}" for k in WHATIF_KS))


def budget_sentence(counts: Mapping[str, tuple[int, int, int]]) -> str:
    """{variant: (complete at 8,192, complete at SMALL_B, questions)}."""
    return "; ".join(f"{v} {a} / {b} of {n}" for v, (a, b, n) in counts.items())


def recall_figures(matched: Mapping[str, Mapping]) -> dict[str, str]:
    """From `recall --budgets`'s JSON, split "all", matched at k = 36."""
    return {"recall_messages": f"{matched['tmem']['mean_messages']:.1f}",
            "recall_tmem": f"{matched['tmem']['recall']:.3f}",
            "recall_control": f"{matched['global-control@tmem']['recall']:.3f}",
            "recall_bm25": f"{matched['bm25@tmem']['recall']:.3f}",
            "recall_embedding": f"{matched['embedding@tmem']['recall']:.3f}"}


def read(path: Path = FILE) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def stated(figures: Mapping[str, str]) -> list[tuple[str, str]]:
    """(document, sentence) of every STATED sentence filled from `figures`."""
    return [(doc, template.format(**figures)) for doc, template in STATED]


def budget_counts(store, corpus: str, roles, variants=BUDGET_VARIANTS, small: int = SMALL_B,
                  recorded: Callable[[Method, Question], Mapping[str, dict]] = lambda method, question: {}) -> dict:
    """{variant: (evidence complete at the paper's B, at `small`, answerable questions)} on every answerable
    question of the corpus (the stages up to the answer context; nothing is judged). Variants that differ only in
    compression (full, no-compression) share their earlier stages; `recorded(method, question)`: those stages as a
    batch recorded them ({stage: the record's outputs}; `batch_records`), used instead of running them again."""
    scopes: dict = {}
    items = [(q, store.gold(corpus, q.scope, q.id)) for q in store.questions(corpus)]
    items = [(q, g) for q, g in items if recall_eligible(q, g)]
    done = {name: [0, 0] for name in variants}
    for group in _sharing_early_stages([get_method(name) for name in variants]):
        at = [replace(method, config=method.config.with_("compression", budget_tokens=budget))
              for method in group for budget in (method.config.compression.budget_tokens, small)]
        for q, gold in items:
            scope = scopes.setdefault(q.scope, open_scope(store, corpus, q.scope))
            # one run of the stages up to the forest per question and group, then the context at each B
            traces = context_traces(q, scope, at, roles, corpus, store, recorded(group[0], q))
            for i, trace in enumerate(traces):
                held = stage_sets(trace)["after_compression"]
                done[group[i // 2].name][i % 2] += all(set(u) & held for u in gold.evidence)
    return {name: (*done[name], len(items)) for name in variants}


def _sharing_early_stages(methods: Sequence[Method]) -> list[list[Method]]:
    """`methods` grouped by everything but their names and compression settings, in first-seen order."""
    groups: dict[Method, list[Method]] = {}
    for method in methods:
        groups.setdefault(early_stages(method), []).append(method)
    return list(groups.values())


def batch_records(store, corpus: str, folder: Path, roles) -> Callable[[Method, Question], Mapping[str, dict]]:
    """`recorded` for budget_counts from the records of a finished batch in `folder` (`run --out`): a question's
    stages whose records form the batch's own resumable chain for that method and these roles ({} without)."""
    batch = BatchRun(store, corpus, [], [], folder, roles, run_id="")
    return lambda method, question: {r["stage"]: r["outputs"] for r in batch.chain(method, batch.key(question))
                                     if r["status"] == OK}
