"""What marks a corpus as written by the demo generator (tmem.demo), so that its gold, the generator's planned
edges (tmem.demo.planned), is scored and never fitted on: `python -m tmem fit-relation` refuses such a corpus.

A corpus in the store is the generator's when its corpora row says so (`format` / `source` / `notes`):
- the shipped demo loaded on first start (`ensure_demo` notes it as generated), or data/demo.jsonl imported by path;
- a file or folder the generator wrote (`python -m tmem demo --out`, scripts/demo_gold_edges.py): the writers put
  a mark beside it (`MARK_SUFFIX` after a file's name, `MARK` inside a folder), found from the imported path or a
  folder up to `LEVELS` above it (a GroupMemBench import may name a domain file deep inside the written folder).
A generated file uploaded through the browser, or moved away from its mark, is not recognised: the mark is on disk.
"""
from __future__ import annotations

import json
from pathlib import Path

MARK = "tmem-demo.json"  # inside a folder the generator wrote
MARK_SUFFIX = ".tmem-demo.json"  # after the name of a file the generator wrote: demo.jsonl.tmem-demo.json
NOTE = "generated demo corpus (tmem.demo): its gold links are the generator's planned edges, scored, never fitted on"
LEVELS = 4  # root/data/final/<Domain>/<file>.json: the root is 4 levels above a domain file


def mark_of(out: Path) -> Path:
    """Where the mark of a written file (a .jsonl) or folder goes."""
    return out.with_name(out.name + MARK_SUFFIX) if out.suffix == ".jsonl" else out / MARK


def write_mark(out: Path, seed: int | None = None) -> None:
    record = {"generator": "tmem.demo", "seed": seed, "gold": "the generator's planned edges: scored, never fitted on"}
    mark_of(out).write_text(json.dumps(record) + "\n", encoding="utf-8")


def generated_reason(info: dict, shipped: Path) -> str | None:
    """Why the corpus whose corpora row is `info` (Store.corpus_info) was written by the generator, or None.
    `shipped`: the shipped demo file (tmem.demo.DEMO_JSONL)."""
    if NOTE in (info.get("notes") or ""):
        return "it is the generated demo corpus"
    source = info.get("source") or ""
    if not source or source.startswith("upload:"):
        return None
    path = Path(source)
    try:
        if path.resolve() == shipped.resolve():
            return f"it is the generated demo corpus ({shipped.name})"
        candidates = [path.with_name(path.name + MARK_SUFFIX), *(p / MARK for p in [path, *path.parents][:LEVELS + 1])]
        found = next((c for c in candidates if c.is_file()), None)
    except OSError:  # an unreadable place holds no mark we can see
        return None
    return f"it was written by the demo generator (marked by {found})" if found else None
