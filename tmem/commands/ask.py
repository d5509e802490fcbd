"""`python -m tmem ask`: run one question through the pipeline and print its evidence forest and answers."""
from __future__ import annotations

import argparse
import sys

from tmem.config import VARIANTS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default="demo", help="Corpus name in the database (default: demo).")
    parser.add_argument("--question", metavar="ID", help="Id of a stored question.")
    parser.add_argument("--scope", help="Memory scope (needed for --text, or when a question id is ambiguous).")
    parser.add_argument("--text", help="Ask your own question instead of a stored one.")
    parser.add_argument("--user", help="Asking-user id for --text (e.g. User_3).")
    parser.add_argument("--variant", default="full", choices=list(VARIANTS), help="Configuration preset.")
    parser.add_argument("--k", type=int, help="Override the number of BM25 anchors (default 36).")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="Override any pipeline parameter, e.g. --set discovery.mu=0.5 (repeatable; "
                             "names and defaults in the README's configuration table).")
    parser.add_argument("--json", action="store_true", help="Print the whole trace as JSON.")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")
    parser.add_argument("--no-save", action="store_true", help="Do not store the trace in the database.")
    try:
        from tmem.models.factory import add_backend_arguments
    except ImportError:
        return
    add_backend_arguments(parser)


def roles_from_args(args: argparse.Namespace, store=None):
    try:
        from tmem.models.factory import build_roles, settings_from_args
    except ImportError:
        from tmem.models.offline import offline_roles

        return offline_roles()
    return build_roles(settings_from_args(args), store=store)


def main(args: argparse.Namespace) -> int:
    from tmem.config import apply_overrides, variant_config
    from tmem.pipeline import run_question
    from tmem.scope import load_scope
    from tmem.store import open_store
    from tmem.types import Question

    if bool(args.question) == bool(args.text):
        raise ValueError("give exactly one of --question ID or --text \"...\"")
    store = open_store(args.db)
    store.corpus_info(args.corpus)
    if args.text:
        scopes = store.scopes(args.corpus)
        scope_name = args.scope or (scopes[0] if len(scopes) == 1 else None)
        if scope_name is None:
            raise ValueError(f"corpus {args.corpus!r} has several scopes; pass --scope ({', '.join(scopes[:8])})")
        question, gold = Question("adhoc", scope_name, args.text, args.user, None), None
    else:
        question = store.question(args.corpus, args.question, args.scope)
        gold = store.gold(args.corpus, question.scope, question.id)
    config = variant_config(args.variant)
    if args.k:
        config = config.with_("retrieval", k=args.k)
    config = apply_overrides(config, args.set)
    roles = roles_from_args(args, store)
    from tmem.models.embedders import embedding_progress

    log = (lambda line: print(line, file=sys.stderr)) if not args.json else None
    # the first question of a fresh scope embeds its messages: say so
    scope = load_scope(store, args.corpus, question.scope, embedding_progress(log) if log else None)
    progress = stage_progress(log) if log else None
    trace = run_question(question, scope, config, roles, corpus=args.corpus, variant=args.variant, gold=gold,
                         progress=progress)
    if not args.no_save:
        store.save_trace(trace, roles.label)
    print(trace.to_json() if args.json else format_trace(trace, roles.describe(), response_cache_stats(roles)))
    return 0


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


def response_cache_stats(roles) -> dict | None:
    try:
        from tmem.models.factory import cache_stats
    except ImportError:
        return None
    return cache_stats(roles)


def format_trace(trace, backends: dict[str, str], cache: dict | None = None) -> str:
    q = trace.question
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
