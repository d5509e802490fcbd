"""Bounded real-model figures for the `local` backend (docs/backends.md, "The local backend: measured").

Benchmark commands, not tests: each appends one JSON line per item to its --out file and skips items already
there, so an interrupted run resumes (and model replies are cached in the --db store, so a re-run costs nothing).

  links    the local relation role (App. K, one call per child over all candidates) on a fixed sample of IRC test
           children, next to the offline relation role and the previous-message baseline on the same children
           (the sample of `python -m tmem links --limit N`: the first N/scopes covered children of each log)
  answers  flat vs forest answers of the local answerer and judge (hybrid preset) next to the offline roles on
           knowledge-update / temporal questions; the local judge is also run on the offline answers, and the
           offline judge on the local answers, for judge agreement
  from-recording  the same rows for the recorded demo's hybrid runs (data/recorded-local.json), no model call
  pace     the server's speed as the backend measures it at start (one tiny request: tmem/models/local/pace.py)
           and the timeouts it gives each role's typical call; with the load average, one JSON line to --out
  summary  the tables of an --out file (printed as markdown)

  nice -n 10 .venv/bin/python scripts/measure_local.py links --db /tmp/tmem-local/bench.duckdb \\
      --corpus irc-test --limit 60 --out /tmp/tmem-local/links.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def done_keys(out: Path) -> dict[str, dict]:
    if not out.exists():
        return {}
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return {r["key"]: r for r in rows}


def append(out: Path, record: dict) -> None:
    with open(out, "a") as fh:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()


def local_roles(preset: str, store, log):
    from tmem.models.factory import build_roles
    from tmem.models.settings import BackendSettings

    settings = BackendSettings.from_sources(None, None, {"backend.preset": preset})
    return build_roles(settings, store=store, log=log)


# ------------------------------------------------------------------------------------------------------ links
def links(args) -> None:
    from tmem.config import StructuringConfig
    from tmem.evaluation.links import link_items
    from tmem.models.relation import rule_for
    from tmem.pipeline.scope import Scope
    from tmem.pipeline.structuring import choose_parent
    from tmem.store import open_store
    from tmem.types import Question

    store = open_store(args.db)
    out = Path(args.out)
    done = done_keys(out)
    scopes = store.scopes(args.corpus)
    per_scope = -(-args.limit // len(scopes))
    local = local_roles("local-all", store, log).relation
    offline = rule_for(StructuringConfig())
    sample = []
    for name in scopes:
        messages = store.messages(args.corpus, name)
        # children with a gold parent among their candidates (roots are not in this sample)
        items = [i for i in link_items(messages, store.gold_links(args.corpus, name), 30.0, 20)
                 if i.gold_parents and i.covered]
        sample += [(name, messages, i) for i in items[:per_scope]]
    log(f"links: {len(sample)} children, {len(done)} done")
    scope_cache: dict[str, Scope] = {}
    for n, (name, messages, item) in enumerate(sample, 1):
        key = f"{name}/{item.child.id}"
        if key in done:
            continue
        scope = scope_cache.setdefault(name, Scope(args.corpus, name, messages))
        question = Question(f"link:{item.child.id}", name, item.child.text, None, None)
        record = {"key": key, "gold": sorted(item.gold_parents), "candidates": len(item.candidates),
                  "previous": item.candidates[-1].id}
        for label, role in (("offline", offline), ("local", local)):
            started = time.perf_counter()
            ask = getattr(role, "label_pairs", None) or role.choose_parent  # the protocol's newer name, or the old
            reply = ask(question, item.child, list(item.candidates), scope)
            decision, _ = choose_parent(item.child, item.candidates, reply.choices, typed=True)
            record[label] = {"parent": decision.parent_id, "relation": decision.relation,
                             "confidence": decision.confidence, "seconds": round(time.perf_counter() - started, 2),
                             "prompt_tokens": reply.usage.prompt_tokens,
                             "completion_tokens": reply.usage.completion_tokens, "source": reply.usage.source,
                             "choices": [[c.parent_id, c.relation, c.confidence] for c in reply.choices],
                             "errors": [e.message[:300] for e in reply.errors]}
        append(out, record)
        log(f"links {n}/{len(sample)} {key}: local {record['local']['parent']} {record['local']['relation']} "
            f"{record['local']['confidence']} ({record['local']['seconds']} s, "
            f"{record['local']['prompt_tokens']} prompt tokens); gold {record['gold']}")


def links_table(rows: list[dict]) -> str:
    from tmem.models.reply_patterns import label_pattern

    n = len(rows)
    lines = ["| relation role | children | correct parent | wrong root | wrong parent | s/child (median) | "
             "prompt tokens/child (median) |", "|---|---|---|---|---|---|---|"]
    for label in ("local", "offline"):
        correct = sum(r[label]["parent"] in r["gold"] for r in rows)
        roots = sum(r[label]["parent"] is None for r in rows)
        secs = sorted(r[label]["seconds"] for r in rows)
        toks = sorted(r[label]["prompt_tokens"] for r in rows)
        lines.append(f"| {label} | {n} | {correct}/{n} ({correct / n:.0%}) | {roots} | {n - correct - roots} | "
                     f"{secs[n // 2]:.1f} | {toks[n // 2] if label == 'local' else '-'} |")
    base = sum(r["previous"] in r["gold"] for r in rows)
    lines.append(f"| baseline: previous message | {n} | {base}/{n} ({base / n:.0%}) | 0 | {n - base} | - | - |")
    pattern = label_pattern([(c[1], c[2]) for r in rows for c in r["local"]["choices"][:1]], "relation")
    errors = sum(bool(r["local"]["errors"]) for r in rows)
    lines += ["", f"local reply pattern: {pattern or 'none detected'}; calls that failed: {errors}"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- answers
ANSWER_SETS = {  # name: the roles; every set shares the response cache, so local answers are made once
    "offline": {"backend.preset": "offline"},
    "hybrid": {"backend.preset": "local"},  # local answer, local judge
    "local-answer+offline-judge": {"backend.preset": "local", "roles.judge.backend": "offline"},
    "offline-answer+local-judge": {"backend.preset": "local", "roles.answer.backend": "offline"},
}


def answer_questions(store, args) -> list[tuple[str, object]]:
    """The fixed sample: the demo's knowledge-update and temporal questions, then the first --locomo temporal
    questions of LoCoMo conversation --locomo-scope (a test conversation: 0-4 are the dev split)."""
    from itertools import chain, zip_longest

    from tmem.demo import DEMO_CORPUS

    demo = store.questions(DEMO_CORPUS, "Technology")
    groups = [[(DEMO_CORPUS, q) for q in demo if q.type == t][:args.demo // 2]
              for t in ("knowledge_update", "temporal")]
    if args.locomo and "locomo" in store.corpora():
        scope = store.scopes("locomo")[args.locomo_scope]
        groups.append([("locomo", q) for q in store.questions("locomo", scope) if q.type == "temporal"][:args.locomo])
    # round robin over the groups: a run stopped early still covers every kind of question
    return [x for x in chain.from_iterable(zip_longest(*groups)) if x is not None]


def answers(args) -> None:
    from tmem import api
    from tmem.models.factory import build_roles
    from tmem.models.llm.cache import ResponseCache
    from tmem.models.local.recorded import stage_figures
    from tmem.models.settings import BackendSettings

    store = api.open_store(args.db)
    out = Path(args.out)
    done = done_keys(out)
    cache = ResponseCache(store, "on")
    sets = {k: v for k, v in ANSWER_SETS.items() if args.judge_offline_answers or k != "offline-answer+local-judge"}
    roles = {name: build_roles(BackendSettings.from_sources(None, None, o), store=store, cache=cache, log=log)
             for name, o in sets.items()}
    sample = answer_questions(store, args)
    log(f"answers: {len(sample)} questions, {len(done)} done")
    for n, (corpus, question) in enumerate(sample, 1):
        key = f"{corpus}/{question.scope}/{question.id}"
        if key in done:
            continue
        gold = store.gold(corpus, question.scope, question.id)
        config = api.resolve_config("full")
        record = {"key": key, "corpus": corpus, "type": question.type, "gold": gold.answer}
        for name, r in roles.items():
            started = time.perf_counter()
            trace = api.run_and_store(store, corpus, question, "full", config, r, gold, save=name == "hybrid")
            record[name] = {"answers": {a.presentation: a.text for a in trace.answers},
                            "verdicts": {v.presentation: v.correct for v in trace.verdicts},
                            "stages": stage_figures(trace), "seconds": round(time.perf_counter() - started, 1),
                            "errors": [e.message[:200] for e in trace.errors if e.fallback != "ignored"]}
        append(out, record)
        h = record["hybrid"]
        log(f"answers {n}/{len(sample)} {key}: hybrid {h['verdicts']} offline {record['offline']['verdicts']} "
            f"({h['seconds']} s)")


def from_recording(args) -> None:
    """Rows like `answers` for the recorded hybrid runs, at no model cost: the local answers, the local judge's
    verdicts and the stage figures come from the recording; the offline judge (which reads only the question, the
    gold answer and the answer) judges the local answers; the offline roles answer the same questions."""
    from tmem import api
    from tmem.models.local.recorded import load_recording
    from tmem.models.offline import OfflineJudge

    rec = load_recording(args.recording)
    store = api.open_store(args.db)
    offline = local_roles("offline", store, log)
    out = Path(args.out)
    done = done_keys(out)
    for run in [r for r in rec.runs if r["preset"] == "local"]:
        key = f"{run['corpus']}/{run['scope']}/{run['question']}"
        if key in done:
            continue
        question, gold = api.stored_question(store, run["corpus"], run["question"], run["scope"])
        trace = api.run_and_store(store, run["corpus"], question, "full", api.resolve_config("full"), offline, gold,
                                  save=False)
        judged = {p: OfflineJudge().judge(question, gold.answer, text, None).correct
                  for p, text in run["answers"].items()}
        append(out, {"key": key, "corpus": run["corpus"], "type": run["type"], "gold": gold.answer,
                     "source": f"recording {rec.recorded_at}",
                     "hybrid": {"answers": run["answers"], "verdicts": run["verdicts"], "stages": run["stages"]},
                     "local-answer+offline-judge": {"answers": run["answers"], "verdicts": judged, "stages": {}},
                     "offline": {"answers": {a.presentation: a.text for a in trace.answers},
                                 "verdicts": {v.presentation: v.correct for v in trace.verdicts}, "stages": {}}})
        log(f"from recording: {key}")


def answers_table(rows: list[dict]) -> str:
    lines = []
    for corpus in sorted({r["corpus"] for r in rows}):
        part = [r for r in rows if r["corpus"] == corpus]
        n = len(part)
        lines += [f"**{corpus}** ({n} questions: " + ", ".join(f"{t} {c}" for t, c in
                                                              sorted(Counter(r['type'] for r in part).items())) + ")",
                  "", "| answerer + judge | flat correct | forest correct | answer prompt tokens/question (median) | "
                      "answer + judge s/question (median) |", "|---|---|---|---|---|"]
        for name, title in (("hybrid", "local answer, local judge (hybrid)"),
                            ("local-answer+offline-judge", "local answer, offline judge"),
                            ("offline", "offline answer, offline judge"),
                            ("offline-answer+local-judge", "offline answer, local judge")):
            if any(name not in r for r in part):
                continue
            flat = sum(r[name]["verdicts"].get("flat", False) for r in part)
            forest = sum(r[name]["verdicts"].get("forest", False) for r in part)
            toks = sorted(r[name]["stages"].get("answer", {}).get("prompt_tokens", 0) for r in part)
            secs = sorted(sum(r[name]["stages"].get(s, {}).get("seconds", 0) for s in ("answer", "judge"))
                          for r in part)
            local = name.startswith("hybrid") or name.startswith("local") or name.endswith("local-judge")
            lines.append(f"| {title} | {flat}/{n} | {forest}/{n} | {toks[n // 2] if toks[n // 2] else '-'} | "
                         f"{f'{secs[n // 2]:.0f}' if local and secs[n // 2] else '-'} |")
        lines.append("")
    pairs = [(r["hybrid"]["verdicts"][p], r["local-answer+offline-judge"]["verdicts"][p], "local")
             for r in rows for p in ("flat", "forest")]
    pairs += [(r["offline-answer+local-judge"]["verdicts"][p], r["offline"]["verdicts"][p], "offline")
              for r in rows if "offline-answer+local-judge" in r for p in ("flat", "forest")]
    agree = sum(a == b for a, b, _ in pairs)
    both = Counter((a, b) for a, b, _ in pairs)
    lines += ["| judge agreement (local LLM judge vs offline judge) | answers | agree | local yes / offline no | "
              "local no / offline yes |", "|---|---|---|---|---|"]
    for which in ("local", "offline"):
        sub = [(a, b) for a, b, w in pairs if w == which]
        if not sub:
            continue
        lines.append(f"| on {which} answers | {len(sub)} | {sum(a == b for a, b in sub)} | "
                     f"{sum(a and not b for a, b in sub)} | {sum(b and not a for a, b in sub)} |")
    lines.append(f"| all | {len(pairs)} | {agree} ({agree / max(len(pairs), 1):.0%}) | {both[(True, False)]} | "
                 f"{both[(False, True)]} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------- pace
# typical prompt tokens of each role's call (docs/backends.md: the demo's curated question, the recorded local model)
TYPICAL_PROMPTS = {"judge": 110, "relation": 1_300, "evidence_utility": 1_000, "answer": 4_400}


def pace(args) -> None:
    import os

    from tmem.models.local.pace import ServerPace, measure_pace

    roles = local_roles("local-all", None, log)  # starts (or reuses) the server and measures it once
    client = roles.answer.client
    load = os.getloadavg()[0]
    started = time.perf_counter()
    measured = measure_pace(client.endpoint.client, client.settings.model, 600.0)  # a second probe, timed here
    probe_s = time.perf_counter() - started
    options = roles.answer.client.endpoint.pace
    server = ServerPace(measured, options.floor, options.cap)
    timeouts = {role: round(server.timeout(tokens, getattr(roles, role).client.settings.max_tokens).seconds, 1)
                for role, tokens in TYPICAL_PROMPTS.items()}
    record = {"key": f"{time.strftime('%Y-%m-%dT%H:%M:%S')}", "load_1min": round(load, 2), "label": args.label,
              "prompt_per_s": round(measured.prompt_per_s, 1), "reply_per_s": round(measured.reply_per_s, 1),
              "probe_s": round(probe_s, 2), "typical_prompt_tokens": TYPICAL_PROMPTS, "timeouts_s": timeouts}
    append(Path(args.out), record)
    print(json.dumps(record))


def log(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("links")
    p.add_argument("--db", required=True)
    p.add_argument("--corpus", default="irc-test")
    p.add_argument("--limit", type=int, default=60)
    p.add_argument("--out", required=True)
    p = sub.add_parser("answers")
    p.add_argument("--db", required=True)
    p.add_argument("--demo", type=int, default=16, help="Demo knowledge-update + temporal questions (of 16).")
    p.add_argument("--locomo", type=int, default=6, help="LoCoMo temporal questions.")
    p.add_argument("--locomo-scope", type=int, default=5, help="LoCoMo conversation index (0-4 are dev).")
    p.add_argument("--judge-offline-answers", action="store_true",
                   help="Also run the local judge on the offline answers (two more calls per question).")
    p.add_argument("--out", required=True)
    p = sub.add_parser("from-recording")
    p.add_argument("--db", required=True)
    p.add_argument("--recording", help="Recording file (default: data/recorded-local.json).")
    p.add_argument("--out", required=True)
    p = sub.add_parser("pace")
    p.add_argument("--label", default="", help="What the machine was doing (idle, under load, ...).")
    p.add_argument("--out", required=True)
    p = sub.add_parser("summary")
    p.add_argument("kind", choices=("links", "answers"))
    p.add_argument("out")
    args = parser.parse_args(argv)
    if args.command == "links":
        links(args)
    elif args.command == "answers":
        answers(args)
    elif args.command == "pace":
        pace(args)
    elif args.command == "from-recording":
        from_recording(args)
    elif args.command == "summary":
        rows = list(done_keys(Path(args.out)).values())
        print(links_table(rows) if args.kind == "links" else answers_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
