"""Shared fixtures. Every test runs against temporary databases: TMEM_DB points into a temp folder, so the
project's data/tmem.duckdb is never touched."""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/llm_server.py and other helpers import as plain modules
from waiting import SLOW  # noqa: E402 - read TMEM_TEST_SLOW before the session fixture clears TMEM_*

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
# Under pytest-xdist each worker has a core to itself at best: MiniLM runs one onnxruntime thread per worker
# (embedder.threads), not two (3,000 demo texts: 28.5-29.0 CPU s against 30.9-32.5 s, bit-identical vectors).
# The session fixture sets these; a test that gives a child process a clean environment adds them back.
WORKER_SETTINGS = {"TMEM_EMBEDDER_THREADS": "1"} if os.environ.get("PYTEST_XDIST_WORKER") else {}
BENCHMARKS = SHARED / "benchmarks"


def benchmark_db(tmp_path: Path, fmt: str, relative: str, corpus: str) -> Path:
    """A fresh DuckDB file holding one benchmark from ../shared/benchmarks (the test is skipped when it is absent)."""
    from tmem.corpora.imports import import_corpus
    from tmem.store import Store

    path = BENCHMARKS / relative
    if not path.exists():
        pytest.skip(f"{relative} is not available in ../shared/benchmarks")
    db = tmp_path / f"{corpus}.duckdb"
    store = Store(db)
    import_corpus(store, fmt, path, corpus=corpus)
    store.close()
    return db


# Files holding a test of these markers take minutes (a LoCoMo recall, the figures, a browser against a server, a
# demo batch) where most files take seconds: they are handed out first (make test: --dist loadfile
# --no-loadscope-reorder keeps this order), so the last files two workers run are short ones and neither waits
# long for the other. xdist's own order (most tests first) gave out the long few-test files last. Files with an
# integration test (a child process, a batch end to end) come third: tens of seconds each where a unit-test file
# takes a few (in a full run at load ~10, test_baselines_packages 98 s, test_rescore_partial 51 s,
# test_evaluation_review 24 s), and in alphabetical order among the unit files test_rescore_partial, test_store_sharing
# and test_sweep were among the last handed out.
HEAVY_FIRST = (("slow", "browser"), ("app",), ("integration",))


def heaviest_files_first(items: list, markers_of) -> list:
    """`items` regrouped so each file keeps its own order and its place among files of the same weight, and files
    with a test of HEAVY_FIRST[0]'s markers come first, then of HEAVY_FIRST[1]'s, and so on, then the rest.
    `markers_of(item)` -> the names of its markers."""
    weight: dict[str, int] = {}
    for item in items:
        file = item.nodeid.split("::")[0]
        names = set(markers_of(item))
        rank = next((i for i, group in enumerate(HEAVY_FIRST) if names & set(group)), len(HEAVY_FIRST))
        weight[file] = min(weight.get(file, rank), rank)
    return sorted(items, key=lambda item: weight[item.nodeid.split("::")[0]])  # stable: files stay in order


def pytest_collection_modifyitems(config, items):
    items[:] = heaviest_files_first(items, lambda item: [m.name for m in item.iter_markers()])


@pytest.fixture(autouse=True, scope="session")
def _isolated_default_db(tmp_path_factory):
    """The suite ignores the developer's own TMEM_* settings (backends, embedder, config file) and uses a temp DB."""
    mp = pytest.MonkeyPatch()
    for name in [n for n in os.environ if n.startswith("TMEM_")]:
        mp.delenv(name)
    for name, value in WORKER_SETTINGS.items():
        mp.setenv(name, value)
    mp.setenv("TMEM_DB", str(tmp_path_factory.mktemp("db") / "session.duckdb"))
    # sealed looks go to a temporary ledger: the suite never writes data/sealed_looks.jsonl (tmem.evaluation.tuning)
    mp.setenv("TMEM_SEALED_LEDGER", str(tmp_path_factory.mktemp("ledger") / "sealed_looks.jsonl"))
    # no background demo batch (tmem.evaluation.batch.jobs) under AppTest; tests opt in
    mp.setenv("TMEM_DEMO_BATCH", "off")
    # batch children at the tests' own priority: a niceness-10 child starves beside the other tests on a busy
    # machine while its test waits (tmem.evaluation.batch.jobs.NICE_ENV; test_app_batch.py checks the default)
    mp.setenv("TMEM_BATCH_NICE", "0")
    if SLOW > 1:  # a busy machine (make test-under-load): a process waits for a held database as long as a user
        mp.setenv("TMEM_DB_WAIT", str(60 * SLOW))  # there would let it (the lease's 60 s default x the factor)
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _no_settings_leak():
    """A test that changes TMEM_* settings must undo them (monkeypatch does, and its teardown runs before this
    check): a leak silently changes the models of later tests."""
    before = {n: v for n, v in os.environ.items() if n.startswith("TMEM_")}
    yield
    after = {n: v for n, v in os.environ.items() if n.startswith("TMEM_")}
    if after != before:
        pytest.fail(f"TMEM_* environment changed by this test and not undone: {sorted(set(after) ^ set(before))}")


@pytest.fixture
def fresh_store(tmp_path):
    from tmem.store import Store

    store = Store(tmp_path / "t.duckdb")
    yield store
    store.close()


@pytest.fixture
def golden_scope():
    from tmem.demo.golden import MESSAGES
    from tmem.pipeline.scope import Scope

    return Scope("golden-corpus", "golden", MESSAGES)


@pytest.fixture(scope="session")
def offline():
    from tmem.models.offline import offline_roles

    return offline_roles()


# --------------------------------------------------------------------- explorer app (tests/test_app_*.py, browser)
APP_RUN_ID = "test-run"


def build_app_db(path: Path) -> None:
    """A database as the app finds it after some use: the demo corpus (when data/demo.jsonl exists), the golden
    corpus, stored traces of golden q1 under 'full' and 'flat' made with the app's own roles, and a batch run."""
    from tmem import api
    from tmem.api import open_store
    from tmem.demo.golden import GOLD, MESSAGES, QUESTION, SCOPE
    from tmem.store import CorpusData
    from tmem.types import Question

    store = open_store(path)
    extra = Question("q2", SCOPE, "Who drafted the newsletter section?", "User_2", "single_hop")
    store.replace_corpus("golden", CorpusData(MESSAGES, [QUESTION, extra], [(SCOPE, GOLD)]), format="test")
    roles = api.build_roles({}, store)
    for variant in ("full", "flat"):
        api.run_and_store(store, "golden", QUESTION, variant, api.resolve_config(variant), roles, GOLD)
    rows = api.trace_results(store, "golden").assign(run_id=APP_RUN_ID)
    store.save_run_results(rows.to_dict("records"))
    store.close()


@pytest.fixture(scope="session")
def app_template_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("app") / "template.duckdb"
    # the app's roles in tests: offline, lexical embedder (fast) — only while building, so the setting does not
    # leak into later tests of the session (it once silently turned the LoCoMo recall test's MiniLM into lexical)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMEM_EMBEDDER", "lexical")
        build_app_db(path)
    return path


@pytest.fixture
def app_db(app_template_db, tmp_path, monkeypatch):
    """A private copy of the prepared database, selected through TMEM_DB for the app under test."""
    import shutil

    path = tmp_path / "app.duckdb"
    shutil.copy(app_template_db, path)
    monkeypatch.setenv("TMEM_DB", str(path))
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    return path


@pytest.fixture
def baseline_run(app_db, tmp_path):
    """A batch run of the golden questions under `full` and the `embedding` baseline (not a preset the sidebar can
    select), as `python -m tmem run` leaves it: (its run id, {variant: (q1's result row, its stored trace)})."""
    import json

    from tmem.api import result_trace
    from tmem.cli import main as cli
    from tmem.store import Store

    assert cli(["run", "--db", str(app_db), "--corpus", "golden", "--variants", "full,embedding", "--out",
                str(tmp_path / "baselines"), "--offline", "--quiet"]) == 0
    store = Store(app_db)
    run_id = json.loads((tmp_path / "baselines" / "run.json").read_text())["run_id"]  # its own id
    rows = store.run_results("golden", run_id)
    q1 = rows[rows["question_id"] == "q1"].to_dict("records")
    found = {row["variant"]: (row, result_trace(store, "golden", row)) for row in q1}
    store.close()
    return run_id, found


PAYLOADS = (
    "<img src=x onerror=\"window.top.__pwned=1;document.title='PWNED'\">",
    "<script>window.top.__pwned=2;document.title='PWNED'</script>",
    "<a href=\"javascript:window.top.__pwned=3\">click href</a>",
    "\"><svg onload=\"window.top.__pwned=4\">",
    "[link](javascript:window.top.__pwned=5)",
    "</script><script>window.top.__pwned=6</script>",
)


def evil_corpus():
    """The golden conversation with script and href payloads in message text, authors, topics, channels, the
    question and the gold answer: nothing of it may execute anywhere in the app."""
    from dataclasses import replace

    from tmem.demo.golden import GOLD, MESSAGES, QUESTION, SCOPE
    from tmem.store import CorpusData

    def spoil(m, i):
        return replace(m, text=f"{m.text} {PAYLOADS[i % len(PAYLOADS)]}",
                       author=f"{m.author}{PAYLOADS[(i + 1) % len(PAYLOADS)]}" if i % 3 == 0 else m.author,
                       topic=f"{m.topic}{PAYLOADS[0]}" if m.topic == "launch" else m.topic,
                       channel=f"{m.channel}{PAYLOADS[1]}" if m.channel == "#release" else m.channel)

    question = replace(QUESTION, text=QUESTION.text + " " + PAYLOADS[2], asking_user="User_6" + PAYLOADS[0])
    gold = replace(GOLD, answer=GOLD.answer + " " + PAYLOADS[1])
    return CorpusData([spoil(m, i) for i, m in enumerate(MESSAGES)], [question], [(SCOPE, gold)])


@pytest.fixture(scope="session")
def golden_trace():
    """(trace, gold, messages frame) of golden q1 under the full variant with offline roles."""
    from tmem.api import open_scope
    from tmem.config import variant_config
    from tmem.demo.golden import GOLD, MESSAGES, QUESTION, SCOPE
    from tmem.models.offline import offline_roles
    from tmem.pipeline.run import run_question
    from tmem.store import CorpusData, Store

    store = Store(":memory:")
    store.replace_corpus("golden", CorpusData(MESSAGES, [QUESTION], [(SCOPE, GOLD)]), format="test")
    trace = run_question(QUESTION, open_scope(store, "golden", SCOPE), variant_config("full"), offline_roles(),
                         corpus="golden", variant="full", gold=GOLD)
    return trace, GOLD, store.messages_frame("golden", SCOPE)


@pytest.fixture(scope="session")
def evil_trace():
    """(trace, gold, messages frame) of the payload corpus under the full variant with offline roles."""
    from tmem.api import open_scope
    from tmem.config import variant_config
    from tmem.models.offline import offline_roles
    from tmem.pipeline.run import run_question
    from tmem.store import Store

    data = evil_corpus()
    store = Store(":memory:")
    store.replace_corpus("evil", data, format="test")
    question, (scope, gold) = data.questions[0], data.golds[0]
    trace = run_question(question, open_scope(store, "evil", scope), variant_config("full"), offline_roles(),
                         corpus="evil", variant="full", gold=gold)
    return trace, gold, store.messages_frame("evil", scope)


@functools.cache
def _components():
    """Streamlit's registry of installed v2 components, found once per process: a new AppTest scans the metadata of
    every installed distribution for them (0.15 CPU s, about half of a warm run of a page; none is installed)."""
    from streamlit.components.v2.component_manager import BidiComponentManager

    manager = BidiComponentManager()
    manager.discover_and_register_components(start_file_watching=False)
    return manager


def start_app(page: str | None = None, **params: str):
    """The explorer run once under AppTest (the database is $TMEM_DB), on `page` with these query parameters."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=120)
    at._bidi_component_manager = _components()  # as a real server keeps one for all its sessions
    for key, value in params.items():
        at.query_params[key] = value
    if page:
        at.switch_page(page)
    return at.run()


@pytest.fixture
def app(app_db):
    """Start the explorer under AppTest on a private database: app(page=None, **query_params) -> AppTest."""
    import streamlit.testing.v1  # noqa: F401 - now: importing it makes a temporary folder (tests check staging's)
    return start_app


@pytest.fixture(scope="session")
def demo_traces():
    """({variant: trace} of the demo's curated question under `full` and `flat`, gold, messages frame), offline
    roles and the lexical embedder: the tree the explorer opens on."""
    from tmem import api
    from tmem.demo import CURATED_QUESTION, DEMO_JSONL

    if not DEMO_JSONL.exists():
        pytest.skip("no demo corpus in data/")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMEM_EMBEDDER", "lexical")
        store = api.open_store(":memory:")
        scope, qid = CURATED_QUESTION
        question, gold = api.stored_question(store, "demo", qid, scope)
        roles = api.build_roles({}, store)
        traces = {v: api.run_and_store(store, "demo", question, v, api.resolve_config(v), roles, gold, save=False)
                  for v in ("full", "flat")}
        frame = store.messages_frame("demo", scope)
        store.close()
    return traces, gold, frame
