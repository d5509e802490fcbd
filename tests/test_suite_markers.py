"""The quick loop stays quick, by rule rather than by a list of slow tests. `make test-fast` (-m "not slow and not
browser and not app and not integration") leaves out:
- `app`: every test that starts the explorer under Streamlit's AppTest: it takes the `app` fixture
  (tests/conftest.py), names `start_app` or `AppTest`, or uses a helper or fixture of its file that does;
- `integration`: every test that spawns a child process (names `subprocess`, `Popen`, `multiprocessing`, `fork`...)
  or runs the batch command `tmem run` end to end (a list of arguments opening with "run": a pipeline over a
  corpus's questions, and the third-party memory systems, which run only as its variants), itself or through a
  helper or fixture of its file, a fixture of tests/conftest.py, or a helper it imports from another test module.
  A child process that package code starts (the app's batch jobs, `tmem bench`'s corpus) is out of the check's
  sight: those tests carry the mark by hand, with the reason beside it.
A test is marked by its file's `pytestmark`, its class's or its own decorator; a test the quick loop already leaves
out (`slow`, `browser`, `app`) needs no `integration` mark. `make test` runs every test."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Rule:
    """What puts a test under `marker`: naming one of `names`, taking one of `fixtures` as a parameter, or holding
    a list literal that opens with `command` (a CLI command's arguments); `cross_module` follows fixtures of
    tests/conftest.py and helpers imported from other test modules. `excused`: markers that keep the test out of
    the quick loop anyway."""
    marker: str
    names: frozenset[str]
    fixtures: frozenset[str] = frozenset()
    command: str | None = None
    cross_module: bool = False
    excused: tuple[str, ...] = ()


APP = Rule("app", frozenset({"start_app", "AppTest"}), frozenset({"app"}))  # conftest.start_app wraps AppTest
INTEGRATION = Rule("integration", frozenset({"subprocess", "Popen", "multiprocessing", "ProcessPoolExecutor", "fork",
                                             "forkserver", "posix_spawn", "execv"}),
                   command="run", cross_module=True, excused=("slow", "browser", "app"))


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return {a.arg for a in node.args.args + node.args.kwonlyargs}


def _runs_command(node: ast.AST, command: str | None) -> bool:
    return command is not None and any(
        isinstance(n, ast.List) and n.elts and isinstance(n.elts[0], ast.Constant) and n.elts[0].value == command
        for n in ast.walk(node))


def _uses(node: ast.AST, rule: Rule, starters: set[str]) -> bool:
    """Whether a function names a starter or takes one as a fixture, takes one of the rule's fixtures (as a
    parameter only: a local function named `app` is not it), or runs the rule's command."""
    params = _params(node)
    return bool((_names(node) | params) & starters) or bool(params & rule.fixtures) or _runs_command(node, rule.command)


def _marked(decorators: list[ast.expr], markers: tuple[str, ...]) -> bool:
    return any(f"mark.{m}" in ast.unparse(d) for d in decorators for m in markers)


def _imported(tree: ast.Module, rule: Rule, seen: frozenset[str]) -> set[str]:
    """The names this module imports from another test module (tests/<module>.py) that are starters there."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module not in seen \
                and (TESTS / f"{node.module}.py").is_file():
            found |= {a.asname or a.name for a in node.names if a.name in _module_starters(node.module, rule, seen)}
    return found


@cache
def _module_starters(module: str, rule: Rule, seen: frozenset[str] = frozenset()) -> frozenset[str]:
    tree = ast.parse((TESTS / f"{module}.py").read_text(encoding="utf-8"))
    return frozenset(_starters(tree, rule, seen | {module}))


def _starters(tree: ast.Module, rule: Rule, seen: frozenset[str] = frozenset()) -> set[str]:
    """The names that put a test under the rule in this file: the rule's names, the conftest fixtures and imported
    helpers that do (for a cross-module rule; `seen`: the modules already being read) and (to a fixed point) every
    module-level function or fixture that uses one of them."""
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    starters = set(rule.names)
    if rule.cross_module:
        starters |= _imported(tree, rule, seen)
        if "conftest" not in seen:
            starters |= _module_starters("conftest", rule, seen | {"conftest"})
    while grown := {f.name for f in functions if f.name not in starters and _uses(f, rule, starters)}:
        starters |= grown
    return starters


def unmarked_tests(source: str, rule: Rule) -> list[str]:
    """The tests of one test file's `source` that fall under `rule` without its marker (or an excusing one)."""
    tree = ast.parse(source)
    markers = (rule.marker, *rule.excused)
    if any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
           and _marked([n.value], markers) for n in tree.body):
        return []
    starters = _starters(tree, rule)
    found = []
    for scope, marked in [(tree, False)] + [(c, _marked(c.decorator_list, markers)) for c in tree.body
                                            if isinstance(c, ast.ClassDef)]:
        for test in scope.body:
            if (isinstance(test, ast.FunctionDef | ast.AsyncFunctionDef) and test.name.startswith("test_")
                    and _uses(test, rule, starters) and not (marked or _marked(test.decorator_list, markers))):
                found.append(test.name)
    return found


def unmarked_app_tests(source: str) -> list[str]:
    """The tests of one test file's `source` that start the app without the `app` marker."""
    return unmarked_tests(source, APP)


CASES = [("def test_x(app):\n    app().run()", ["test_x"]),
         ("from conftest import start_app\ndef test_x(app_db):\n    start_app('Review')", ["test_x"]),
         ("def test_x():\n    AppTest.from_file('app.py')", ["test_x"]),
         ("def _open(p):\n    return start_app(p)\ndef _twice(p):\n    _open(p)\ndef test_x():\n    _twice('R')",
          ["test_x"]),
         ("@pytest.fixture(scope='module')\ndef pages(app_db):\n    return start_app()\ndef test_x(pages):\n    pass",
          ["test_x"]),
         ("class TestX:\n    def test_x(self, app):\n        app()", ["test_x"]),
         ("import pytest\npytestmark = [pytest.mark.app]\ndef test_x(app):\n    app()", []),
         ("import pytest\n@pytest.mark.app\ndef test_x(app):\n    app()", []),
         ("import pytest\n@pytest.mark.app\nclass TestX:\n    def test_x(self, app):\n        app()", []),
         ("def test_x(app_db):\n    assert app_db", []),
         ("def test_x():\n    def app():\n        pass\n    app()", []),
         ("def test_x(fresh_store):\n    assert 'AppTest' in 'the docs'", [])]


@pytest.mark.parametrize("source, expected", CASES)
def test_the_marker_check_sees_each_way_into_the_app(source, expected):
    assert unmarked_app_tests(source) == expected


def test_every_test_that_starts_the_app_is_marked_app():
    found = {p.name: unmarked_app_tests(p.read_text(encoding="utf-8")) for p in sorted(TESTS.glob("test_*.py"))}
    assert {name: tests for name, tests in found.items() if tests} == {}, (
        "mark these @pytest.mark.app (or the file: pytestmark = pytest.mark.app) so make test-fast leaves them out")


INTEGRATION_CASES = [
    ("import subprocess\ndef test_x():\n    subprocess.run(['true'])", ["test_x"]),
    ("import multiprocessing\ndef _child():\n    multiprocessing.Process(target=print).start()\n"
     "def test_x():\n    _child()", ["test_x"]),
    ("def test_x(tmp_path):\n    os.fork()", ["test_x"]),
    ("def test_x(db):\n    assert cli(['run', '--db', db]) == 0", ["test_x"]),
    ("def run(db, *extra):\n    return cli(['run', '--db', str(db), *extra])\n@pytest.fixture\ndef done(db):\n"
     "    return run(db)\ndef test_x(done):\n    assert done == 0", ["test_x"]),
    ("def test_x(baseline_run):\n    pass", ["test_x"]),  # tests/conftest.py's fixture runs `tmem run`
    ("from test_baselines import run\ndef test_x(small, tmp_path):\n    run(small, tmp_path, 'mem0')", ["test_x"]),
    ("import pytest\n@pytest.mark.integration\ndef test_x():\n    subprocess.run(['true'])", []),
    ("import pytest\npytestmark = pytest.mark.slow\ndef test_x():\n    subprocess.run(['true'])", []),
    ("import pytest\n@pytest.mark.app\nclass TestX:\n    def test_x(self):\n        cli(['run'])", []),
    ("def test_x(db):\n    assert cli(['sweep', '--db', db, '--grid', 'run']) == 0", []),
    ("def test_x():\n    assert 'run' in ['a', 'run'] and 'subprocess' in 'the docs'", []),
    ("from waiting import wait_until\ndef test_x():\n    wait_until(lambda: True)", [])]


@pytest.mark.parametrize("source, expected", INTEGRATION_CASES)
def test_the_marker_check_sees_each_child_process_and_batch_run(source, expected):
    assert unmarked_tests(source, INTEGRATION) == expected


def test_every_test_that_spawns_a_process_or_runs_a_batch_is_marked_integration_or_left_out_already():
    found = {p.name: unmarked_tests(p.read_text(encoding="utf-8"), INTEGRATION)
             for p in sorted(TESTS.glob("test_*.py"))}
    assert {name: tests for name, tests in found.items() if tests} == {}, (
        "mark these @pytest.mark.integration (or slow/app/browser) so make test-fast leaves them out")


def _fast_line() -> str:
    lines = (TESTS.parent / "Makefile").read_text().splitlines()
    return next(line for line in lines[lines.index("test-fast: install-dev"):] if "pytest" in line)


@pytest.mark.parametrize("marker", ["app", "integration"])
def test_the_marker_is_registered_and_make_test_fast_leaves_it_out(marker):
    root = TESTS.parent
    assert any(line.strip().startswith(f'"{marker}:') for line in (root / "pyproject.toml").read_text().splitlines())
    assert '-m "not slow and not browser and not app and not integration"' in _fast_line()


def test_files_with_a_long_test_are_handed_out_first_each_file_in_its_own_order():
    """make test hands whole files to workers in collection order (--dist loadfile --no-loadscope-reorder): a file
    with a slow or browser test first, then one with an app test, each file's tests together and in order."""
    from types import SimpleNamespace

    from conftest import heaviest_files_first

    marks = {"a.py::t1": [], "a.py::t2": ["app"], "b.py::t1": [], "c.py::t1": ["parametrize"],
             "c.py::t2": ["slow"], "d.py::t1": ["browser"], "e.py::t1": ["app"], "e.py::t2": []}
    items = [SimpleNamespace(nodeid=n) for n in marks]
    ordered = [i.nodeid for i in heaviest_files_first(items, lambda item: marks[item.nodeid])]
    assert ordered == ["c.py::t1", "c.py::t2", "d.py::t1", "a.py::t1", "a.py::t2", "e.py::t1", "e.py::t2",
                       "b.py::t1"]
    assert [i.nodeid for i in heaviest_files_first(items[:1], lambda item: [])] == ["a.py::t1"]


def test_files_with_an_integration_test_come_after_the_app_files_and_before_the_rest():
    """A file with an integration test (a child process, a batch end to end: tens of seconds) is handed out after
    the slow, browser and app files and before the unit-test files, which take seconds and so end the run evenly."""
    from types import SimpleNamespace

    from conftest import heaviest_files_first

    marks = {"a.py::t1": [], "b.py::t1": ["integration"], "b.py::t2": [], "c.py::t1": ["app", "integration"],
             "d.py::t1": ["integration", "slow"], "e.py::t1": ["integration"]}
    items = [SimpleNamespace(nodeid=n) for n in marks]
    ordered = [i.nodeid for i in heaviest_files_first(items, lambda item: marks[item.nodeid])]
    assert ordered == ["d.py::t1", "c.py::t1", "b.py::t1", "b.py::t2", "e.py::t1", "a.py::t1"]


def test_make_test_keeps_the_collection_order_of_files():
    make = (TESTS.parent / "Makefile").read_text()
    for target in ("test", "test-app", "test-under-load"):
        recipe = make.split(f"\n{target}: ")[1].split("\n\n")[0]
        assert "$(HEAVY_FIRST)" in recipe, target
    assert "\nHEAVY_FIRST := --no-loadscope-reorder" in make
