"""What a batch run will cost before it spends anything (`run --estimate`, `sweep --estimate`, the app's batch
form): per variant and stage, the model calls, their prompt and completion tokens, the response-cache hits and the
cost at the given prices.

The stages run for real — BM25, clustering, windows, compression — with every language-model role counted, not
sent (tmem.models.llm.dry_run): each prompt is the one the run will send, counted with the run's tokenizer and the chat
format's tokens per message. The difficulty is that later prompts depend on earlier replies (selection ->
relation -> answer -> judge): where the cache holds the reply, the estimate uses it, so those prompts are exact;
where it does not, the role's offline stand-in answers, shaped like the model (the share of candidates it keeps,
the length of its answers: measured from its cached replies, else the stated priors of tmem.models.llm.dry_run), and
the later prompts of that question are built on its output. The estimate says for how many calls that was so.
Completion tokens are the role's measured mean (its cached replies, else stored traces of the same backend), else
the prior reply its prompt's schema asks for; the worst case beside them has every reply at its output limit.
Records already done in the run folder cost nothing: their stages are skipped as the run will skip them, and their
recorded tokens are shown apart. Not counted: retries, repair turns and the tokens a server adds with another
tokenizer or chat template.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tmem.evaluation.batch.records import OK
from tmem.evaluation.batch.run import BatchRun
from tmem.models.llm.budget_cap import Prices
from tmem.models.llm.dry_run import (
    PRIOR_ANSWER_TOKENS,
    PRIOR_KEPT_PER_WINDOW,
    Calibration,
    Ledger,
    Tally,
    estimating_roles,
)
from tmem.pipeline.methods import get_method
from tmem.pipeline.stages import STAGE_FUNCTIONS, Context, Earlier, decode_result, plan

ESTIMATE_FILE = "estimate.json"


@dataclass
class Estimate:
    backend: str
    questions: int
    prices: Prices
    stages: dict[tuple[str, str], Tally] = field(default_factory=dict)  # (variant, stage) -> counted calls
    done: dict[tuple[str, str], dict] = field(default_factory=dict)  # (variant, stage) -> usage of done records
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    calibration: Calibration = Calibration()

    def cost(self, t: Tally, limit: bool = False) -> float | None:
        completion = t.completion_tokens_max if limit else t.completion_tokens
        return round(self.prices.cost(t.prompt_tokens, completion), 6) if self.prices.configured else None

    def row(self, t: Tally) -> dict:
        return {"calls": t.calls - t.cached_calls, "cached_calls": t.cached_calls, "prompt_tokens": t.prompt_tokens,
                "completion_tokens": round(t.completion_tokens), "completion_tokens_max": t.completion_tokens_max,
                "cost_usd": self.cost(t), "cost_usd_max": self.cost(t, limit=True),
                "cached_prompt_tokens": t.cached_prompt_tokens, "from_standins": t.from_standins,
                "completion_from_past_replies": t.completion_from_cache}

    def total(self, stage: str | None = None) -> Tally:
        out = Tally()
        for (_, s), t in self.stages.items():  # calls still to make (done stages add none)
            if stage is None or s == stage:
                out.add(t)
        return out

    def to_json(self) -> dict:
        """calls (to send), prompt_tokens, completion_tokens and cost_usd in total and per stage (over the
        variants) and per variant and stage; what is cached, done or built on stand-ins beside them."""
        keys = list(dict.fromkeys([*self.done, *self.stages]))  # stages done in the run folder count too
        names = list(dict.fromkeys(s for _, s in keys))
        variants: dict[str, dict] = {}
        for v, s in keys:
            variants.setdefault(v, {})[s] = {**self.row(self.stages.get((v, s), Tally())),
                                             "done": self.done.get((v, s))}
        return {**self.row(self.total()), "stages": {s: self.row(self.total(s)) for s in names},
                "variants": variants, "questions": self.questions, "backend": self.backend,
                "prices": asdict(self.prices), "errors": self.errors, "seconds": round(self.seconds, 2),
                "calibration": asdict(self.calibration),
                "method": "counted, not sent; later stages' prompts built on the offline stand-ins' outputs, shaped "
                          "like the model (measured, else the stated priors), where the response cache has no reply "
                          "(see from_standins); completion_tokens expected, completion_tokens_max the worst case"}


def estimate_run(store, corpus: str, methods, questions: Sequence, roles, prices: Prices, *, out: Path | None = None,
                 run_id: str = "estimate", stages: Callable | None = None,
                 progress: Callable[[int, int], None] | None = None, priors: bool = True) -> Estimate:
    """Count the model calls of running `methods` on `questions` with `roles` (nothing is sent; records already
    done in `out` are skipped as a resumed run skips them). `stages(method)` limits each method's stages (a recall
    sweep runs seeds and discovery only). `priors=False`: no stated prior where nothing is measured (the stand-ins'
    own selections, every reply at its output limit), for comparison."""
    started = time.perf_counter()
    ledger = Ledger()
    calibration = Calibration.from_cache(store, _model(roles.evidence_utility), _model(roles.answer), priors)
    counted = estimating_roles(roles, ledger, store, calibration)
    run = BatchRun(store, corpus, methods, questions, out or Path(os.devnull), counted, run_id)
    result = Estimate(roles.label, len(questions), prices, calibration=calibration)
    total, done_count = len(methods) * len(questions), 0
    for method in methods:
        ctx = Context(method, counted, store, gold=lambda q: store.gold(corpus, q.scope, q.id))
        names = tuple(stages(method)) if stages else plan(method)
        for q in questions:
            _estimate_question(run, method, q, ctx, names, ledger, result, out is not None)
            done_count += 1
            if progress:
                progress(done_count, total)
    result.stages = dict(ledger.tallies)
    result.seconds = time.perf_counter() - started
    return result


def _model(role) -> str | None:
    client = getattr(role, "client", None)
    return client.settings.model if client is not None and not getattr(role, "offline", True) else None


def _estimate_question(run: BatchRun, method, q, ctx: Context, names, ledger: Ledger, result: Estimate,
                       resume: bool) -> None:
    key = run.key(q)
    chain = run.chain(method, key) if resume else []
    earlier = Earlier()
    for i, stage in enumerate(names):
        if len(chain) > i and chain[i]["status"] == OK:  # the run will skip it: its recorded usage, no new call
            earlier = earlier.then(decode_result(stage, chain[i]["outputs"]["fields"]))
            d = result.done.setdefault((method.name, stage), {"questions": 0, "prompt_tokens": 0,
                                                              "completion_tokens": 0, "calls": 0})
            usage = chain[i].get("usage") or {}
            d["questions"] += 1
            for k in ("prompt_tokens", "completion_tokens", "calls"):
                d[k] += usage.get(k, 0)
            continue
        chain = []  # a stage redone invalidates the records after it
        ledger.at(method.name, stage, key)
        ledger.tallies.setdefault((method.name, stage), Tally())
        try:
            out = STAGE_FUNCTIONS[stage](q, run.scope(q.scope), ctx, earlier)
        except Exception as exc:  # noqa: BLE001 - reported with the estimate; the run would record it as an error
            result.errors.append(f"{method.name}/{stage} {q.id}: {type(exc).__name__}: {exc}"[:300])
            return
        earlier = earlier.then(out)


# ------------------------------------------------------------------------------------------------ output
def format_estimate(est: Estimate) -> str:
    """The estimate as a table per variant and stage, with the total and what the figures rest on."""
    head = (f"{'variant':<16}{'stage':<16}{'calls':>8}{'cached':>8}{'prompt tok':>12}{'compl. tok':>12}"
            f"{'(max)':>10}{'cost USD':>11}{'(max)':>10}{'on stand-ins':>14}")
    lines = [f"Estimate for {est.questions} question(s): model calls counted, not sent "
             f"({est.seconds:.1f} s; the offline stages ran for real)", "", head, "-" * len(head)]

    def cost(value):
        return "-" if value is None else f"{value:.4f}"

    for (variant, stage), t in est.stages.items():
        r = est.row(t)
        lines.append(f"{variant:<16}{stage:<16}{r['calls']:>8}{r['cached_calls']:>8}{r['prompt_tokens']:>12}"
                     f"{r['completion_tokens']:>12}{r['completion_tokens_max']:>10}{cost(r['cost_usd']):>11}"
                     f"{cost(r['cost_usd_max']):>10}{t.from_standins:>14}")
    r, t = est.row(est.total()), est.total()
    lines += ["-" * len(head), f"{'total':<32}{r['calls']:>8}{r['cached_calls']:>8}{r['prompt_tokens']:>12}"
              f"{r['completion_tokens']:>12}{r['completion_tokens_max']:>10}{cost(r['cost_usd']):>11}"
              f"{cost(r['cost_usd_max']):>10}{t.from_standins:>14}", ""]
    if est.done:
        done = sum(d["questions"] for d in est.done.values())
        lines.append(f"already done in the run folder: {done} (question, stage) records, skipped by the run (0 cost)")
    lines += [
        "calls: to send (cache misses); cached: answered by the response cache (no cost). prompt tok.: counted with "
        "the run's tokenizer plus the chat format's tokens per message.",
        f"compl. tok.: expected; the role's measured mean (its replies in the cache, else stored traces of the same "
        f"backend) for {t.completion_from_cache} of {r['calls']} calls, else "
        + ("the reply its prompt's schema asks for (one kept candidate with a short reason per window, one parent "
           "choice per child, a one-sentence answer, a bare verdict)" if est.calibration.priors else
           "the output limit") + "; (max): the worst case, every reply using its whole output limit.",
        f"on stand-ins: {t.from_standins} calls whose prompt was built on an offline stand-in's output for an earlier "
        "role (no cached reply): the real model selects other evidence, links other parents and writes other "
        "answers, so those stages are estimates, not counts.",
        calibration_note(est.calibration),
        "not counted: retries, repair turns, and what a server with another tokenizer or chat template adds."]
    if not est.prices.configured:
        lines.append("cost: give --price-input / --price-output (USD per million tokens).")
    lines += [f"error: {e}" for e in est.errors[:10]]
    return "\n".join(lines)


def calibration_note(c: Calibration) -> str:
    if c.selection_rate is None and c.answer_tokens is None:
        if c.priors:
            return (f"calibration: no past replies of these models in the response cache, so stated priors stand in: "
                    f"the model keeps {PRIOR_KEPT_PER_WINDOW} candidate per window (App. J's strict gate) and answers "
                    f"in {PRIOR_ANSWER_TOKENS} tokens. A model that keeps more sends more relation calls: run a few "
                    "questions for real first (e.g. --limit 3, cache on) and estimate again, their replies replace "
                    "the priors.")
        return ("calibration: no past replies of these models in the response cache, so the stand-ins' own "
                "selections and answers shaped the later prompts; run a few questions for real first (e.g. --limit "
                "3, cache on) and estimate again: their replies calibrate the selection share and answer length.")
    parts = []
    if c.selection_rate is not None:
        parts.append(f"the stand-in's selections cut to the {c.selection_rate:.1%} of candidates the model kept in "
                     f"{c.selection_replies} cached evidence-utility replies")
    if c.answer_tokens is not None:
        parts.append(f"its answers sized to the model's mean of {c.answer_tokens:.0f} tokens ({c.answer_replies} "
                     "cached answers)")
    return "calibration: " + "; ".join(parts) + "."


def save_estimate(out: Path, est: Estimate) -> Path:
    """Write OUT/estimate.json; a figure that is NaN or Infinity (an infinite price once made 15 of them) is an
    error, never written: no JSON reader takes them."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / ESTIMATE_FILE
    try:
        text = json.dumps({**est.to_json(), "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=1,
                          allow_nan=False)
    except ValueError:
        raise ValueError("the estimate has a figure that is not a finite number (check the prices and limits); "
                         f"{path} not written") from None
    path.write_text(text, encoding="utf-8")
    return path


def estimate_vs_actual(out: Path, summary: dict) -> list[str]:
    """Lines setting the run folder's last estimate against the run's actual tokens per variant and stage (all
    calls of the run's records, cached ones included, against the estimate's calls to send, cached and done)."""
    try:
        est = json.loads((out / ESTIMATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if est.get("backend") != "|".join(summary.get("roles", {}).values()):
        return [f"estimate vs actual: {out / ESTIMATE_FILE} was made for other roles; not compared"]
    lines = [f"estimate ({est.get('written_at', '?')}) vs actual, prompt tokens and calls of every model call:"]
    for variant, stages in est.get("variants", {}).items():
        actual = summary.get("variants", {}).get(variant, {}).get("stages", {})
        for stage, e in stages.items():
            if stage not in actual:
                continue
            done = e.get("done") or {}
            want = e["prompt_tokens"] + e["cached_prompt_tokens"] + done.get("prompt_tokens", 0)
            calls = e["calls"] + e["cached_calls"] + done.get("calls", 0)
            got = actual[stage]["prompt_tokens"]
            off = f"{(want - got) / got:+.1%}" if got else "-"
            lines.append(f"  {variant}/{stage}: estimated {want} prompt tokens in {calls} calls, actual {got} in "
                         f"{actual[stage]['calls'] + actual[stage].get('cached_calls', 0)} ({off})")
    return lines if len(lines) > 1 else []


def estimate_batch(store, corpus: str, variants, questions: Sequence, roles, prices: Prices) -> Estimate:
    """The app's batch form before *Start*: the estimate of running `variants` over `questions` with `roles` (the
    session's, or the offline stand-ins: then there is no model call)."""
    return estimate_run(store, corpus, [get_method(v) for v in dict.fromkeys(variants)], questions, roles, prices)


def estimate_rows(est: dict) -> list[dict]:
    """One row per variant and stage with model calls (an `Estimate.to_json()`), then the total: for a table."""
    keys = ("calls", "cached_calls", "prompt_tokens", "completion_tokens", "completion_tokens_max", "cost_usd",
            "cost_usd_max", "from_standins")
    rows = [{"variant": v, "stage": s, **{k: row[k] for k in keys}} for v, stages in est["variants"].items()
            for s, row in stages.items() if row["calls"] or row["cached_calls"]]
    return rows + [{"variant": "total", "stage": "", **{k: est[k] for k in keys}}]
