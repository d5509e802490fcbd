"""`python -m tmem record-demo` (`make record-demo`): record the local model's replies to the demo's curated questions
into data/recorded-local.json, which the `recorded` backend presets replay with no server (tmem.models.local.recorded).

Runs the hybrid preset (offline selection and structuring, the local model answers and judges) on one question of
every type, and all four roles local on the curated question with k = 8. Replies are also kept in the database's
response cache, so an interrupted recording resumes where it stopped; the file is rewritten after every question.
Slow on purpose: each answer call reads a few thousand prompt tokens on the CPU (minutes on two busy cores).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

from tmem import api
from tmem.api.backends import MODELS, BackendSettings
from tmem.api.models import ProgressWatch, roles_for
from tmem.models.local import recorded


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB); holds the reply cache.")
    parser.add_argument("--out", help="Recording file (default: data/recorded-local.json).")
    parser.add_argument("--questions", help="Comma-separated demo question ids for the hybrid runs (default: one "
                                            "per question type).")
    parser.add_argument("--no-all-local", action="store_true",
                        help="Skip the run with all four roles on the local model.")
    parser.add_argument("--local-model", help="Packaged model (default: the local backend's default).")
    parser.add_argument("--fresh", action="store_true",
                        help="Ask the model again for every prompt (default: a prompt the previous recording file "
                             "holds a reply to, for the same model and server, is answered from it).")


def main(args: argparse.Namespace) -> int:
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    store = api.open_store(args.db)
    path = args.out or recorded.RECORDING
    cache = recorded.CapturingCache(store, previous=None if args.fresh else _previous_replies(path, log))
    extra = {"local.model": args.local_model} if args.local_model else {}
    hybrid = args.questions.split(",") if args.questions else list(recorded.HYBRID_QUESTIONS)
    runs = [("local", q, "") for q in hybrid]
    runs += [] if args.no_all_local else [("local-all", q, o) for q, o in recorded.ALL_LOCAL_RUNS]
    settings = BackendSettings.from_sources(overrides={"backend.preset": "local", **extra})
    out = recorded.Recording(settings.local.model, MODELS[settings.local.model].title, recorded.now_utc(),
                             code=_commit(), server={"n_ctx": settings.local.n_ctx, "threads": settings.local.threads})
    roles_by_preset = {}
    for n, (preset, qid, overrides) in enumerate(runs, 1):
        if preset not in roles_by_preset:
            s = BackendSettings.from_sources(overrides={"backend.preset": preset, **extra})
            roles_by_preset[preset] = roles_for(s, store=store, cache=cache, log=log)
        roles = roles_by_preset[preset]
        question, gold = api.stored_question(store, "demo", qid, recorded.SCOPE)
        config = api.resolve_config("full", overrides)
        log(f"[{n}/{len(runs)}] {qid} ({preset}{', ' + overrides if overrides else ''}) ...")
        started = time.perf_counter()
        with ProgressWatch(settings.local.port, log, interval=10.0):
            trace = api.run_and_store(store, "demo", question, "full", config, roles, gold,
                                      progress=_stage_log(log))
        out.runs.append(recorded.run_record(trace, preset, overrides, recorded.stage_figures(trace)))
        out.responses = dict(cache.captured)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(out.to_json())
        verdicts = ", ".join(f"{k} {'correct' if v else 'incorrect'}" for k, v in out.runs[-1]["verdicts"].items())
        log(f"    done in {time.perf_counter() - started:.0f} s: {verdicts}")
    print(f"recorded {len(out.runs)} runs, {len(out.responses)} replies into {path} ({cache.reused} reused from "
          f"the previous recording)")
    return 0


def _previous_replies(path, log) -> dict:
    """The replies of the recording at `path`, or none when there is no readable one (cache keys name the model,
    server URL, role, prompt and decoding, so only an identical request is answered from it)."""
    try:
        return recorded.load_recording(path).responses
    except (OSError, ValueError) as exc:
        log(f"no previous recording reused ({exc})")
        return {}


def _stage_log(log):
    seen = set()

    def progress(stage: str, fraction: float) -> None:
        if stage not in seen:
            seen.add(stage)
            log(f"    {stage} ...")
    return progress


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
