"""Parameter sweeps: how key-evidence recall (and, with LLM roles, accuracy) moves with k, eps, the density
threshold, padding, top-n, ... — the sensitivity analysis the paper reports for k only (Sec. 5.3).

A sweep is one configuration variant of `tmem.config.VARIANTS` (default `full`) and a grid over its parameters
(`--grid discovery.eps_hours=6,12,24 --grid retrieval.k=12,36,72`, names and values in the override grammar of
`tmem.config.parse_overrides`); every combination is a cell, every cell is measured on the same questions:

- recall (offline, cheap): the method's seed retrieval and discovery stages (tmem.pipeline.stages, as `python -m tmem
  recall` runs them for its `tmem` variant), then Eq. 9-10 over the gold units of the recall-eligible questions;
  the seeds' own recall is kept beside it (`seed_recall`: BM25 alone at that k);
- accuracy (when the answer role is a language model, or `measure="accuracy"`): the whole pipeline
  (`tmem.pipeline.stages.run_all`) per question, judged; the trace is stored, so a cell's question opens on the Question
  page exactly as it ran. Offline stand-ins answer by extraction: their accuracy is a plumbing figure.

One row per (cell, question) goes to DuckDB (`Store.sweep_results`) as soon as its task finishes, written by this
process only, whichever executor ran the task (tmem.evaluation.executors: the local thread pool, or Ray).
Resume: a rerun of the same sweep skips every (cell, question) whose row was made for the same configuration
hash, roles (backend label) and measure without an error, so an interrupted sweep continues and a grid extended by
new values runs only the new cells. The command is tmem/commands/evaluate/sweep.py; the summary per cell is
tmem.analysis.sweep_summary.summarize.
"""
from __future__ import annotations

import itertools
import json
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd

from tmem.analysis.sweep_summary import summarize
from tmem.config import (
    VARIANTS,
    apply_overrides,
    config_hash,
    field_help,
    format_overrides,
    parse_overrides,
    variant_config,
)
from tmem.evaluation.batch.run import select_questions
from tmem.evaluation.metrics import recall_eligible, units_recovered
from tmem.pipeline.methods import method_for
from tmem.pipeline.stages import Context, Earlier, plan, retrieve_seeds, run_all, run_discovery
from tmem.types import Question, Trace

MEASURES = ("recall", "accuracy")
MAX_CELLS = 500  # a typo such as a range of 10,000 values must not start a day-long sweep
CHUNK = 24  # questions per task: enough work per task to amortise a worker's scope set-up, small enough to spread


# ------------------------------------------------------------------------------------------------- grid
def parse_grid(items: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """["discovery.eps_hours=6,12,24", "retrieval.k=12,36"] -> {"discovery.eps_hours": (6.0, 12.0, 24.0), ...}:
    each value of its field's type (a tuple field's elements joined by "|"), duplicates dropped, order kept."""
    known = field_help()
    axes: dict[str, tuple[Any, ...]] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise ValueError(f"bad --grid {item!r}: expected section.field=v1,v2,... with a name from "
                             f"{', '.join(known)}")
        if name in axes:
            raise ValueError(f"--grid {name} is given twice; list all its values in one --grid")
        values: list[Any] = []
        for text in (t.strip() for t in raw.split(",")):
            value = parse_overrides(f"{name}={text}")[name] if text else None
            if text and value not in values:
                values.append(value)
        if not values:
            raise ValueError(f"--grid {name} has no values")
        axes[name] = tuple(values)
    if not axes:
        raise ValueError("a sweep needs at least one --grid section.field=v1,v2,...")
    return axes


@dataclass(frozen=True)
class Cell:
    """One combination of grid values (in the grid's order), on top of the sweep's variant and fixed overrides."""

    variant: str
    params: tuple[tuple[str, Any], ...]
    fixed: tuple[tuple[str, Any], ...] = ()

    @property
    def key(self) -> str:
        """The cell's name in the sweep's rows: its grid values in the override grammar."""
        return format_overrides(dict(self.params))

    @property
    def overrides(self) -> str:
        """Every override of the cell (fixed values, then the grid's): the `cfg=` that reopens it in the app."""
        return format_overrides({**dict(self.fixed), **dict(self.params)})

    @property
    def config(self):
        return apply_overrides(variant_config(self.variant), {**dict(self.fixed), **dict(self.params)})

    @property
    def params_json(self) -> str:
        return json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in self.params})


def grid_cells(variant: str, axes: Mapping[str, Sequence[Any]], fixed: Mapping[str, Any] | None = None) -> list[Cell]:
    """Every combination of the axes' values, the first axis varying slowest; each cell's configuration is built
    once here, so a bad value (a choice outside its field's) fails before anything runs."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r} for a sweep; known: {', '.join(VARIANTS)}")
    clash = sorted(set(fixed or {}) & set(axes))
    if clash:
        raise ValueError(f"{', '.join(clash)} is both fixed (--set) and swept (--grid)")
    names = list(axes)
    count = 1
    for values in axes.values():
        count *= len(values)
    if count > MAX_CELLS:
        raise ValueError(f"the grid has {count} cells (more than {MAX_CELLS}); sweep fewer values")
    cells = [Cell(variant, tuple(zip(names, combo)), tuple(sorted((fixed or {}).items())))
             for combo in itertools.product(*(axes[n] for n in names))]
    for cell in cells:
        cell.config  # noqa: B018 - validates the values (choices, types) before the sweep starts
    return cells


def default_name(variant: str, axes: Mapping[str, Any]) -> str:
    """The sweep's name unless one is given: variant and swept parameters, so rerunning (or extending) the same
    grid resumes the same sweep."""
    return f"{variant}: " + " x ".join(axes)


# ------------------------------------------------------------------------------------------------ tasks
@dataclass(frozen=True)
class CellTask:
    """Some questions of one scope under one cell: what an executor runs (tmem.evaluation.executors)."""

    corpus: str
    scope: str
    cell: Cell
    measure: str
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class CellResult:
    rows: tuple[dict, ...]
    traces: tuple[Trace, ...] = ()


def measure_cell(task: CellTask, env) -> CellResult:
    """Measure the task's questions under its cell (runs where the executor puts it: `env` gives scope, roles
    and gold). One row per question, the gold read here only to score."""
    method = method_for(task.cell.config, task.cell.variant)
    ctx = Context(method, env.roles, env.store, gold=env.gold)
    rows, traces = [], []
    for q in task.questions:
        gold = env.gold(q)
        row: dict[str, Any] = {"scope": q.scope, "question_id": q.id, "qtype": q.type}
        if task.measure == "accuracy":
            trace = run_all(q, env.scope, ctx, task.corpus)
            primary = trace.verdict(trace.answers[0].presentation) if trace.answers else None
            flat = trace.verdict("flat")
            evidence, anchors = trace.evidence_ids, [a.message_id for a in trace.anchors]
            row.update(correct=primary.correct if primary else None, correct_flat=flat.correct if flat else None,
                       seconds=round(sum(s.seconds for s in trace.stages), 4))
            errors = [f"{e.stage}: {e.message} -> {e.fallback}" for s in trace.stages for e in s.errors
                      if e.fallback != "ignored"]
            row["error"] = "; ".join(errors) or None
            traces.append(trace)
        else:
            seeds = retrieve_seeds(q, env.scope, ctx, Earlier())
            anchors = evidence = seeds.result.evidence_ids
            seconds = seeds.trace.seconds
            if "discovery" in plan(method):
                found = run_discovery(q, env.scope, ctx, Earlier.of(seeds))
                evidence, seconds = found.result.evidence_ids, seconds + found.trace.seconds
            row["seconds"] = round(seconds, 4)
        row["evidence_messages"] = len(evidence)
        if recall_eligible(q, gold):
            row.update(units=len(gold.evidence), units_recovered=units_recovered(gold, evidence),
                       seed_units_recovered=units_recovered(gold, anchors))
        rows.append(row)
    return CellResult(tuple(rows), tuple(traces))


# ------------------------------------------------------------------------------------------------ sweep
@dataclass(frozen=True)
class SweepProgress:
    sweep: str
    measured: int  # (cell, question) pairs measured by the running process
    total: int  # pairs it has to measure (those stored before are skipped)
    elapsed_s: float

    @property
    def fraction(self) -> float:
        return min(self.measured / self.total, 1.0) if self.total else 1.0


def running_sweeps(store, corpus: str) -> list[SweepProgress]:
    """The corpus's sweeps a live process on this machine is measuring now (a sweep whose process died is not)."""
    now, out = datetime.now(), []
    for row in store.sweep_progress(corpus):
        if row["host"] == socket.gethostname() and _alive(row["pid"]):
            out.append(SweepProgress(row["sweep"], row["measured"] or 0, row["total"] or 0,
                                     (now - row["started_at"]).total_seconds()))
    return out


def _alive(pid: int | None) -> bool:
    try:
        os.kill(int(pid), 0)
    except PermissionError:  # another user's process: alive
        return True
    except (OSError, TypeError, ValueError):
        return False
    return True


@dataclass
class SweepReport:
    name: str
    measure: str
    cells: list[Cell]
    questions: int
    ran: int  # (cell, question) pairs measured now
    skipped: int  # already stored from an earlier run of the sweep
    failed: int
    summary: pd.DataFrame  # tmem.analysis.sweep_summary.summarize over this grid's current rows


def choose_measure(measure: str, roles) -> str:
    """"auto": accuracy when the answer role is a language model, else recall (offline stand-ins' accuracy is
    not a T-Mem figure)."""
    if measure == "auto":
        return "recall" if getattr(roles.answer, "offline", True) else "accuracy"
    if measure not in MEASURES:
        raise ValueError(f"unknown measure {measure!r}; known: auto, {', '.join(MEASURES)}")
    return measure


def sweep_questions(store, corpus: str, measure: str, types: str | None, limit: int | None) -> list[Question]:
    """The questions every cell is measured on: for recall the recall-eligible ones (Eq. 10), for accuracy all."""
    chosen = select_questions(store.questions(corpus), types, None)
    if measure == "recall":
        chosen = [q for q in chosen if recall_eligible(q, store.gold(corpus, q.scope, q.id))]
    return chosen[:limit] if limit is not None else chosen


def run_sweep(store, corpus: str, cells: Sequence[Cell], questions: Sequence[Question], measure: str, executor,
              backend: str, name: str, *, progress: Callable[[int, int], None] | None = None) -> SweepReport:
    """Measure every cell on `questions` with `executor`, storing rows as tasks finish (see the module docstring);
    `backend` is the roles' label (`Roles.label`), stored with each row and compared on resume; `progress` hears
    (cell-question pairs measured, pairs to measure)."""
    if not questions:
        raise ValueError(f"corpus {corpus!r} has no questions to sweep" + (" (none is recall-eligible: no gold "
                                                                           "evidence)" if measure == "recall" else ""))
    hashes = {c.key: config_hash(c.config) for c in cells}
    old = store.sweep_results(corpus, name)
    done = set()
    if len(old):
        ok = old[(old["backend"] == backend) & (old["measure"] == measure) & old["error"].isna()
                 & (old["config_hash"] == old["cell"].map(hashes))]
        done = set(zip(ok["cell"], ok["scope"], ok["question_id"]))
    tasks = []
    for cell in cells:
        for scope in dict.fromkeys(q.scope for q in questions):
            todo = [q for q in questions if q.scope == scope and (cell.key, scope, q.id) not in done]
            tasks += [CellTask(corpus, scope, cell, measure, tuple(todo[i:i + CHUNK]))
                      for i in range(0, len(todo), CHUNK)]
    failed, measured, total = 0, 0, sum(len(t.questions) for t in tasks)
    started = datetime.now().replace(microsecond=0)
    mark = lambda finished=False: store.save_sweep_progress(  # noqa: E731 - what the Sweep view shows while it runs
        corpus, name, os.getpid(), socket.gethostname(), measured, total, started, finished)
    mark()

    def write(outcome) -> None:  # the one writer: this process, in the caller's thread
        nonlocal failed, measured
        task: CellTask = outcome.item
        common = {"sweep": name, "corpus": corpus, "cell": task.cell.key, "params": task.cell.params_json,
                  "overrides": task.cell.overrides, "variant": task.cell.variant,
                  "config_hash": hashes[task.cell.key], "backend": backend, "measure": measure,
                  "created_at": datetime.now().replace(microsecond=0)}
        if outcome.ok:
            rows = [{**common, **row} for row in outcome.value.rows]
            for trace in outcome.value.traces:
                store.save_trace(trace, backend)
        else:
            error = f"{type(outcome.error).__name__}: {outcome.error}"
            rows = [{**common, "scope": q.scope, "question_id": q.id, "qtype": q.type, "error": error}
                    for q in task.questions]
        failed += sum(r.get("error") is not None for r in rows)
        store.save_sweep_rows(rows)
        measured += len(task.questions)
        mark()
        if progress:
            progress(measured, total)

    try:
        executor.run(measure_cell, tasks, on_result=write)
    finally:
        mark(finished=True)
    ran = total
    rows = store.sweep_results(corpus, name)
    keys = {c.key for c in cells}
    current = rows[rows["cell"].isin(keys) & (rows["backend"] == backend) & (rows["measure"] == measure)
                   & (rows["config_hash"] == rows["cell"].map(hashes))
                   & pd.Series(list(zip(rows["scope"], rows["question_id"])), index=rows.index, dtype=object)
                   .isin({(q.scope, q.id) for q in questions})]
    return SweepReport(name, measure, list(cells), len(questions), ran, len(cells) * len(questions) - ran, failed,
                       summarize(current))
