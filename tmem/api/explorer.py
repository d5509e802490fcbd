"""The app's door into the library: `ExplorerContext` (what the shared sidebar selected) and every store read and
write a page needs, each a function of the context whose name says what it does. The pages hold no Store: the
context carries the database's path, and the one Store per database and process lives here (`open_database`), the
way datasette's views reach their data through one `Datasette` object.
"""
from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tmem.analysis import annotations as notes
from tmem.analysis.results import APP_RUN
from tmem.api.corpora import import_corpus
from tmem.api.traces import trace_results
from tmem.config import TMemConfig, config_hash
from tmem.demo import CURATED_QUESTION, DEMO_CORPUS, ensure_demo, generated_corpus
from tmem.evaluation import gold_versions, matched
from tmem.evaluation.batch import estimate, jobs
from tmem.evaluation.review import GoldContext, question_reference
from tmem.evaluation.sweep import running_sweeps as sweeps_running
from tmem.models.factory import build_roles as factory_roles
from tmem.models.llm import endpoints
from tmem.pipeline.run import open_scope, run_and_store
from tmem.pipeline.scope import Scope
from tmem.store import Store
from tmem.types import Gold, Message, Question, Trace, TraceRef
from tmem.viz import run_settings
from tmem.viz.batch import annotations as notes_view

_STORES: dict[str, Store] = {}
_STORES_LOCK = threading.Lock()
# parsed stored traces (frozen, shared by sessions), least recently used last out: {key: (content hash, Trace)}
TRACES_KEPT = 96  # ~0.1-1 MB each parsed; a run's rows for one reviewer's session fit
_TRACES: OrderedDict[tuple, tuple[str, Trace]] = OrderedDict()
_TRACES_LOCK = threading.Lock()


# ------------------------------------------------------------------------------------------- the database
def open_database(path: str | Path) -> str:
    """Open the app's database once per process (loading the shipped demo on first use) and return its path, the
    handle an ExplorerContext carries. Raises StoreInUse, or ValueError for a file that is not DuckDB."""
    key = str(path)
    with _STORES_LOCK:
        if key not in _STORES:
            _STORES[key] = open_store(key)
    return key


def open_store(path: str | Path | None = None, *, demo: bool = True) -> Store:
    """Open the database (default data/tmem.duckdb, or $TMEM_DB); with `demo`, load the shipped demo corpus on first
    use so the CLI and the app work right away."""
    store = Store(path)
    if demo:
        ensure_demo(store)
    return store


def _store(database: str) -> Store:
    return _STORES[open_database(database)]


def corpus_names(database: str) -> list[str]:
    return _store(database).corpora()


def corpus_scopes(database: str, corpus: str) -> list[str]:
    return _store(database).scopes(corpus)


def first_question(database: str, corpus: str) -> tuple[str, str] | None:
    return curated_question(_store(database), corpus)


def curated_question(store: Store, corpus: str) -> tuple[str, str] | None:
    """(scope, question id) to open first: the demo's curated question, else the first knowledge_update question,
    else the first question."""
    if corpus == DEMO_CORPUS and store.questions(corpus, CURATED_QUESTION[0]):
        return tuple(CURATED_QUESTION)
    questions = store.questions(corpus)
    pick = next((q for q in questions if q.type == "knowledge_update"), questions[0] if questions else None)
    return (pick.scope, pick.id) if pick else None


def build_roles(backend_overrides: Mapping[str, Any] | None = None, store: Store | None = None, *,
                session_key: str | None = None):
    """Model roles for a browser session: the server's settings (env, tmem.toml) with the session's overrides,
    which may only name the operator's endpoints (tmem.models.llm.endpoints; EndpointRefused otherwise). Keys are read
    from the variable the operator paired with an endpoint, or are the session's own `session_key`; never stored."""
    settings = endpoints.check_overrides(dict(backend_overrides or {}))
    return factory_roles(settings, store=store, env=endpoints.session_keys(session_key))


def database_roles(database: str, backend_overrides: Mapping[str, Any] | None = None, *,
                   session_key: str | None = None):
    """`build_roles` with the app's database as the roles' cache."""
    return build_roles(backend_overrides, _store(database), session_key=session_key)


# -------------------------------------------------------------------------------------- the app's context
@dataclasses.dataclass
class ExplorerContext:
    """What app.py's shared sidebar selected, handed to every page: the database by its path, never a Store."""

    database: str
    corpus: str | None
    scope: str | None
    variant: str
    overrides: dict[str, Any]
    config: TMemConfig
    roles: Any
    curated: tuple[str, str] | None = None

    @property
    def offline(self) -> bool:
        return run_settings.all_offline(self.roles)

    @property
    def sidebar_trace(self) -> TraceRef:
        """The stored trace the sidebar selects for a question: its variant, configuration hash and backend."""
        return TraceRef(self.variant, config_hash(self.config), self.roles.label)


# ------------------------------------------------------------------------------------- corpus and questions
def scope_names(c: ExplorerContext) -> list[str]:
    return corpus_scopes(c.database, c.corpus)


def corpus_info(c: ExplorerContext, corpus: str | None = None) -> dict:
    return _store(c.database).corpus_info(corpus or c.corpus)


def corpus_counts(c: ExplorerContext, corpus: str | None = None) -> dict:
    return _store(c.database).counts(corpus or c.corpus)


def questions(c: ExplorerContext, scope: str | None = None, corpus: str | None = None) -> list[Question]:
    """The stored questions of the corpus (of one scope when given)."""
    return _store(c.database).questions(corpus or c.corpus, scope)


def question_gold(c: ExplorerContext, scope: str, question_id: str) -> Gold | None:
    """A stored question's gold (answer, evidence units), which only judging and review read."""
    return _store(c.database).gold(c.corpus, scope, question_id)


def gold_edges(c: ExplorerContext, scope: str) -> list:
    return _store(c.database).gold_edges(c.corpus, scope)


def generated_gold(c: ExplorerContext) -> str | None:
    """Why the corpus's gold is the demo generator's plan (tmem.demo.provenance), or None: scored, never fitted on."""
    return generated_corpus(_store(c.database), c.corpus)


def messages_by_ids(c: ExplorerContext, scope: str, ids) -> list[Message]:
    return _store(c.database).messages_by_ids(c.corpus, scope, ids)


def messages_frame(c: ExplorerContext, scope: str | None = None) -> pd.DataFrame:
    """The scope's (or the corpus's) messages as a table."""
    return _store(c.database).messages_frame(c.corpus, scope)


def stored_scope(c: ExplorerContext, scope: str) -> Scope:
    """The scope set up for the pipeline (tmem.pipeline.run.open_scope: cached, vectors kept in the store)."""
    return open_scope(_store(c.database), c.corpus, scope)


def stale_reference(c: ExplorerContext, trace, gold):
    """The reference chain a question's answers are checked against for staleness (the same for every variant:
    tmem.evaluation.review.question_reference)."""
    return question_reference(_store(c.database), c.corpus, trace, gold)


def import_into(c: ExplorerContext, name: str, fmt: str, path: str | None = None,
                uploads: Sequence[tuple[str, bytes]] | None = None) -> list[str]:
    """Import a server path or uploaded files as corpus `name` (tmem.api.corpora.import_corpus)."""
    return import_corpus(_store(c.database), name, fmt, path, uploads)


# ------------------------------------------------------------------------------------------------ traces
def run_question_and_store(c: ExplorerContext, question: Question, gold: Gold | None = None,
                           progress: Callable[[str, float], None] | None = None) -> Trace:
    """Run the sidebar's variant, configuration and roles on one question and store its trace."""
    trace = run_and_store(_store(c.database), c.corpus, question, c.variant, c.config, c.roles, gold,
                          progress=progress)
    with _TRACES_LOCK:  # a re-run within the second of the kept trace's time would not show as a new version
        _TRACES.pop((c.database, c.corpus, question.scope, question.id, c.sidebar_trace), None)
    return trace


def trace_version(c: ExplorerContext, scope: str, question_id: str, ref: TraceRef | None) -> str | None:
    """When the stored trace `ref` names was written (None: no such trace), for the pages' cache keys."""
    if ref is None:
        return None
    return _store(c.database).trace_version(c.corpus, scope, question_id, ref.variant, ref.config_hash, ref.backend)


def stored_trace(c: ExplorerContext, scope: str, question_id: str, ref: TraceRef | None) -> Trace | None:
    """Exactly the stored trace `ref` names for one question, or None. Parsed traces are kept per process with the
    time each was written (a ~1 ms query instead of reading and parsing ~75 kB of JSON on every rerun of Failures'
    selected row, Compare's equal-budget pass or a Question page step): a trace stored again has a new version (its
    write time to the microsecond and its size, Store.trace_version), from this process or another."""
    version = trace_version(c, scope, question_id, ref)
    if not version:  # no such trace, or one written without a time: read as stored
        return None if version is None else _store(c.database).load_trace(
            c.corpus, scope, question_id, ref.variant, ref.config_hash, ref.backend)
    key = (c.database, c.corpus, scope, question_id, ref)
    with _TRACES_LOCK:
        held = _TRACES.get(key)
        if held is not None and held[0] == version:
            _TRACES.move_to_end(key)
            return held[1]
    trace = _store(c.database).load_trace(c.corpus, scope, question_id, ref.variant, ref.config_hash, ref.backend)
    if trace is not None:  # replaced between the two reads: cached under the older hash, so the next call re-reads
        with _TRACES_LOCK:
            _TRACES[key] = (version, trace)
            while len(_TRACES) > TRACES_KEPT:
                _TRACES.popitem(last=False)
    return trace


def row_trace(c: ExplorerContext, row: Mapping[str, Any], side: str = "") -> Trace | None:
    """The stored trace behind one result row (`side` picks suffixed columns, e.g. " (baseline)")."""
    return stored_trace(c, row["scope"], row["question_id"], TraceRef.from_row(row, side))


def trace_index(c: ExplorerContext, *, with_json: bool = False) -> pd.DataFrame:
    """One row per stored trace of the corpus (scope, question, variant, hash, backend, time)."""
    return _store(c.database).trace_index(c.corpus, with_json=with_json)


def latest_traces(c: ExplorerContext, fields: Sequence[str] | None = None) -> list[tuple[dict, Trace]]:
    """The latest stored trace of each (scope, question, variant), with its index row, parsed from one query (a
    page scoring every stored trace read them one query each: ~11 ms x 192 on the demo batch). With `fields`, each
    trace holds only those fields (and the four that name it), the rest at their defaults: a page that reads a few
    fields of every trace need not rebuild every span and node (partial_trace)."""
    index = _store(c.database).trace_index(c.corpus, with_json=True)
    latest = index.drop_duplicates(["scope", "question_id", "variant"], keep="last")  # ordered by created_at
    parse = lambda text: Trace.from_json(text, fields)  # noqa: E731 - all fields when None
    return [({k: v for k, v in row.items() if k != "trace_json"}, parse(row["trace_json"]))
            for row in latest.to_dict("records")]


def partial_trace(text: str, fields: Sequence[str]) -> Trace:
    """A stored trace with only `fields` (and TRACE_NAME) decoded, the rest at their defaults (Trace.from_json)."""
    return Trace.from_json(text, fields)


def app_results(database: str, corpus: str) -> pd.DataFrame:
    """Result rows rebuilt from the traces the app stored (tmem.api.traces.trace_results)."""
    return trace_results(_store(database), corpus)


def search_traces(c: ExplorerContext, text: str) -> pd.DataFrame:
    return _store(c.database).search_traces(c.corpus, text)


# ------------------------------------------------------------------------------------ runs and their review
def batch_run_ids(c: ExplorerContext) -> list[str]:
    return _store(c.database).run_ids(c.corpus)


def batch_run_results(c: ExplorerContext, run: str) -> pd.DataFrame:
    return _store(c.database).run_results(c.corpus, run)


def incomplete_run_note(c: ExplorerContext, run: str) -> str:
    return jobs.incomplete_note(_store(c.database), c.corpus, run)


def batch_jobs(c: ExplorerContext) -> list:
    return jobs.jobs(Path(c.database))


def active_batch(c: ExplorerContext):
    return jobs.active(Path(c.database))


def start_batch(c: ExplorerContext, variants, questions_: int, **options):
    """Start a background batch run of the corpus (tmem.evaluation.batch.jobs.start_batch)."""
    return jobs.start_batch(Path(c.database), c.corpus, variants, questions_, **options)


def ensure_demo_batch(c: ExplorerContext):
    return jobs.ensure_demo_batch(_store(c.database))


def estimate_batch_cost(c: ExplorerContext, variants, questions_: Sequence, prices):
    return estimate.estimate_batch(_store(c.database), c.corpus, variants, questions_, c.roles, prices)


def gold_version_counts(c: ExplorerContext) -> list:
    """(version, corrections, imported at) of every gold version of the corpus."""
    return _store(c.database).gold_versions(c.corpus)


def rescored_run(c: ExplorerContext, run: str, version: str, on_trace=None) -> pd.DataFrame:
    """A batch run's rows re-scored under a gold version (tmem.evaluation.gold_versions.rescore)."""
    return gold_versions.rescore(_store(c.database), c.corpus, run, version, on_trace=on_trace)


def gold_context(c: ExplorerContext) -> GoldContext:
    return GoldContext(_store(c.database), c.corpus)


def gold_of_version(c: ExplorerContext, version: str):
    """The gold function of one gold version of the corpus: (scope, question id) -> Gold (gold_versions.gold_function,
    which reads each scope's gold at once)."""
    store = _store(c.database)
    return gold_versions.gold_function(store, c.corpus, gold_versions.load_version(store, c.corpus, version))


def _run_traces(c: ExplorerContext, run: str, rows: pd.DataFrame) -> dict[tuple[str, str], Trace]:
    """{(scope, question id): stored trace} of result rows of `run`, a batch run's read one scope at a time (one
    query each, not two per row); the app's own traces (api.APP_RUN) one by one."""
    traces = {}
    if run == APP_RUN:
        for row in rows.to_dict("records"):
            if (trace := row_trace(c, row)) is not None:
                traces[(row["scope"], row["question_id"])] = trace
        return traces
    for scope, part in rows.groupby("scope", sort=False):
        stored = _store(c.database).run_trace_json(c.corpus, run, scope)
        for row in part.to_dict("records"):
            if text := stored.get((row["question_id"], row["variant"], row["config_hash"], row["backend"])):
                traces[(scope, row["question_id"])] = Trace.from_json(text)
    return traces


def matched_rows(c: ExplorerContext, run: str, version: str, stamp: str, rows: pd.DataFrame, baseline: str,
                 compared: str) -> pd.DataFrame:
    """`baseline` re-run at `compared`'s message count per question of the run's `rows` (tmem.evaluation.matched),
    computed once per run, gold version, pair, stored version `stamp` of the run and backends, then read from the
    store: a first visit after someone (or the batch) computed it does not re-run the baseline."""
    store = _store(c.database)
    key = matched.stored_key(store, c.corpus, run, version, baseline, compared, stamp, c.roles.label)
    if (data := store.derived_frame(key)) is not None:
        return matched.from_bytes(data)
    traces = _run_traces(c, run, rows[rows["variant"] == compared])
    scopes: dict = {}

    def scope_of(name):
        return scopes.setdefault(name, stored_scope(c, name))
    out = matched.matched_rows(store, c.corpus, traces, baseline, compared, gold_of_version(c, version), scope_of,
                               c.roles)
    store.save_derived_frame(key, "matched", matched.to_bytes(out), c.corpus, run, stamp)  # older stamps go
    return out


# ----------------------------------------------------------------------------------- annotations, sweeps
def annotations(c: ExplorerContext) -> pd.DataFrame:
    return _store(c.database).annotations(c.corpus)


def annotation_labels(c: ExplorerContext) -> list[str]:
    """The labels a reviewer can pick, then the choice that creates one."""
    return notes_view.label_options(_store(c.database))


def save_annotation(c: ExplorerContext, row: Mapping, label: str, note: str = "", author: str | None = None,
                    description: str = "") -> dict:
    """Store a label and note on the trace of one result row (tmem.analysis.annotations.annotate)."""
    return notes.annotate(_store(c.database), c.corpus, row, label, note, author, description)


def sweep_names(c: ExplorerContext) -> list:
    return _store(c.database).sweep_names(c.corpus)


def sweep_results(c: ExplorerContext, name: str) -> pd.DataFrame:
    return _store(c.database).sweep_results(c.corpus, name)


def running_sweeps(c: ExplorerContext) -> list:
    return sweeps_running(_store(c.database), c.corpus)
