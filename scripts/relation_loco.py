"""Leave-one-case-out scoring of the fitted relation role on the dev cases (docs/evaluation.md, `links`).

  python scripts/relation_loco.py --db /tmp/x.duckdb [--cases cases-dev] [--irc irc-dev] [--set NAME=VALUE]

For each dev case: fit the weights on IRC dev and the other dev cases (tmem.evaluation.fit_relation: the joint
parent model and the label model, as `fit-relation` does), score the
left-out case with `links`' own scoring, and pool the scores. The in-sample `links` row of cases dev flatters a
change that the fit can memorise; this is the fairer dev figure. Dev corpora only.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tmem.api import open_store
from tmem.api.models import roles_for
from tmem.commands.flags import settings_from_args
from tmem.evaluation import fit_relation as fit
from tmem.evaluation.links import LinkScore, evaluate_links
from tmem.models.relation.fitted import FittedRelation


def combine(parts: list[fit.Examples]) -> fit.Examples:
    """One Examples of several corpora, each weighing 1 in all (as fit_weights does)."""
    out = fit.Examples([], [], [], [], [], [], [])
    for ex in parts:
        w, lw = np.array(ex.weight), np.array(ex.label_weight)
        out.pair += ex.pair
        out.root += ex.root
        out.target += ex.target
        out.weight += list(w / w.sum()) if len(w) else []
        out.label += ex.label
        out.is_update += ex.is_update
        out.labels += ex.labels
        out.gated += ex.gated
        out.relation += ex.relation
        out.child += ex.child
        out.candidates += ex.candidates
        out.label_weight += list(lw / lw.sum()) if len(lw) else []
    return out


def merge_cases(cases: dict[str, fit.Examples], keep: list[str]) -> fit.Examples:
    """The cases in `keep` as one corpus (their children weigh equally)."""
    out = fit.Examples([], [], [], [], [], [], [])
    for name in keep:
        ex = cases[name]
        for field in ("pair", "root", "target", "label", "is_update", "labels", "gated", "relation", "child",
                      "candidates"):
            getattr(out, field).extend(getattr(ex, field))
    out.weight = [1.0] * len(out.pair)
    out.label_weight = [1.0] * len(out.label)
    return out


def weights_file(ex: fit.Examples, folder: Path, name: str, l2: float = fit.L2, label_l2: float = fit.L2) -> str:
    from tmem.models.relation.features import LABEL_FEATURES, PAIR_FEATURES, ROOT_FEATURES
    wp, wr, wu = fit.fit_joint(ex, l2)
    wl = fit.fit_label(ex, label_l2)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"pair": dict(zip(PAIR_FEATURES, map(float, wp))),
                                "root": dict(zip(ROOT_FEATURES, map(float, wr))),
                                "update": dict(zip(LABEL_FEATURES, map(float, wu))),
                                "label": dict(zip(LABEL_FEATURES, map(float, wl)))}),
                    encoding="utf-8")
    return str(path)


def dev_examples(db: str, cases_corpus: str, irc_corpus: str):
    """(store, embedder, IRC examples, names of the cases with gold edges, examples per case); a corpus named as
    a test split is refused."""
    for corpus in (cases_corpus, irc_corpus):
        if "test" in corpus.casefold():
            raise SystemExit(f"--corpus {corpus}: dev corpora only")
    store = open_store(db, demo=False)
    embedder = roles_for(settings_from_args(argparse.Namespace()), store=store).embedder
    irc = fit.collect(store, [irc_corpus], embedder)
    names = [n for n in store.scopes(cases_corpus) if store.gold_edges(cases_corpus, n)]
    return store, embedder, irc, names, {n: fit.collect(store, [cases_corpus], embedder, scopes=[n]) for n in names}


def dev_parser(doc: str) -> argparse.ArgumentParser:
    """The dev scripts' flags: the database, the dev cases and the IRC dev corpus names."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--cases", default="cases-dev")
    parser.add_argument("--irc", default="irc-dev")
    return parser


def main() -> int:
    parser = dev_parser(__doc__)
    parser.add_argument("--json", help="Write the pooled rows here.")
    parser.add_argument("--l2", type=float, default=fit.L2,
                        help=f"L2 penalty of the joint parent model (default {fit.L2}).")
    parser.add_argument("--label-l2", type=float, default=fit.L2,
                        help=f"L2 penalty of the label model (default {fit.L2}).")
    args = parser.parse_args()
    started = time.perf_counter()
    store, embedder, irc, names, cases = dev_examples(args.db, args.cases, args.irc)
    total = LinkScore("fitted, leave one case out")
    with tempfile.TemporaryDirectory() as tmp:
        for held in names:
            path = weights_file(combine([irc, merge_cases(cases, [n for n in names if n != held])]), Path(tmp), held,
                                args.l2, args.label_l2)
            role = FittedRelation(weights_path=path).with_embedder(embedder)
            score = evaluate_links(store, args.cases, [role], scopes=[held], keep_rows=bool(args.json))[0]
            for row in score.rows:
                row["scope"] = held
            total.merge(score)
            d = score.as_dict()
            print(f"  {held}: edge {d['edge_accuracy']}, UPD P/R {d['update_precision']}/{d['update_recall']}",
                  file=sys.stderr)
    d = total.as_dict()
    print(f"leave one case out ({len(names)} cases, {d['children']} children): edge {d['edge_accuracy']:.3f}, "
          f"accuracy {d['accuracy']:.3f}, UPD P/R {d['update_precision']:.3f}/{d['update_recall']:.3f} "
          f"({total.update_right}/{total.update_predicted} predicted, {total.update_gold} gold) "
          f"in {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"total": d, "rows": total.rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
