"""The demo's shipped sweep: a small stored sweep so the explorer's Sweep page shows a heat-map on first start.

`data/demo-sweep.jsonl` holds the rows `python -m tmem sweep` stores (Store.sweep_results, one per cell and
question) for the grid `GRID` of variant `VARIANT` on the first `LIMIT` recall-eligible `TYPES` questions, measure
recall (seed retrieval and discovery only, offline; key-evidence recall, Eq. 10), measured with the offline roles
and the default embedder on a fresh database. `install_demo_sweep` copies them into a store when the demo is
loaded (`created_at` is the load time); their `backend` says which roles measured them, as for any sweep. The
figures are the generated demo corpus's, so the Sweep page says "generated demo corpus, n = ...".

`python -m tmem demo --sweep` re-measures and rewrites the file (tmem/commands/corpus/demo.py), about 20 s of CPU
with MiniLM on a fresh database (docs/app.md); tests/test_demo_sweep.py re-measures it and compares.
"""
from __future__ import annotations

import json
import warnings
from datetime import datetime
from pathlib import Path

DEMO_SWEEP = Path(__file__).resolve().parent.parent.parent / "data" / "demo-sweep.jsonl"
REGENERATE = "python -m tmem demo --sweep"
VARIANT = "full"
GRID = ("retrieval.k=18,36,72", "discovery.eps_hours=6,12,24")  # k around the paper's 36, and DBSCAN's radius
TYPES = "knowledge_update"  # the type the demo is built around (updates BM25 misses, discovery recovers)
LIMIT = 8
MEASURE = "recall"
NAME = f"{VARIANT}: retrieval.k x discovery.eps_hours"  # the sweep command's own name for this grid: a rerun resumes
TIMES = ("created_at",)  # when a row was stored: set at install, not shipped
KEY = ("cell", "scope", "question_id")


def _plain(value):
    """A stored value as JSON: a missing one (NaN, pandas' NA) as null, numpy numbers as Python's."""
    if value is None or (not isinstance(value, str) and value != value) or type(value).__name__ == "NAType":
        return None
    return value.item() if hasattr(value, "item") else value


def save_demo_sweep(rows: list[dict], path: Path = DEMO_SWEEP) -> int:
    """Write the rows (without their store time, sorted by cell and question) as JSONL; returns the row count."""
    kept = sorted(({k: _plain(v) for k, v in r.items() if k not in TIMES} for r in rows),
                  key=lambda r: [r[k] for k in KEY])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in kept), encoding="utf-8")
    return len(kept)


def load_demo_sweep(path: Path = DEMO_SWEEP) -> list[dict]:
    """The file's rows; ValueError naming the file, line and field when one is malformed."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc}); regenerate it with {REGENERATE}") from None
        missing = [k for k in (*KEY, "sweep", "params", "config_hash", "backend", "measure") if not
                   isinstance(row, dict) or not isinstance(row.get(k), str)]
        if missing:
            raise ValueError(f"{path}:{number}: field {missing[0]!r} missing or not text; regenerate it with "
                             f"{REGENERATE}")
        rows.append(row)
    return rows


def install_demo_sweep(store, corpus: str, path: Path = DEMO_SWEEP) -> int:
    """Store the shipped sweep's rows under `corpus`; the number stored. 0 when the file is absent; a malformed
    file is a warning (the Sweep page then says how to run a sweep), never a failed first start."""
    if not path.exists():
        return 0
    try:
        rows = load_demo_sweep(path)
    except (OSError, ValueError) as exc:
        warnings.warn(str(exc), stacklevel=2)
        return 0
    now = datetime.now().replace(microsecond=0)
    store.save_sweep_rows([{**r, "corpus": corpus, "created_at": now} for r in rows])
    return len(rows)
