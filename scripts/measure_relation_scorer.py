"""The local model as a yes/no relation scorer (tmem/evaluation/relation/scorer.py) against the fitted offline
role, on a bounded, deterministic sample of typed children (gold UPDATE or EXPAND) of the cases dev split.

A benchmark command, not a test. `run` appends one JSON line per child to --out and skips children already there;
the first-token log-probabilities are cached per prompt in --cache (JSON), so an interrupted run resumes and a
re-run asks nothing. `summary` reads --out and prints the table: the offline role alone, and its top-k candidates
re-ranked (parent) and labelled (UPDATE / EXPAND) by the model, with the margin and threshold chosen on the tuning
half and reported on the held-back half (default: alternate children within each gold label; --split stored:
even / odd sample positions, which left the tuning half 3 of the 13 UPDATEs).

  python -m tmem import groupmembench data/cases/dev --corpus cases-dev --db /tmp/scorer/s.duckdb
  nohup nice -n 5 .venv/bin/python scripts/measure_relation_scorer.py run --db /tmp/scorer/s.duckdb \\
      --out /tmp/scorer/rows.jsonl --cache /tmp/scorer/replies.json > /tmp/scorer/run.log 2>&1 &
  .venv/bin/python scripts/measure_relation_scorer.py summary --out /tmp/scorer/rows.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tmem import api  # noqa: E402
from tmem.evaluation.links import GoldChild, LinkScore, gold_children  # noqa: E402
from tmem.evaluation.relation.scorer import RelationScorer, ScorerError, offline_probabilities, top_k  # noqa: E402
from tmem.models.embedders import make_embedder  # noqa: E402
from tmem.models.relation.fitted import FittedRelation  # noqa: E402
from tmem.pipeline.structuring import choose_parent  # noqa: E402
from tmem.store import open_store  # noqa: E402
from tmem.types import EXPAND, UPDATE, Message, ParentDecision, Question  # noqa: E402
from tmem.types import ROOT as ROOT_LABEL  # noqa: E402

SCOPES = ("AccessPolicy", "ReleaseFreeze", "VendorSelection")  # 3 dev cases: a policy, a plan, a selection
# the model's P(yes) sit close together (0.3-0.6), so the grids are fine; 1.01: never switch / never UPDATE
MARGINS = (0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3, 1.01)


def log(line: str) -> None:
    print(time.strftime("%H:%M:%S"), line, flush=True)


def sample(store, corpus: str, scopes, per_scope: int):
    """Per scope, `per_scope` typed children (gold UPDATE/EXPAND, parent among the candidates) evenly spaced over
    the scope's annotated children, in log order."""
    out = []
    for name in scopes:
        scope = api.open_scope(store, corpus, name)
        items = [i for i in gold_children(scope.messages, store.gold_edges(corpus, name), None, 0)
                 if i.relation in (UPDATE, EXPAND) and i.covered]
        n = min(per_scope, len(items))
        out += [(name, scope, items[round(j * len(items) / n)]) for j in range(n)]
    return out


def run(args) -> None:
    if "test" in args.corpus.lower():
        raise SystemExit("dev data only: refusing a corpus named *test*")
    out, cache_path = Path(args.out), Path(args.cache)
    done = {json.loads(x)["key"] for x in out.read_text().splitlines() if x.strip()} if out.exists() else set()
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    server = None
    if args.base_url is None:
        from tmem.models.local.server import ServerOptions, ensure_server
        options = ServerOptions(model=args.model, port=args.port, n_ctx=4096)
        server = ensure_server(options, log)
        args.base_url = options.base_url
    scorer = RelationScorer(args.base_url, args.model, cache=cache)
    store = open_store(args.db)
    embedder = make_embedder("auto")
    fitted = FittedRelation().with_embedder(embedder)
    items = sample(store, args.corpus, args.scopes, args.per_scope)
    log(f"{len(items)} children, {len(done)} done; {args.base_url}")
    try:
        for n, (name, scope, item) in enumerate(items):
            key = f"{name}/{item.child.id}"
            if key in done:
                continue
            child, cands = item.child, list(item.candidates)
            question = Question(f"link:{child.id}", name, child.text, None, None)
            started = time.perf_counter()
            reply = fitted.label_pairs(question, child, cands, scope)
            decision, _ = choose_parent(child, item.candidates, reply.choices, typed=True)
            probs, settled = offline_probabilities(question, child, cands, scope, embedder)
            offline_s = time.perf_counter() - started
            asked = top_k(probs, args.k, settled)
            ids = [cands[i].id for i in asked]
            if decision.parent_id and decision.parent_id not in ids:
                ids.append(decision.parent_id)
            chosen = [next(c for c in cands if c.id == i) for i in ids]
            started = time.perf_counter()
            try:
                scores = scorer.score(child, chosen)
                error = None
            except ScorerError as exc:
                scores, error = [], str(exc)[:300]
            model_s = time.perf_counter() - started
            cache_path.write_text(json.dumps(cache, ensure_ascii=False))
            by_id = {c.id: i for i, c in enumerate(cands)}
            record = {"key": key, "half": "tune" if n % 2 == 0 else "held", "gold": sorted(item.gold_parents),
                      "relation": item.relation, "n_candidates": len(cands),
                      "offline": {"parent": decision.parent_id, "relation": decision.relation,
                                  "confidence": decision.confidence, "root_p": round(float(probs[-1]), 4)},
                      "asked": [{"id": s["link"].candidate,
                                 "p_offline": round(float(probs[by_id[s["link"].candidate]]), 4),
                                 "p_link": round(s["link"].p_yes, 4), "p_update": round(s["update"].p_yes, 4)}
                                for s in scores],
                      "prompt_tokens": sum(p.prompt_tokens for s in scores for p in s.values()),
                      "cached_tokens": sum(p.cached_tokens for s in scores for p in s.values()),
                      "calls": sum(not p.cached for s in scores for p in s.values()),
                      "model_seconds": round(sum(p.seconds for s in scores for p in s.values()), 2),
                      "wall_seconds": round(model_s, 2), "offline_seconds": round(offline_s, 3), "error": error}
            with open(out, "a") as fh:
                fh.write(json.dumps(record) + "\n")
            best = max(record["asked"], key=lambda a: a["p_link"], default={})
            log(f"{n + 1}/{len(items)} {key} gold {record['gold']} {item.relation}; offline {decision.parent_id} "
                f"{decision.relation}; model best link {best.get('id')} {best.get('p_link')} upd "
                f"{best.get('p_update')}; {record['model_seconds']} s, {record['prompt_tokens']} prompt tokens "
                f"({record['cached_tokens']} cached){'; ERROR ' + error if error else ''}")
    finally:
        if server is not None:
            server.stop()


# ---------------------------------------------------------------------------------------------- the summary
def offline_decision(row: dict) -> ParentDecision:
    o = row["offline"]
    relation = ROOT_LABEL if o["parent"] is None else o["relation"]
    return ParentDecision(row["key"], (), (), o["parent"], relation, o["confidence"])


def reranked(row: dict, margin: float, threshold: float | None, relative: bool = False) -> ParentDecision:
    """The offline parent, unless an asked candidate's P(link) beats the offline parent's by `margin` (a ROOT
    decision stays ROOT); the label: UPDATE when P(update | parent) >= threshold (None: the offline label), or with
    `relative` when P(update) - P(link) >= threshold (the child's own yes-bias cancels)."""
    o, asked = row["offline"], {a["id"]: a for a in row["asked"]}
    if o["parent"] is None or not asked:
        return offline_decision(row)
    parent = o["parent"]
    best = max(row["asked"], key=lambda a: a["p_link"])
    if best["p_link"] - asked[parent]["p_link"] >= margin and best["id"] != parent:
        parent = best["id"]
    if threshold is None:
        relation = o["relation"] if parent == o["parent"] else EXPAND
    else:
        value = asked[parent]["p_update"] - (asked[parent]["p_link"] if relative else 0.0)
        relation = UPDATE if value >= threshold else EXPAND
    return ParentDecision(row["key"], (), (), parent, relation, asked[parent]["p_link"])


def score(rows, decide, name: str) -> dict:
    s = LinkScore(name, linked=len(rows))
    for row in rows:
        child = Message(row["key"], "", "", datetime.min)
        s.add(GoldChild(child, (), frozenset(row["gold"]), row["relation"]), decide(row))
    d = s.as_dict()
    return {k: d[k] for k in ("children", "link_accuracy", "relation_accuracy", "edge_accuracy", "update_precision",
                              "update_recall")} | {"update_predicted": s.update_predicted, "update_gold": s.update_gold}


def summary(args) -> None:
    rows = [json.loads(x) for x in Path(args.out).read_text().splitlines() if x.strip()]
    rows = [r for r in rows if not r["error"]]
    if args.split == "stratified":  # alternate within each gold label, so both halves hold their share of UPDATEs
        seen: dict[str, int] = {}
        for r in rows:
            r["half"] = "tune" if seen.get(r["relation"], 0) % 2 == 0 else "held"
            seen[r["relation"]] = seen.get(r["relation"], 0) + 1
    tune, held = [r for r in rows if r["half"] == "tune"], [r for r in rows if r["half"] == "held"]
    print(f"split: {args.split}")
    margin = max(MARGINS, key=lambda m: (score(tune, lambda r: reranked(r, m, None), "")["link_accuracy"] or 0, m))
    def best_threshold(relative: bool) -> float:
        values = sorted({round(a["p_update"] - (a["p_link"] if relative else 0.0), 4) for r in tune
                         for a in r["asked"]}) + [1.01]
        return max(values, key=lambda t: (score(tune, lambda r: reranked(r, margin, t, relative), "")[
            "relation_accuracy"] or 0, -abs(t - (0.0 if relative else 0.5))))
    threshold, delta = best_threshold(False), best_threshold(True)
    methods = {"(a) fitted offline role": offline_decision,
               f"(b) top-{args.k} re-ranked (margin {margin}), offline label": lambda r: reranked(r, margin, None),
               f"(b) top-{args.k} re-ranked (margin {margin}), model label (t {threshold})":
                   lambda r: reranked(r, margin, threshold),
               f"(b) top-{args.k} re-ranked (margin {margin}), model label by P(update)-P(link) >= {delta}":
                   lambda r: reranked(r, margin, delta, True),
               f"(b') offline parent, model label (t {threshold})": lambda r: reranked(r, 1.01, threshold),
               f"(c) the model's most-linked of the offline top-{args.k}, always (margin 0), offline label":
                   lambda r: reranked(r, 0.0, None)}
    print("| method | half | children | parent acc | label acc | edge acc | UPDATE P | UPDATE R | UPDATE pred/gold |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, decide in methods.items():
        for half, part in (("tune", tune), ("held", held)):
            s = score(part, decide, name)
            print(f"| {name} | {half} | {s['children']} | {s['link_accuracy']} | {s['relation_accuracy']} | "
                  f"{s['edge_accuracy']} | {s['update_precision']} | {s['update_recall']} | "
                  f"{s['update_predicted']}/{s['update_gold']} |")
    called = [r for r in rows if r["calls"]]
    if called:
        secs = sorted(r["model_seconds"] for r in called)
        toks = sorted(r["prompt_tokens"] for r in called)
        cached = sum(r["cached_tokens"] for r in called) / max(sum(r["prompt_tokens"] for r in called), 1)
        print(f"\nmodel: {len(called)} children called, s/child median {secs[len(secs) // 2]:.1f} (mean "
              f"{sum(secs) / len(secs):.1f}), prompt tokens/child median {toks[len(toks) // 2]} ({cached:.0%} from "
              f"the prefix cache), calls/child {sum(r['calls'] for r in called) / len(called):.1f}")
    links = [(a["p_link"], a["id"] in r["gold"]) for r in rows for a in r["asked"]]
    updates = [(a["p_update"], r["relation"] == UPDATE) for r in rows for a in r["asked"] if a["id"] in r["gold"]]
    deltas = [(a["p_update"] - a["p_link"], r["relation"] == UPDATE) for r in rows for a in r["asked"]
              if a["id"] in r["gold"]]
    print(f"discrimination (AUC, all rows, no threshold): P(link) gold parent vs other asked candidates "
          f"{auc(links)}; on the gold parent, P(update) UPDATE vs EXPAND children {auc(updates)}, "
          f"P(update)-P(link) {auc(deltas)}")
    gold_in = sum(any(a["id"] in r["gold"] for a in r["asked"]) for r in rows)
    print(f"gold parent among the asked candidates: {gold_in}/{len(rows)}; errors: "
          f"{sum(1 for x in Path(args.out).read_text().splitlines() if x.strip() and json.loads(x)['error'])}")


def auc(pairs) -> float | None:
    """P(score of a positive > score of a negative), ties half: the ranking quality of a score, no threshold."""
    pos, neg = [v for v, y in pairs if y], [v for v, y in pairs if not y]
    if not pos or not neg:
        return None
    return round(sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg)), 3)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--db", required=True)
    r.add_argument("--corpus", default="cases-dev")
    r.add_argument("--scopes", nargs="+", default=list(SCOPES))
    r.add_argument("--per-scope", type=int, default=16)
    r.add_argument("--k", type=int, default=3)
    r.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    r.add_argument("--port", type=int, default=18111)
    r.add_argument("--base-url", default=None, help="an endpoint already serving; default: start the local server")
    r.add_argument("--out", default="/tmp/scorer/rows.jsonl")
    r.add_argument("--cache", default="/tmp/scorer/replies.json")
    s = sub.add_parser("summary")
    s.add_argument("--out", default="/tmp/scorer/rows.jsonl")
    s.add_argument("--k", type=int, default=3)
    s.add_argument("--split", choices=("stored", "stratified"), default="stratified",
                   help="stored: even / odd sample positions (as run); stratified: alternate within each gold label")
    args = parser.parse_args(argv)
    (run if args.command == "run" else summary)(args)


if __name__ == "__main__":
    main()
