"""What a reviewer checks in a run beyond the accuracy table: per question the evidence verdict, stale answers and
revisions without rollback (tmem.analysis.stale), and per pair of variants the paired significance of the
primary measure, of accuracy and of recall (tmem.analysis.significance). Used by `run`'s summary, by `report`,
by re-scoring under a gold version and by the app's Compare and Failures pages.

- evidence_complete: the answer context after compression and the cut at B (tmem.analysis.funnel) holds every
  gold evidence unit. Only recall-eligible questions have it (abstention questions and questions without gold
  evidence have no unit to hold: they count in accuracy only). Beside it: units_in_context (how many units it
  holds: complete / partial / none, tmem.analysis.verdicts), evidence_missing (the units it lacks) and
  evidence_failure(_detail) (the first stage that lost one, tmem.analysis.funnel.first_loss, whatever the answer's
  verdict).
- The primary measure is `evidence` when every compared answer came from an offline stand-in, else `accuracy`
  (a real model answered: an endpoint, the local model or a recorded run).
- Pairs: the first variant of a run against each other one (`run --variants full,flat,bm25`: full - flat,
  full - bm25), so a positive delta means the first variant did better. Stored rows do not keep the order of
  `--variants`: for a stored run the order is tmem.pipeline.methods' (full, then its ablations, then the baselines),
  unless the caller names one (`report --variants`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from tmem.analysis import significance as sig
from tmem.analysis import stale
from tmem.analysis.chains import UpdateEdges, chain_complete, gold_chain, update_edges
from tmem.analysis.funnel import evidence_funnel, first_loss, stage_sets
from tmem.analysis.verdicts import missing_units, with_primary
from tmem.evaluation import matched
from tmem.evaluation.metrics import recall_eligible
from tmem.pipeline.methods import methods
from tmem.pipeline.run import open_scope
from tmem.types import Gold, Trace

REVIEW_COLUMNS = ("evidence_complete", "units_in_context", "evidence_missing", "evidence_failure",
                  "evidence_failure_detail", "stale", "stale_detail", "stale_rule", "stale_reference", "rollback",
                  "rollback_detail", "chain_complete")


def ordered_variants(names, wanted: Sequence[str] | None = None) -> list[str]:
    """The variants of a stored run in comparison order (module docstring); `wanted` first, in its order."""
    names = list(dict.fromkeys(names))
    if wanted:
        missing = [w for w in wanted if w not in names]
        if missing:
            raise ValueError(f"variant(s) {', '.join(missing)} not in the run (it has {', '.join(names)})")
        return list(wanted) + [n for n in names if n not in wanted]
    known = list(methods())
    return sorted(names, key=lambda n: (known.index(n) if n in known else len(known), n))


def primary_measure(traces: Iterable[Trace | None]) -> str:
    """"accuracy" when any primary answer came from a real model, else "evidence"."""
    answers = [t.answers[0] for t in traces if t is not None and t.answers]
    return "accuracy" if any(not a.offline for a in answers) else "evidence"


def primary_of_rows(frame: pd.DataFrame) -> str:
    """The same from result rows with an `answer_offline` column (tmem.evaluation.gold_versions.rescore)."""
    offline = frame["answer_offline"].dropna() if "answer_offline" in frame else pd.Series(dtype=bool)
    return "accuracy" if (~offline.astype(bool)).any() else "evidence"


def evidence_complete(trace: Trace, gold: Gold | None) -> bool | None:
    if gold is None or not recall_eligible(trace.question, gold):
        return None
    return evidence_funnel(trace, gold)["after_compression"] == len(gold.evidence)


def trace_review(trace: Trace | None, gold: Gold | None, times: Mapping, gold_edges: Sequence[tuple],
                 messages: Mapping | None = None, reference: stale.Reference | None = None) -> dict:
    """The REVIEW_COLUMNS of one trace (all None without a trace). `messages` (gold and anchor messages by id,
    for their topics) lets the evidence loss be attributed; without them it is not. `reference`: the question's
    stale reference chain, the same for every variant (GoldContext.reference)."""
    if trace is None:
        return dict.fromkeys(REVIEW_COLUMNS)
    gold_edges = update_edges(gold_edges)  # read by the stale checks and the chain: their maps built once
    found = {f.category: f for f in stale.findings(trace, gold, times, gold_edges, reference)}
    old, roll = found.get(stale.STALE), found.get(stale.ROLLBACK_MISSED)
    out = {"evidence_complete": None, "units_in_context": None, "evidence_missing": None, "evidence_failure": None,
           "evidence_failure_detail": None, "stale": old is not None, "stale_detail": old.detail if old else None,
           "stale_rule": old.rule if old else None, "stale_reference": old.reference if old else None,
           "rollback": roll is not None, "rollback_detail": roll.detail if roll else None,
           "chain_complete": chain_complete(trace, gold_chain(gold, gold_edges))}
    if gold is not None and recall_eligible(trace.question, gold):
        held = stage_sets(trace)["after_compression"]
        in_context = sum(bool(set(unit) & held) for unit in gold.evidence)
        out.update(evidence_complete=in_context == len(gold.evidence), units_in_context=in_context,
                   evidence_missing=missing_units(gold.evidence, held) or None)
        lost = first_loss(trace, gold, messages) if messages is not None else None
        if lost is not None:
            out.update(evidence_failure=lost.category, evidence_failure_detail=lost.detail)
    return out


class GoldContext:
    """Gold, gold and anchor messages, gold edges and stale reference chains of a corpus, read once per scope
    (`gold_of` overrides the gold, e.g. under a gold version; `run_id`: the run whose full-variant traces are the
    reference forests, tmem.analysis.stale)."""

    def __init__(self, store, corpus: str, gold_of=None, run_id: str | None = None):
        self.store, self.corpus, self.run_id = store, corpus, run_id
        self._golds: dict[str, dict] = {}
        self.gold_of = gold_of or self.stored_gold
        self._edges: dict[str, UpdateEdges] = {}
        self._messages: dict[str, dict] = {}
        self._references: dict[tuple[str, str], stale.Reference] = {}
        self._forests: dict[tuple[str, str], tuple[Trace, str]] = {}
        self._latest: dict[tuple[str, str], tuple[str, str]] | None = None

    def stored_gold(self, scope: str, question_id: str) -> Gold | None:
        if scope not in self._golds:
            self._golds[scope] = self.store.scope_golds(self.corpus, scope)
        return self._golds[scope].get(question_id)

    def edges(self, scope: str) -> UpdateEdges:
        """The scope's gold edges with their UPDATE maps, built once for every question and trace of it."""
        if scope not in self._edges:
            self._edges[scope] = UpdateEdges(self.store.gold_edges(self.corpus, scope))
        return self._edges[scope]

    def messages(self, scope: str, ids: Iterable[str]) -> dict:
        """{id: Message} of `ids`, reading only those not read before (`prefetch` reads a scope's at once)."""
        known = self._messages.setdefault(scope, {})
        new = set(ids) - set(known)
        if new:
            known.update({m.id: m for m in self.store.messages_by_ids(self.corpus, scope, new)})
            known.update({i: None for i in new if i not in known})  # not a message: not asked again
        return {i: known[i] for i in ids if known.get(i) is not None}

    def prefetch(self, scope: str, traces: Iterable[Trace]) -> None:
        ids = set()
        for t in traces:
            gold = self.gold_of(scope, t.question.id)
            ids |= set(gold.evidence_ids) if gold else set()
            ids |= {a.message_id for a in t.anchors}
        self.messages(scope, ids)

    def review(self, trace: Trace | None, scope: str, question_id: str) -> dict:
        gold = self.gold_of(scope, question_id)
        ids = set(gold.evidence_ids) if gold else set()
        found = self.messages(scope, ids | ({a.message_id for a in trace.anchors} if trace else set()))
        times = {i: m.timestamp for i, m in found.items() if i in ids}
        reference = self.reference(scope, question_id) if trace is not None else None
        return trace_review(trace, gold, times, self.edges(scope), found, reference)

    def use_forests(self, traces: Iterable[Trace], origin: str) -> None:
        """The full variant's traces to take the reference forests from (`origin`: "same run"); others ignored."""
        for t in traces:
            if t is not None and t.variant == stale.REFERENCE_VARIANT:
                self._forests.setdefault((t.question.scope, t.question.id), (t, origin))

    def reference(self, scope: str, question_id: str) -> stale.Reference:
        """The question's stale reference chain, the same for every variant: the gold chain where the gold has one,
        else the full variant's forest (given by use_forests, else of the run, else the latest stored)."""
        key = (scope, question_id)
        if key not in self._references:
            gold = self.gold_of(scope, question_id)
            edges = self.edges(scope)
            chain = gold_chain(gold, edges)
            ids = {m for unit in chain for m in unit} if chain else set()
            texts = {i: m.text for i, m in self.messages(scope, ids).items()}
            forest, origin = (None, "") if chain else self._forests.get(key) or self._stored_forest(scope, question_id)
            self._references[key] = stale.reference_chain(gold, edges, texts, forest, origin)
        return self._references[key]

    def _stored_forest(self, scope: str, question_id: str) -> tuple[Trace | None, str]:
        if self._latest is None:  # one read of the trace keys: the run's full rows, else the latest stored
            index = self.store.trace_index(self.corpus)
            full = index[index["variant"] == stale.REFERENCE_VARIANT] if len(index) else index
            self._latest = {(r.scope, r.question_id): (r.config_hash, r.backend, "latest stored")
                            for r in full.itertuples()}  # ordered by created_at: the last one wins
            if self.run_id is not None:
                rows = self.store.run_results(self.corpus, self.run_id)
                for r in rows[rows["variant"] == stale.REFERENCE_VARIANT].itertuples():
                    self._latest[(r.scope, r.question_id)] = (r.config_hash, r.backend, "same run")
        found = self._latest.get((scope, question_id))
        if found is None:
            return None, ""
        trace = self.store.load_trace(self.corpus, scope, question_id, stale.REFERENCE_VARIANT, *found[:2])
        return trace, found[2]


def question_reference(store, corpus: str, trace: Trace, gold: Gold | None) -> stale.Reference:
    """The stale reference chain of one question's trace (the Question page): the gold chain where the gold has
    one, else the full variant's forest -- this trace when it is the full variant's, else the latest stored."""
    ctx = GoldContext(store, corpus, gold_of=lambda scope, question_id: gold)
    ctx.use_forests([trace], "this trace")
    return ctx.reference(trace.question.scope, trace.question.id)


def comparisons(frame: pd.DataFrame, names: Sequence[str], primary: str, *, resamples: int = sig.RESAMPLES,
                seed: int = sig.SEED) -> list[dict]:
    """JSON per pair (first variant against each other): the primary measure's overall delta, ci_low, ci_high,
    p_mcnemar and outcome at the top, and every measure overall and per question type under "measures" (per type
    with p_holm, McNemar's p Holm-adjusted over the types, which its outcome reads)."""
    out = []
    for other in names[1:]:
        measures = {m: [d.as_json() for d in sig.paired_deltas(frame, names[0], other, m, resamples=resamples,
                                                                  seed=seed)] for m in sig.MEASURES}
        head = measures[primary][0]
        out.append({"variant": names[0], "baseline": other, "primary": primary,
                    **{k: head[k] for k in ("n", "delta", "ci_low", "ci_high", "p_mcnemar", "outcome")},
                    "measures": measures})
    return out


def run_review(run, results: Mapping[str, tuple[list, list[dict]]]) -> dict:
    """The summary.json keys of a batch run's review: primary measure, method, per-variant stale and rollback
    counts, and the pairwise comparisons."""
    ctx = GoldContext(run.store, run.corpus)
    ctx.use_forests(results.get(stale.REFERENCE_VARIANT, ([], []))[0], "same run")
    rows, all_traces = [], []
    for traces, variant_rows in results.values():
        by_key = {(t.question.scope, t.question.id): t for t in traces}
        all_traces += traces
        for r in variant_rows:
            trace = by_key.get((r["scope"], r["question_id"]))
            rows.append({**r, **ctx.review(trace, r["scope"], r["question_id"])})
    frame = pd.DataFrame(rows, columns=list(rows[0]) if rows else ["variant"])
    primary = primary_measure(all_traces)
    primary_rows = with_primary(frame, primary) if len(frame) and "status" in frame else frame.assign(category=None)
    counts = {n: {**review_counts(frame[frame["variant"] == n]),  # the categories the app and the report count
                  "categories": primary_rows[primary_rows["variant"] == n]["category"].value_counts().to_dict()}
              for n in results}
    pairs = comparisons(frame, list(results), primary) if len(results) > 1 else []
    add_matched(pairs, frame, {n: traces for n, (traces, _) in results.items()}, run.store, run.corpus, ctx.gold_of,
                run.roles, run_id=run.run_id)
    return {"review": {"primary": primary, "method": sig.method_note(), "counts": counts}, "comparisons": pairs}


def add_matched(pairs: list[dict], frame: pd.DataFrame, traces: Mapping[str, list], store, corpus: str, gold_of,
                roles, run_id: str | None = None) -> None:
    """Beside each pair whose baseline has a fixed budget (BM25, embedding, the control, ...): `matched`, the
    evidence comparison with the baseline re-run at the first variant's message count (tmem.evaluation.matched).
    When the run's results are stored as `run_id`, the matched rows are stored too, under the key Compare reads
    (original gold), so its first visit after the run does not re-run the baseline."""
    stored = store.run_results(corpus, run_id) if run_id is not None else pd.DataFrame()
    scopes: dict = {}

    def scope_of(name: str):
        if name not in scopes:
            scopes[name] = open_scope(store, corpus, name)
        return scopes[name]

    for pair in pairs:
        if not matched.fixed_budget(pair["baseline"]):
            continue
        own = {(t.question.scope, t.question.id): t for t in traces.get(pair["variant"], [])}
        rows = matched.matched_rows(store, corpus, own, pair["baseline"], pair["variant"], gold_of, scope_of, roles)
        if len(stored):
            stamp = matched.run_stamp(stored)
            key = matched.stored_key(store, corpus, run_id, matched.ORIGINAL_GOLD, pair["baseline"], pair["variant"],
                                     stamp, roles.label)
            store.save_derived_frame(key, "matched", matched.to_bytes(rows), corpus, run_id, stamp)
        evidence = pair["measures"]["evidence"][0]["outcome"]
        pair["matched"] = matched.matched_pair(frame, rows, pair["variant"], pair["baseline"], evidence)


def review_counts(frame: pd.DataFrame) -> dict:
    """Evidence complete, complete chains, and the stale categories, stale answers also by the rule that fired
    (`stale_rules`); every variant's stale answers were read against the same reference chain per question."""
    complete = frame["evidence_complete"].dropna() if "evidence_complete" in frame else pd.Series(dtype=bool)
    chains = frame["chain_complete"].dropna() if "chain_complete" in frame else pd.Series(dtype=bool)
    flagged = frame.get("stale", pd.Series(dtype=bool)).fillna(False).astype(bool)
    rules = frame["stale_rule"][flagged].value_counts() if "stale_rule" in frame else pd.Series(dtype=int)
    return {"evidence_complete": int(complete.astype(bool).sum()), "evidence_judged": int(len(complete)),
            "chains_complete": int(chains.astype(bool).sum()), "chains": int(len(chains)),
            stale.STALE: int(flagged.sum()),
            "stale_rules": {r: int(rules.get(r, 0)) for r in (stale.GOLD_RULE, stale.FOREST_RULE) if rules.get(r)},
            stale.ROLLBACK_MISSED: int(frame.get("rollback", pd.Series(dtype=bool)).fillna(False).astype(bool)
                                       .sum())}


def format_review(summary: Mapping) -> str:
    """The lines `run` prints under its summary table."""
    review = summary.get("review")
    if not review:
        return ""
    lines = ["", f"Evidence and stale answers (primary measure: {review['primary']}; evidence = the answer context "
             "(after compression and the cut at B) holds every gold unit; stale answers read against one reference "
             "chain per question for every variant: the gold chain, else the full variant's forest)"]
    for name, c in review["counts"].items():
        lines.append(f"  {name:<16} evidence complete {c['evidence_complete']}/{c['evidence_judged']}   "
                     f"complete chains {c.get('chains_complete', 0)}/{c.get('chains', 0)}   "
                     f"{stale.STALE}: {c[stale.STALE]}{_rules(c.get('stale_rules'))}   "
                     f"{stale.ROLLBACK_MISSED}: {c[stale.ROLLBACK_MISSED]}")
        if c.get("categories"):
            lines.append(f"  {'':<16} by {review['primary']} verdict and attributed stage: "
                         + ", ".join(f"{k} {v}" for k, v in c["categories"].items()))
    lines += [f"  {note} (the corpus's import notes)" for note in summary.get("chain_writers") or ()]
    return "\n".join(lines + format_pairs(summary.get("comparisons", [])))


def _rules(rules: Mapping | None) -> str:
    return f" ({', '.join(f'{r} {n}' for r, n in rules.items())})" if rules else ""


def format_pairs(pairs: Sequence[Mapping]) -> list[str]:
    """Per pair a table: every measure overall, and the primary measure per question type."""
    lines = []
    for pair in pairs:
        w = max(10, len(pair["variant"]) + 2, len(pair["baseline"]) + 2)  # names never run together
        lines += ["", f"{pair['variant']} - {pair['baseline']} ({sig.method_note()})",
                  f"  {'measure':<10}{'group':<20}{'n':>5}{pair['variant']:>{w}}{pair['baseline']:>{w}}"
                  f"{'delta':>11}  {'95% CI':<18}{'McNemar p':>10}{'Holm p':>8}  outcome"]
        for measure, deltas in pair["measures"].items():
            shown = deltas if measure == pair["primary"] else deltas[:1]  # per type: the primary measure only
            lines += [_delta_line(measure, d, w) for d in shown]
        if pair.get("matched"):
            m = pair["matched"]
            lines += [f"  at equal budget: {m['method']} = {pair['baseline']} given {pair['variant']}'s messages "
                      f"per question (mean {m['mean_messages']}; {matched.BUDGET} matched)",
                      _delta_line("evidence", {**m, "group": "matched", "p_holm": None, "baseline":
                                               m["baseline_value"], "variant": m["variant_value"]}, w)
                      + (f" — {m['reading']}" if m["reading"] else "")]
    return lines


def _delta_line(measure: str, d: Mapping, w: int = 10) -> str:
    p, holm = sig.p_text(d["p_mcnemar"]), sig.p_text(d.get("p_holm"))
    ci = "-" if d["ci_low"] is None else f"[{_pp(d['ci_low'])}, {_pp(d['ci_high'])}]"
    return (f"  {measure:<10}{d['group'][:19]:<20}{d['n']:>5}{_f(d['variant']):>{w}}{_f(d['baseline']):>{w}}"
            f"{_pp(d['delta']) + ' pp':>11}  {ci:<18}{p:>10}{holm:>8}  {d['outcome']}")


def _pp(value) -> str:
    return "-" if value is None else f"{100 * value:+.1f}"


def _f(value) -> str:
    return "-" if value is None else f"{value:.3f}"
