"""The quick loop stays quick: every test that starts the explorer under Streamlit's AppTest carries the `app` marker,
so `make test-fast` (-m "not slow and not browser and not app") never picks up a new one. A test starts the app when
it takes the `app` fixture (tests/conftest.py), names `start_app` or `AppTest`, or uses a helper or fixture of its
file that does; it is marked by its file's `pytestmark`, its class's or its own `@pytest.mark.app`."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
STARTERS = {"start_app", "AppTest"}  # the two ways into AppTest (conftest.start_app wraps AppTest.from_file)


def _uses(node: ast.AST, starters: set[str]) -> bool:
    """Whether a function names a starter or takes one as a fixture, or takes the `app` fixture (as a parameter
    only: a local function named `app` is not it)."""
    params = {a.arg for a in node.args.args + node.args.kwonlyargs}
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    return bool((names | params) & starters) or "app" in params


def _marked(decorators: list[ast.expr]) -> bool:
    return any("mark.app" in ast.unparse(d) for d in decorators)


def _starters(tree: ast.Module) -> set[str]:
    """The names that start the app in this file: the two starters and (to a fixed point) every module-level
    function or fixture that uses one of them or the `app` fixture."""
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    starters = set(STARTERS)
    while grown := {f.name for f in functions if f.name not in starters and _uses(f, starters)}:
        starters |= grown
    return starters


def unmarked_app_tests(source: str) -> list[str]:
    """The tests of one test file's `source` that start the app without the `app` marker."""
    tree = ast.parse(source)
    if any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
           and "mark.app" in ast.unparse(n.value) for n in tree.body):
        return []
    starters = _starters(tree)
    found = []
    for scope, marked in [(tree, False)] + [(c, _marked(c.decorator_list)) for c in tree.body
                                            if isinstance(c, ast.ClassDef)]:
        for test in scope.body:
            if (isinstance(test, ast.FunctionDef | ast.AsyncFunctionDef) and test.name.startswith("test_")
                    and _uses(test, starters) and not (marked or _marked(test.decorator_list))):
                found.append(test.name)
    return found


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


def test_the_app_marker_is_registered_and_make_test_fast_leaves_it_out():
    root = TESTS.parent
    assert any(line.strip().startswith('"app:') for line in (root / "pyproject.toml").read_text().splitlines())
    fast = next(line for line in (root / "Makefile").read_text().splitlines() if "pytest" in line and "-m" in line
                and "not slow" in line)
    assert '-m "not slow and not browser and not app"' in fast


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


def test_make_test_keeps_the_collection_order_of_files():
    make = (TESTS.parent / "Makefile").read_text()
    for target in ("test", "test-app", "test-under-load"):
        recipe = make.split(f"\n{target}: ")[1].split("\n\n")[0]
        assert "$(HEAVY_FIRST)" in recipe, target
    assert "\nHEAVY_FIRST := --no-loadscope-reorder" in make
