"""`python -m tmem ask`: run one question through the pipeline and print its evidence forest and answers.

A stored question (`--question ID`) or an ad-hoc one (`--text`, `--user`): an ad-hoc question gets the id the app
gives it (`tmem.api.adhoc_question`, a hash of scope, text and user), so both store and find the same trace.
"""
from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext

from tmem import api
from tmem.api.backends import ROLES, load_recording
from tmem.api.models import ProgressWatch, cache_stats, embedding_progress, model_lines, peak_in_flight, roles_for
from tmem.commands.flags import add_backend_arguments, positive_int, settings_from_args
from tmem.config import VARIANTS, apply_overrides
from tmem.limits import strip_control


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default="demo", help="Corpus name in the database (default: demo).")
    parser.add_argument("--question", metavar="ID", help="Id of a stored question.")
    parser.add_argument("--scope", help="Memory scope (needed for --text, or when a question id is ambiguous).")
    parser.add_argument("--text", help="Ask your own question instead of a stored one.")
    parser.add_argument("--user", help="Asking-user id for --text (e.g. User_3).")
    parser.add_argument("--variant", default="full", choices=list(VARIANTS), help="Configuration preset.")
    parser.add_argument("--k", type=positive_int, help="Override the number of BM25 anchors (default 36).")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="Override any pipeline parameter, e.g. --set discovery.mu=0.5 (repeatable; several "
                             "joined by ',' and list values by '|', as in the app's cfg= link parameter; names and "
                             "defaults in the README's configuration table).")
    parser.add_argument("--json", action="store_true", help="Print the whole trace as JSON.")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")
    parser.add_argument("--no-save", action="store_true", help="Do not store the trace in the database.")
    add_backend_arguments(parser)


def main(args: argparse.Namespace) -> int:
    if bool(args.question) == bool(args.text):
        raise ValueError("give exactly one of --question ID or --text \"...\"")
    store = api.open_store(args.db)
    store.corpus_info(args.corpus)
    if args.text:
        question = api.adhoc_question(api.default_scope(store, args.corpus, args.scope), args.text, args.user)
        gold = None
    else:
        question, gold = api.stored_question(store, args.corpus, args.question, args.scope)
    config = api.resolve_config(args.variant)
    if args.k:
        config = config.with_("retrieval", k=args.k)
    config = apply_overrides(config, args.set)  # --set wins over --k
    settings = settings_from_args(args)
    roles = roles_for(settings, store=store, log=lambda line: print(line, file=sys.stderr))
    log = (lambda line: print(line, file=sys.stderr)) if not args.json else None
    # the first question of a fresh scope embeds its messages: say so; a local model's call says how far it got
    with local_progress(settings, log):
        trace = api.run_and_store(store, args.corpus, question, args.variant, config, roles, gold,
                                  stage_progress(log) if log else None,
                                  embedding_progress=embedding_progress(log) if log else None, save=not args.no_save)
    # chat text reaches the terminal here: escape sequences in it must not drive the terminal
    print(trace.to_json() if args.json else strip_control(format_trace(trace, roles.describe(), cache_stats(roles))
                                                          + in_flight_line(roles) + model_summary(trace, settings)))
    return 0


def in_flight_line(roles) -> str:
    """The most model calls that were in flight at once (independent calls of a stage go out together)."""
    peak = peak_in_flight(roles)
    return "" if peak is None else f"\nCalls in flight: at most {peak} at once"


def local_progress(settings, log):
    """Progress and ETA of the local model's calls on stderr (a no-op for other backends)."""
    local = any(settings.role(r).backend == "local" for r in ROLES)
    return ProgressWatch(settings.local.port, log, interval=5.0) if local and log else nullcontext()


def model_summary(trace, settings) -> str:
    """Tokens and seconds per language-model role, reply patterns, and where recorded replies came from."""
    lines = model_lines(trace)
    if any(settings.role(r).backend == "recorded" for r in ROLES):
        lines.insert(0, f"{load_recording().label} (replayed: no server, no model call; seconds are the replay's)")
    return "\n\nLanguage-model roles:\n" + "\n".join(lines) if lines else ""


def stage_progress(log):
    """Stage progress for the terminal: each stage's start and end, and structuring in quarters (it reports every
    child, which would be one line per evidence message)."""
    state = {"stage": None, "quarter": -1}

    def progress(stage: str, fraction: float) -> None:
        quarter = int(fraction * 4)
        if stage != state["stage"]:
            state.update(stage=stage, quarter=quarter)
            log(f"  {stage}: {fraction:.0%}")
        elif quarter > state["quarter"]:
            state["quarter"] = quarter
            log(f"  {stage}: {fraction:.0%}")
    return progress


def format_trace(trace, backends: dict[str, str], cache: dict | None = None) -> str:
    q = trace.question
    structuring = next((s for s in trace.stages if s.name == "structuring" and s.backend), None)
    if structuring is not None:  # an offline relation role is the rule structuring.relation_rule names
        backends = {**backends, "relation": structuring.backend}
    out = [f"Question {q.id} [{q.scope}] asked by {q.asking_user or '?'}: {q.text}",
           "Backends: " + ", ".join(f"{k}={v}" for k, v in backends.items())]
    if cache:
        out.append(f"Response cache: {cache['hits']} hits, {cache['misses']} misses "
                   f"({cache['hit_rate']:.0%} hit rate)")
    discovery = trace.stage("discovery")
    structuring = trace.stage("structuring")
    out.append(f"Anchors: {len(trace.anchors)}; clusters: {len(trace.clusters)} "
               f"({sum(c.accepted for c in trace.clusters)} accepted); "
               f"recovered: {len(trace.evidence_ids) - len(trace.anchors)}; evidence: {len(trace.evidence_ids)}"
               + ("" if discovery else " (discovery off)"))
    if structuring:
        c = structuring.counts
        out.append(f"Forest: {int(c['nodes'])} nodes, {int(c['trees'])} trees, {int(c['update_edges'])} UPDATE, "
                   f"{int(c['expand_edges'])} EXPAND, {int(c['related_edges'])} RELATED edges")
    out.append(f"Context tokens: {trace.tokens_before_compression} -> {trace.tokens_after_compression} "
               f"({trace.token_counter})")
    out.append("")
    anchors = {a.message_id for a in trace.anchors}
    for n in trace.nodes:
        mark = "A" if n.message_id in anchors else "R"
        text = " ".join(n.text.split())
        out.append(f"{'  ' * n.depth}{n.relation:<7} [{mark}] {n.message_id} {n.timestamp:%Y-%m-%d %H:%M} "
                   f"{n.author or '?'}: {text[:110]}{'…' if len(text) > 110 else ''}")
    out.append("")
    for a in trace.answers:
        verdict = trace.verdict(a.presentation)
        tag = " (offline)" if a.offline else ""
        out.append(f"{a.presentation} answer{tag}: {a.text}")
        if verdict:
            out.append(f"  verdict: {'correct' if verdict.correct else 'incorrect'} — {verdict.raw}")
    for e in trace.errors:
        out.append(f"ERROR [{e.stage}] {e.message} -> {e.fallback}")
    return "\n".join(out)
