"""How close `run --estimate` comes to what the model server then receives, on the demo and on a LoCoMo conversation:
the first N questions with all four roles on the scripted OpenAI-compatible server (tmem.evaluation.scripted_server:
replies at once, usage counted from each request as an OpenAI server counts it), the prompt and completion tokens
it received tallied per role. For each corpus it prints, per stage, the actual tokens and the error of three
estimates:

  before   no priors (the estimate as it was: the offline stand-ins' own selections shape the later prompts, every
           reply counted at its output limit)
  after    the default: measured where the store has the model's past calls, else the stated priors of
           tmem/models/llm/dry_run.py (one kept candidate per window, the reply each prompt's schema asks for)
  pilot    the default after a pilot: P other questions of the same corpus run first with the cache on

    .venv/bin/python scripts/measure_estimate.py [--questions 10] [--pilot 2] [--select 1] [--corpora demo,locomo]

--select N: the scripted server's evidence utility keeps the first N candidates of a window (0 = all of them); the prior
expects one, so --select 0 or 3 shows the error when the model keeps more than the prior says (the pilot's case).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from tmem import api  # noqa: E402
from tmem.api.backends import Prices  # noqa: E402
from tmem.api.models import roles_for  # noqa: E402
from tmem.cli import main  # noqa: E402
from tmem.evaluation.batch.estimate import estimate_run  # noqa: E402
from tmem.evaluation.batch.run import BatchRun  # noqa: E402
from tmem.evaluation.scripted_server import FaultServer, TokenTally, scripted_settings  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "benchmarks" / "locomo" / "locomo10.json"
STAGES = {"evidence_utility": "discovery", "relation": "structuring", "answer": "answer", "judge": "judge"}


def load_corpus(name: str, db: str, conversation: int) -> str:
    """The corpus in a fresh database: the demo (loaded by open_store), or one LoCoMo conversation."""
    if name == "demo":
        api.open_store(db).close()
        return "demo"
    one = Path(db).with_suffix(".locomo.json")
    one.write_text(json.dumps([json.loads(LOCOMO.read_text())[conversation]]))
    with contextlib.redirect_stdout(io.StringIO()):
        if main(["import", "locomo", str(one), "--db", db, "--corpus", "locomo"]) != 0:
            raise SystemExit("the LoCoMo import failed")
    return "locomo"


def estimate(store, corpus, methods, questions, settings, priors: bool) -> dict:
    roles = roles_for(settings, store=store)
    est = estimate_run(store, corpus, methods, questions, roles, Prices(), priors=priors)
    return {s: [t.calls - t.cached_calls, t.prompt_tokens, t.completion_tokens]
            for (_, s), t in est.stages.items() if t.calls}


def run(store, corpus, methods, questions, settings, out: Path) -> None:
    roles = roles_for(settings, store=store)
    BatchRun(store, corpus, methods, questions, out, roles, run_id=out.name, jobs=settings.max_in_flight).run()


def measure_corpus(name: str, args, tmp: Path) -> None:
    tally = TokenTally(args.select)
    server = FaultServer(default=("reply", tally), counted_usage=True)
    db = str(tmp / f"{name}.duckdb")
    corpus = load_corpus(name, db, args.conversation)
    store = api.open_store(db)
    methods = [api.get_method(v) for v in args.variants.split(",")]
    every = store.questions(corpus)
    measured, pilot = every[:args.questions], every[args.questions:args.questions + args.pilot]
    off = scripted_settings(server.base_url, **{"cache.mode": "off", "llm.timeout": 60})
    on = scripted_settings(server.base_url, **{"cache.mode": "on", "llm.timeout": 60})
    before = estimate(store, corpus, methods, measured, off, priors=False)
    after = estimate(store, corpus, methods, measured, off, priors=True)
    run(store, corpus, methods, measured, off, tmp / f"{name}-run")
    actual = {STAGES[role]: got for role, got in tally.take().items()}
    run(store, corpus, methods, pilot, on, tmp / f"{name}-pilot")
    tally.take()
    piloted = estimate(store, corpus, methods, measured, on, priors=True)
    messages = store.counts(corpus)["messages"]
    store.close()
    server.close()
    print(f"\n{name}: {len(measured)} questions ({corpus}, {messages:,} messages), variants "
          f"{args.variants}, the server's evidence utility keeps {args.select or 'every candidate'} per window; "
          f"pilot: {len(pilot)} other questions")
    head = f"{'stage':<13}{'calls':>7}{'before':>8}{'after':>7}{'pilot':>7}  {'tokens':<11}{'actual':>10}" \
           f"{'before':>11}{'after':>9}{'pilot':>9}"
    print(head + "\n" + "-" * len(head))
    totals = {k: [0, 0, 0, 0] for k in ("prompt", "completion")}
    for stage in ("discovery", "structuring", "answer", "judge"):
        got = actual.get(stage, [0, 0, 0])
        ests = [e.get(stage, [0, 0, 0]) for e in (before, after, piloted)]
        for i, kind in ((1, "prompt"), (2, "completion")):
            totals[kind][0] += got[i]
            for j, e in enumerate(ests):
                totals[kind][j + 1] += e[i]
            calls = f"{got[0]:>7}" + "".join(f"{e[0]:>{w}}" for e, w in zip(ests, (8, 7, 7))) if i == 1 else \
                " " * 29
            print(f"{stage if i == 1 else '':<13}{calls}  {kind:<11}{got[i]:>10}"
                  + "".join(f"{error(e[i], got[i]):>{w}}" for e, w in zip(ests, (11, 9, 9))))
    print("-" * len(head))
    for kind, (got, *ests) in totals.items():
        print(f"{'total':<13}{'':29}  {kind:<11}{got:>10}"
              + "".join(f"{error(e, got):>{w}}" for e, w in zip(ests, (11, 9, 9))))


def error(estimated: float, actual: float) -> str:
    return f"{(estimated - actual) / actual:+.1%}" if actual else "-"


def measure() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--pilot", type=int, default=2)
    parser.add_argument("--select", type=int, default=1)
    parser.add_argument("--variants", default="full")
    parser.add_argument("--corpora", default="demo,locomo")
    parser.add_argument("--conversation", type=int, default=0, help="LoCoMo conversation (0-9).")
    args = parser.parse_args()
    print("Estimate error (estimated - actual) / actual against the tokens the scripted server received; "
          "before: no priors; after: the default; pilot: the default after a pilot")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.corpora.split(","):
            measure_corpus(name, args, Path(tmp))


if __name__ == "__main__":
    measure()
