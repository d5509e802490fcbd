"""The summary of a batch run (tmem.evaluation.batch.run): per variant, accuracy by question type (forest and flat
prompt) with the source of that accuracy (`accuracy_source`: "offline-stand-in" or the answer model), the share of
answerable questions whose answer context held every gold unit (`evidence_complete`, tmem.analysis.verdicts:
the primary measure offline), evidence recall in units, context tokens before / after compression, and per stage
the median / p95 / total seconds, tokens, calls and cost (paper Sec. 5.1, App. D). Computed from the validated
chains of records only.
"""
from __future__ import annotations

from collections.abc import Sequence

from tmem.analysis.verdicts import answers_source
from tmem.evaluation.metrics import accuracy_by_type, percentile


def summarize(run, results, prices) -> dict:
    """The run's summary.json body (without validators, cache statistics and wall time, which the command adds)."""
    summary: dict = {"run_id": run.run_id, "corpus": run.corpus, "roles": run.roles.describe(),
                     "token_counter": run.roles.tokens.name, "variants": {}}
    for name, (traces, rows) in results.items():
        eligible = [r for r in rows if r["units"]]
        units = sum(r["units"] for r in eligible)
        recovered = sum(r["units_recovered"] for r in eligible)
        stages: dict[str, dict] = {}
        for t in traces:
            for s in t.stages:
                d = stages.setdefault(s.name, {"seconds": [], "prompt_tokens": 0, "completion_tokens": 0, "calls": 0,
                                               "cached_calls": 0})
                d["seconds"].append(s.seconds)
                d["prompt_tokens"] += s.usage.prompt_tokens
                d["completion_tokens"] += s.usage.completion_tokens
                d["calls"] += s.usage.calls
                d["cached_calls"] += s.usage.cached_calls
        stage_rows = {}
        for s, d in stages.items():
            stage_rows[s] = {"median_s": round(percentile(d["seconds"], 50), 5),
                             "p95_s": round(percentile(d["seconds"], 95), 5), "total_s": round(sum(d["seconds"]), 3),
                             "prompt_tokens": d["prompt_tokens"], "completion_tokens": d["completion_tokens"],
                             "calls": d["calls"], "cached_calls": d["cached_calls"]}
            if prices.configured:
                stage_rows[s]["cost_usd"] = round(prices.cost(d["prompt_tokens"], d["completion_tokens"]), 4)
        acc = accuracy_by_type(rows)
        flat = accuracy_by_type([{**r, "correct": r["correct_flat"]} for r in rows])
        prompt = sum(r["prompt_tokens"] or 0 for r in rows)
        completion = sum(r["completion_tokens"] or 0 for r in rows)
        shown = [t for t in traces if t.answers]  # the answer stage ran: its evidence context is known
        summary["variants"][name] = {
            "relation": relation_role(traces),
            "questions": len(rows), "errors": sum(r["status"] != "ok" for r in rows),
            "incomplete": sum(not r["complete"] for r in rows),
            "accuracy_source": answers_source(t.answers[0] for t in shown),
            "accuracy": _accuracy_json(acc), "accuracy_flat": _accuracy_json(flat),
            "recall": {"recall": _r(recovered / units if units else float("nan")), "units": units,
                       "questions": len(eligible)},
            "mean_evidence_messages": _r(sum(r["evidence_messages"] or 0 for r in rows) / len(rows), 2) if rows
            else None,
            "context_tokens": {  # the evidence passages of the primary answer prompt, per question
                "questions": len(shown),
                "mean_before_compression": _r(_mean([t.tokens_before_compression for t in shown]), 1),
                "mean_after_compression": _r(_mean([t.tokens_after_compression for t in shown]), 1),
                "total_after_compression": sum(t.tokens_after_compression for t in shown)},
            "stages": stage_rows, "prompt_tokens": prompt, "completion_tokens": completion,
            "cost_usd": round(prices.cost(prompt, completion), 4) if prices.configured else None,
        }
    summary["stage_runs"] = [s.__dict__ for s in run.stats]
    return summary


def relation_role(traces) -> str | None:
    """The relation role that built a variant's forests, as its traces' structuring stage names it (a variant such
    as `state-structuring` runs another offline role than the one `roles` names; None: no forest was built)."""
    return ", ".join(sorted({s.backend for t in traces for s in t.stages if s.name == "structuring"
                             and s.backend})) or None


def add_evidence(summary: dict) -> dict:
    """Per variant `evidence_complete` (a fraction, None without an answerable question) and `evidence_judged`
    from the run's review counts (tmem.evaluation.review.run_review, which also names the primary measure)."""
    counts = summary.get("review", {}).get("counts", {})
    for name, variant in summary["variants"].items():
        c = counts.get(name, {})
        judged = c.get("evidence_judged", 0)
        variant["evidence_complete"] = _r(c["evidence_complete"] / judged) if judged else None
        variant["evidence_judged"] = judged
    return summary


def _accuracy_json(acc: dict) -> dict:
    return {k: {"correct": a.correct, "judged": a.judged, "accuracy": _r(a.value)} for k, a in acc.items()}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _r(value: float, digits: int = 4):
    return None if value != value else round(value, digits)
