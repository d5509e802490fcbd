"""`python -m tmem links`: score Temporal Memory Structuring against gold edges (tmem/evaluation/links.py).

Per corpus (default): every annotated child against its own Eq. 4 candidates, for the offline relation rules
(the default named by `structuring.relation_rule` first and marked "default", then the others), a configured
language-model relation role, and the previous-candidate baseline. `--questions`: the structuring of pipeline
runs, per question, over its evidence. `--leave-one-out --corpus A --corpus B ...`: each style held out in turn, the
fitted weights fitted on the others in memory, every offline rule scored on it
(tmem/evaluation/diagnostics/leave_one_out.py). Diagnostics (tmem/evaluation/diagnostics/confusion.py): the confusion
split by right/wrong parent and each miss's error class, in the table, in --json, and per scope with --details.
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
from tmem.evaluation.diagnostics.confusion import by_group, format_matrix
from tmem.evaluation.diagnostics.leave_one_out import WORST_METRICS, leave_one_style_out, worst_styles
from tmem.evaluation.fit_relation import L2
from tmem.evaluation.links import LinkScore, corpus_defaults, evaluate_links, evaluate_questions
from tmem.evaluation.recall import progress_line, recall_interval
from tmem.evaluation.tuning import check_look, record_look, sealed_split
from tmem.limits import strip_control


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", action="append", dest="corpora", metavar="CORPUS",
                        help="Corpus with gold edges (default: irc); repeatable with --leave-one-out.")
    parser.add_argument("--leave-one-out", action="store_true",
                        help="Leave one style out: for each --corpus held out, fit the fitted weights on the others "
                             "(in memory; weights.json is not written) and score every offline rule on it; dev "
                             "splits only.")
    parser.add_argument("--l2", type=number(float, 0, 10 ** 6), default=L2,
                        help=f"With --leave-one-out: the fit's L2 penalty (default {L2}).")
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
    parser.add_argument("--every", type=positive_int, default=1,
                        help="Score every N-th annotated child of each scope in log order (a sample stratified by "
                             "scope); the output states the sample and each accuracy's 95 %% interval over the "
                             "scopes (default: 1, every child).")
    parser.add_argument("--questions", action="store_true",
                        help="Score the structuring of pipeline runs per question (expected vs built edges "
                             "among each question's evidence) instead of every annotated child.")
    parser.add_argument("--variant", default="full", choices=list(VARIANTS), help="Preset for --questions.")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="Override a parameter, e.g. --set structuring.update_relevance=0.5 (repeatable).")
    parser.add_argument("--details", action="store_true",
                        help="With --json: every scored child's row (its miss class) and the matrix per scope.")
    parser.add_argument("--json", action="store_true", help="Print the scores as one JSON object.")
    parser.add_argument("--again", metavar="REASON",
                        help="Score a sealed split again with unchanged relation constants; the reason is recorded "
                             "in data/sealed_looks.jsonl (docs/evaluation.md, Sealed looks).")
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
            lines += format_matrix(f"  {corpus}", d["matrix"], d["misses"])
    return "\n".join(lines)


def format_folds(folds, worst: dict, default: str | None = None) -> str:
    """Leave-one-style-out: one block per held-out style (the default rule's misses by class under it), then each
    role's worst style per metric."""
    lines = [f"Leave one style out over {', '.join(f.held_out for f in folds)} (fitted weights fitted on the other "
             "styles for each, in memory)", "",
             f"{'held out':<16}{'relation role':<40}{'children':>9}{'edge acc':>9}{'UPD P':>7}{'UPD R':>7}  refit"]
    lines.append("-" * len(lines[-1]))
    for fold in folds:
        for d in fold.scores:
            if "skipped" in d:
                lines.append(f"{fold.held_out[:15]:<16}{d['role'][:39]:<40}  skipped: {d['skipped']}")
                continue
            role = d["role"] + (" (default)" if d["role"] == default else "")
            lines.append(f"{fold.held_out[:15]:<16}{role[:39]:<40}{d['children']:>9}"
                         f"{_pct(d['edge_accuracy']):>9}{_pct(d['update_precision']):>7}"
                         f"{_pct(d['update_recall']):>7}  {'yes' if d['refit'] else '-'}")
        ours = next((d for d in fold.scores if d["role"] == default and "misses" in d), None)
        if ours:
            lines.append(f"  {fold.held_out}: misses of the default: " + ", ".join(
                f"{k} {v}" for k, v in ours["misses"].items()))
        if fold.fit_error:
            lines.append(f"  {fold.held_out}: no fit on {', '.join(fold.trained_on)}: {fold.fit_error}")
    lines += ["", "worst style per role (lowest value, the style):"]
    for role, entry in worst.items():
        lines.append(f"  {role[:39]:<40}" + "; ".join(
            f"{m} " + (f"{e['value']:.3f} ({e['style']})" if e else "-") for m, e in
            ((m, entry[m]) for m in WORST_METRICS)))
    lines += ["", "refit: the rule reads the fitted weights, fitted without the held-out style; the others are fixed "
                  "rules. Every rule's misses and confusion per held-out style: --json."]
    return "\n".join(lines)


def leave_one_out(args: argparse.Namespace, store, config, roles, log) -> int:
    default = config.structuring.relation_rule
    rules = args.rule or [default] + [r for r in RELATION_RULES if r != default]
    offline = offline_relation_roles(rules, config, roles.embedder)
    folds = leave_one_style_out(store, args.corpora, offline, roles.embedder, l2=args.l2, log=log)
    worst = worst_styles(folds)
    default_role = offline[rules.index(default)].backend if default in rules else None
    if args.json:
        print(json.dumps({"leave_one_out": args.corpora, "default": default_role, "embedder": roles.embedder.name,
                          "folds": [{"held_out": f.held_out, "trained_on": list(f.trained_on),
                                     "fit_error": f.fit_error, "roles": list(f.scores)} for f in folds],
                          "worst": worst}))
    else:
        print(strip_control(format_folds(folds, worst, default_role)))
    return 0


def main(args: argparse.Namespace) -> int:
    corpora = args.corpora or ["irc"]
    if len(corpora) > 1 and not args.leave_one_out:
        raise ValueError("links scores one --corpus at a time; several only with --leave-one-out")
    args.corpora, args.corpus = corpora, corpora[0]
    store = open_store(args.db, demo=False)
    for corpus in corpora:
        store.corpus_info(corpus)
    if args.leave_one_out:
        return leave_one_out(args, store, resolve_config(args.variant, args.set),
                             roles_for(settings_from_args(args), store=store),
                             (lambda line: print(strip_control(line), file=sys.stderr)) if not args.json else None)
    if not any(store.gold_edges(args.corpus, s) for s in store.scopes(args.corpus)):
        raise ValueError(f"corpus {args.corpus!r} has no gold edges (import the IRC corpus: python -m tmem import irc "
                         "../shared/benchmarks/ubuntu-irc-disentanglement/dev --corpus irc-dev; or a GroupMemBench-"
                         "layout corpus with reply_to / decision annotations or a gold_edges.jsonl sidecar)")
    sealed = sealed_split(store, args.corpus)  # by its split marker; a look at it is recorded
    if sealed:
        check_look(sealed, args.again)  # refused before scoring: a second look is a look
    if generated_corpus(store, args.corpus) and not args.json:
        print(f"gold: {PLANNED_EDGES}", file=sys.stderr)
    config = resolve_config(args.variant, args.set)
    roles = roles_for(settings_from_args(args), store=store)
    log = (lambda line: print(strip_control(line), file=sys.stderr)) if not args.json else None
    started = time.perf_counter()
    if args.questions:
        rows, total = evaluate_questions(store, args.corpus, roles, config, args.variant, log=log)
        if sealed:
            record_look(sealed, args.corpus, [total.as_dict()], {"questions": args.variant, "set": args.set},
                        args.again)
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
    scores, per_scope = score_by_scope(store, args, relation_roles, log)
    default_window, default_candidates = corpus_defaults(store, args.corpus)
    settings = {"window_minutes": default_window if args.window is None else (args.window or None),
                "candidates": default_candidates if args.candidates is None else args.candidates, "query": args.query,
                "limit": args.limit, "every": args.every, "embedder": roles.embedder.name}
    dicts = [{**s.as_dict(), "default": s.role == default_backend} for s in scores]
    if sealed:
        record_look(sealed, args.corpus, dicts, {**settings, "scope": args.scope, "set": args.set}, args.again)
    if args.limit or args.every != 1:  # a sample: each accuracy with its interval over the scopes
        for i, d in enumerate(dicts):
            lo, hi = recall_interval([(scope[i].correct, scope[i].children) for scope in per_scope])
            d["interval"] = None if lo != lo else [round(lo, 4), round(hi, 4)]
    if args.json:
        if args.details:
            for d, s in zip(dicts, scores):
                d["rows"] = s.rows
                d["scopes"] = by_group(s.rows, "scope")
        print(json.dumps({"corpus": args.corpus, "settings": settings, "roles": dicts}))
    else:
        print(format_table(args.corpus, dicts, settings))
        if dicts and "interval" in dicts[0]:
            print(f"\nSample (--every {args.every}" + (f", --limit {args.limit}" if args.limit else "")
                  + f"): 95 % interval of each accuracy over {len(per_scope)} scopes:\n" + "\n".join(
                      f"  {d['role'][:39]:<40}" + (f"[{d['interval'][0]:.3f}, {d['interval'][1]:.3f}]"
                                                   if d["interval"] else "- (under two scopes)") for d in dicts))
    print(f"done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


def score_by_scope(store, args, relation_roles, log) -> tuple[list[LinkScore], list[list[LinkScore]]]:
    """The scores summed over the scopes, scored one scope at a time so a long run says how far it is and the time
    left; and each scope's own scores (what a sample's interval is computed over)."""
    names = args.scope or store.scopes(args.corpus)
    per_scope_limit = -(-args.limit // len(names)) if args.limit else None  # spread over every scope, as before
    started, parts = time.perf_counter(), []
    for i, name in enumerate(names, 1):
        parts.append(evaluate_links(store, args.corpus, relation_roles, window=args.window,
                                    candidates=args.candidates, query=args.query, limit=per_scope_limit,
                                    keep_rows=args.details, scopes=[name], log=log, every=args.every))
        if log:
            log(progress_line(i, len(names), started, "scopes"))
    totals = [LinkScore(s.role) for s in parts[0]] if parts else []
    for scores in parts:
        for total, s in zip(totals, scores):
            total.merge(s)
    return totals, parts
