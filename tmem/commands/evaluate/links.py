"""`python -m tmem links`: score Temporal Memory Structuring against gold edges (tmem/evaluation/links.py).

Per corpus (default): every annotated child against its own Eq. 4 candidates, for the offline relation rules
(the default named by `structuring.relation_rule` first and marked "default", then the others), a configured
language-model relation role, and the previous-candidate baseline. `--questions`: the structuring of pipeline
runs, per question, over its evidence.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from tmem.api import open_store, resolve_config
from tmem.api.demo import PLANNED_EDGES, generated_corpus
from tmem.api.models import RELATION_RULES, offline_relation_roles, roles_for
from tmem.commands.flags import add_backend_arguments, number, positive_int, settings_from_args
from tmem.config import VARIANTS
from tmem.evaluation.links import corpus_defaults, evaluate_links, evaluate_questions
from tmem.limits import strip_control


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default="irc", help="Corpus with gold edges (default: irc).")
    parser.add_argument("--scope", action="append", default=[], help="Only this scope (repeatable).")
    parser.add_argument("--window", type=number(float, 0, 10 ** 7),
                        help="Candidate window before the child, minutes; 0 = none (default: 30 on IRC, none "
                             "elsewhere).")
    parser.add_argument("--candidates", type=number(int, 0, 10 ** 9),
                        help="Most recent eligible candidates per child; 0 = all (default: 20 on IRC, all elsewhere).")
    parser.add_argument("--rule", action="append", choices=RELATION_RULES,
                        help="Offline relation rule(s) to score (default: all three).")
    parser.add_argument("--query", choices=("child", "empty"), default="child",
                        help="What the relation role is conditioned on (default: the child's text).")
    parser.add_argument("--limit", type=positive_int, help="Score at most N children (spread over the scopes).")
    parser.add_argument("--questions", action="store_true",
                        help="Score the structuring of pipeline runs per question (expected vs built edges "
                             "among each question's evidence) instead of every annotated child.")
    parser.add_argument("--variant", default="full", choices=list(VARIANTS), help="Preset for --questions.")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="Override a parameter, e.g. --set structuring.update_relevance=0.5 (repeatable).")
    parser.add_argument("--details", action="store_true", help="With --json: every scored child's row.")
    parser.add_argument("--json", action="store_true", help="Print the scores as one JSON object.")
    parser.add_argument("--db", help="DuckDB file (default: data/tmem.duckdb, or $TMEM_DB).")
    add_backend_arguments(parser)


def _pct(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def format_table(corpus: str, scores: list[dict], settings: dict) -> str:
    lines = [f"Structuring against gold edges on {corpus!r} ({', '.join(f'{k}={v}' for k, v in settings.items())})",
             "", f"{'relation role':<40}{'children':>9}{'accuracy':>9}{'link acc':>9}{'root ok':>8}{'rel acc':>8}"
                 f"{'edge acc':>9}{'UPD P':>7}{'UPD R':>7}{'coverage':>9}{'ms/child':>9}"]
    lines.append("-" * len(lines[-1]))
    for d in scores:
        role = d["role"] + (" (default)" if d.get("default") else "")
        lines.append(f"{role[:39]:<40}{d['children']:>9}{d['accuracy']:>9.3f}{_pct(d['link_accuracy']):>9}"
                     f"{_pct(d['root_rate']):>8}{_pct(d['relation_accuracy']):>8}{_pct(d['edge_accuracy']):>9}"
                     f"{_pct(d['update_precision']):>7}{_pct(d['update_recall']):>7}{_pct(d['coverage']):>9}"
                     f"{d['ms_per_child']:>9.2f}")
    lines += ["", "accuracy: right parent, or ROOT for a gold root; link acc: right parent over children with a gold "
                  "parent; root ok: gold roots left ROOT;", "rel acc / edge acc: right label / right parent and "
                  "label, over typed gold edges; UPD P/R: UPDATE edge precision / recall; coverage: scored share of "
                  "annotated children."]
    for d in scores:
        if d["confusion"]:
            lines += ["", f"{d['role']}: gold -> built: " + ", ".join(f"{k} {v}" for k, v in d["confusion"].items())]
            lines.append("  reliability (confidence bin: n, mean confidence, accuracy): " + "; ".join(
                f"{b['bin']}: {b['n']}, {b['confidence']:.2f}, {b['accuracy']:.2f}" for b in d["reliability"]))
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    store = open_store(args.db, demo=False)
    store.corpus_info(args.corpus)
    if not any(store.gold_edges(args.corpus, s) for s in store.scopes(args.corpus)):
        raise ValueError(f"corpus {args.corpus!r} has no gold edges (import the IRC corpus: python -m tmem import irc "
                         "../shared/benchmarks/ubuntu-irc-disentanglement/dev --corpus irc-dev; or a GroupMemBench-"
                         "layout corpus with reply_to / decision annotations or a gold_edges.jsonl sidecar)")
    if generated_corpus(store, args.corpus) and not args.json:
        print(f"gold: {PLANNED_EDGES}", file=sys.stderr)
    config = resolve_config(args.variant, args.set)
    roles = roles_for(settings_from_args(args), store=store)
    log = (lambda line: print(strip_control(line), file=sys.stderr)) if not args.json else None
    started = time.perf_counter()
    if args.questions:
        rows, total = evaluate_questions(store, args.corpus, roles, config, args.variant, log=log)
        if args.json:
            print(json.dumps({"corpus": args.corpus, "variant": args.variant, "total": total.as_dict(),
                              "questions": [{"question": q, "scope": s, **d.as_dict(), "rows": d.rows}
                                            for q, s, d in rows]}))
        else:
            print(strip_control(format_table(args.corpus, [total.as_dict()], {"per question": args.variant})))
            for q, s, d in rows:
                wrong = [r for r in d.rows if not r["right"]]
                print(strip_control(  # question and message ids are the data's
                    f"\n{q} [{s}]: {d.edge_right}/{d.typed} typed edges right, {d.correct}/{d.children} parents "
                    f"right" + "".join(f"\n  expected {r['expected_parent']} -{r['expected']}-> {r['child']}, "
                                       f"built {r['built_parent']} -{r['built']}->" for r in wrong)))
        return 0
    default = config.structuring.relation_rule  # listed first and marked: the role structuring runs by default
    rules = args.rule or [default] + [r for r in RELATION_RULES if r != default]
    relation_roles = offline_relation_roles(rules, config, roles.embedder)
    default_backend = offline_relation_roles([default], config, roles.embedder)[0].backend if roles.relation.offline \
        else roles.relation.backend
    if not roles.relation.offline:
        relation_roles.append(roles.relation)
    scores = evaluate_links(store, args.corpus, relation_roles, window=args.window, candidates=args.candidates,
                            query=args.query, limit=args.limit, keep_rows=args.details, scopes=args.scope or None,
                            log=log)
    default_window, default_candidates = corpus_defaults(store, args.corpus)
    settings = {"window_minutes": default_window if args.window is None else (args.window or None),
                "candidates": default_candidates if args.candidates is None else args.candidates, "query": args.query,
                "limit": args.limit, "embedder": roles.embedder.name}
    dicts = [{**s.as_dict(), "default": s.role == default_backend} for s in scores]
    if args.json:
        if args.details:
            for d, s in zip(dicts, scores):
                d["rows"] = s.rows
        print(json.dumps({"corpus": args.corpus, "settings": settings, "roles": dicts}))
    else:
        print(format_table(args.corpus, dicts, settings))
    print(f"done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0
