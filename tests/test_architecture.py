"""The package's rooms and what each may import.

Every module of ``csparql``, and of the benchmarks beside it, belongs to one room (``ROOMS``; ``benchmarks``
for the harness). ``LAYERS`` says, for every room, which rooms below it the room may import and which packages it
must not import: the pure core imports neither pyspark nor airflow nor deltalake; storage (the storage contract,
delta-rs) only the core, and neither Spark nor Airflow; the Spark runtime (the session, the Connect server's
launcher) only the core; the Spark layer, ingest and the engine no Airflow; the deployment layer neither
Spark nor Airflow; the web pages no Spark; the stack supervisor, SRBench and the command line no Airflow. Imports
are read from the source (every import statement, also inside functions), and importing the rooms' modules is
checked to load none of the packages they must not import; the modules the executors run during an ingest load
neither Spark nor Delta. Neither the package nor the benchmarks have import cycles, counting the imports inside
functions too; the package imports neither the benchmarks nor the tests; no module of the package is longer than
``MAX_MODULE_LINES``, no function longer than ``MAX_FUNCTION_LINES``; every module of the engine uses Spark.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import csparql

PACKAGE = Path(csparql.__file__).parent
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
MAX_MODULE_LINES = 800
"""The longest a module of the package may be: past it, a module holds more than one thing to read at once."""
MAX_FUNCTION_LINES = 80
"""The longest a function of the package may be, its docstring included."""
SPARK_PACKAGES = ("pyspark", "csparql.spark", "csparql.runtime")
"""What a module imports when it uses Spark: pyspark itself, the Spark layer or the Spark runtime."""

ROOMS = {
    "core": ("core",),
    "storage": ("storage",),
    "runtime": ("runtime",),
    "spark": ("spark",),
    "ingest": ("ingest",),
    "engine": ("engine",),
    "deploy": ("deploy",),
    "samples": ("samples", "examples"),
    "jobs": ("jobs",),
    "srbench": ("srbench",),
    "orchestration": ("orchestration",),
    "web": ("web",),
    "stack": ("stack",),
    "commands": ("cli", "demo"),
    "plugin": ("plugin",),
}
"""Each room and the packages or top-level modules of ``csparql`` it holds."""

LAYERS = {
    "core": ((), ("pyspark", "airflow", "deltalake")),
    "storage": (("core",), ("pyspark", "airflow")),
    "runtime": (("core", "storage"), ("airflow", "deltalake")),  # storage: the AWS variables alone
    "spark": (("core", "storage"), ("airflow",)),
    "ingest": (("core", "storage", "spark"), ("airflow",)),
    "engine": (("core", "storage", "runtime", "spark"), ("airflow",)),
    "deploy": (("core", "storage"), ("pyspark", "airflow")),
    "samples": (("core", "storage"), ("pyspark", "airflow", "deltalake")),
    # ingest: in process, for pushes; orchestration: the settings of an Airflow component (its config module)
    "web": (("core", "storage", "deploy", "ingest", "orchestration"), ("pyspark",)),
    "stack": (("core", "storage", "runtime", "ingest", "deploy", "samples"), ("airflow",)),
    "jobs": (("core", "storage", "runtime", "spark", "engine", "deploy"), ("airflow",)),
    "srbench": (("core", "storage", "runtime", "ingest", "samples"), ("airflow",)),
    "orchestration": (("core", "storage", "runtime", "spark", "ingest", "engine", "deploy", "jobs"), ()),
    "commands": (("core", "storage", "runtime", "spark", "ingest", "engine", "deploy", "samples", "jobs", "srbench",
                  "stack"), ("airflow",)),
    "plugin": (("orchestration", "web"), ()),
    "benchmarks": (("core", "storage", "runtime", "spark", "ingest", "engine", "deploy", "samples", "jobs",
                    "srbench", "stack", "orchestration"), ()),
}
"""Room: (the rooms below it that it may import, the packages it must not import). The benchmarks measure the
product through every room but the pages and the plugin."""

TESTS = Path(__file__).resolve().parent
TEST_MODULES = {"tests", *(path.stem for path in TESTS.glob("*.py")),
                *(path.name for path in TESTS.iterdir() if (path / "__init__.py").exists())}
"""The tests' own top-level modules and packages (``support``, ``conformance``, ``engine``, …), which neither
the package nor the benchmarks import."""

KNOWN_CROSSINGS: dict[tuple[str, str], str] = {}
"""Imports across the layers that are known and due to go; each must still exist (remove it when it goes)."""

AIRFLOW_ROOMS = ("orchestration", "web", "plugin")
"""The only rooms whose source imports Airflow."""


def module_name(path: Path, root: Path = PACKAGE.parent) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
BENCHMARK_MODULES = {module_name(path, BENCHMARKS.parent): path for path in sorted(BENCHMARKS.glob("*.py"))}
ALL_MODULES = {**MODULES, **BENCHMARK_MODULES}


def room_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "benchmarks":
        return "benchmarks"
    if len(parts) == 1:
        return "core"  # the package itself: csparql/__init__.py
    return next((room for room, members in ROOMS.items() if parts[1] in members), None)


@functools.cache
def imports(path: Path, module_level_only: bool = False) -> frozenset[str]:
    """The modules ``path`` imports: csparql modules resolved to the module imported (``from csparql.x import
    y`` is ``csparql.x.y`` when that is a module), other packages by their full dotted name. With
    ``module_level_only``, only the imports that run when the module is imported (not those inside functions
    or classes, nor under ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = _module_level(tree.body) if module_level_only else ast.walk(tree)
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & ALL_MODULES.keys()
            names.update(submodules or {node.module})
            if len(submodules) < len(node.names):
                names.add(node.module)
    return frozenset(names)


def _module_level(statements: list[ast.stmt]):
    for statement in statements:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
            continue
        yield statement
        for block in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(statement, block, None)
            if isinstance(inner, list):
                yield from _module_level([s for s in inner if isinstance(s, ast.stmt)] +
                                         [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body])


def test_every_module_of_the_package_is_in_a_room_and_every_room_in_the_layer_table():
    assert len(MODULES) > 80 and len(BENCHMARK_MODULES) > 10
    assert [m for m in MODULES if room_of(m) is None] == []
    assert set(LAYERS) == {*ROOMS, "benchmarks"} and all(set(below) <= set(ROOMS) for below, _ in LAYERS.values())


def test_the_layer_table_puts_each_room_above_the_rooms_it_imports():
    def below(room: str, seen: tuple = ()) -> set[str]:
        assert room not in seen, f"the layer table is circular: {' -> '.join((*seen, room))}"
        direct = set(LAYERS.get(room, ((), ()))[0])
        return direct.union(*(below(r, (*seen, room)) for r in direct))

    for room in LAYERS:
        assert room not in below(room)


def test_each_room_imports_only_the_rooms_below_it_and_none_of_the_packages_it_must_not():
    crossings, seen = {}, set()
    for module, path in ALL_MODULES.items():
        room = room_of(module)
        allowed_rooms, forbidden = LAYERS[room]
        where = str(path.relative_to(PACKAGE.parent if room != "benchmarks" else BENCHMARKS.parent))
        for name in sorted(imports(path)):
            if name.split(".")[0] in forbidden:
                crossings.setdefault(where, []).append(name)
            elif name.startswith("csparql.") and room_of(name) not in (room, *allowed_rooms):
                if (where, name) in KNOWN_CROSSINGS:
                    seen.add((where, name))
                else:
                    crossings.setdefault(where, []).append(f"{name} ({room_of(name)})")
    assert crossings == {}
    assert seen == set(KNOWN_CROSSINGS), "a known crossing is gone: remove it from KNOWN_CROSSINGS"


def test_neither_the_package_nor_the_benchmarks_import_the_tests_and_the_package_not_the_benchmarks():
    wrong = {module: sorted(name for name in imports(path) if name.split(".")[0] in TEST_MODULES
                            or (room_of(module) != "benchmarks" and name.split(".")[0] == "benchmarks"))
             for module, path in ALL_MODULES.items()}
    assert {module: names for module, names in wrong.items() if names} == {}


def test_only_the_airflow_integration_the_web_pages_and_the_plugin_import_airflow():
    users = {room_of(m) for m, path in MODULES.items() if any(n.split(".")[0] == "airflow" for n in imports(path))}
    assert users == set(AIRFLOW_ROOMS)


def test_the_package_has_no_import_cycles_among_module_level_imports():
    graph = {module: {name for name in imports(path, module_level_only=True) if name in MODULES and name != module}
             for module, path in MODULES.items()}
    cycles = [sorted(component) for component in strongly_connected(graph) if len(component) > 1]
    assert cycles == []


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of a directed graph."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def loaded_by_importing(modules: list[str], code: str = "") -> set[str]:
    """The top-level packages among pyspark, airflow and deltalake that importing ``modules`` (then running
    ``code``) loads, in a fresh interpreter."""
    return loaded_by_importing_each([(modules, code)])[0]


def loaded_by_importing_each(imports_and_code: list[tuple[list[str], str]]) -> list[set[str]]:
    """``loaded_by_importing`` of each (modules, code), each in its own fresh interpreter, run side by side."""
    processes = []
    for modules, code in imports_and_code:
        script = (
            "import sys\n" + "".join(f"import {m}\n" for m in modules) + code +
            "print(','.join(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'airflow', 'deltalake'})))\n"
        )
        processes.append(subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
    loaded = []
    for process in processes:
        out, err = process.communicate()
        assert process.returncode == 0, err[-3000:]
        loaded.append(set(filter(None, out.strip().split(","))))
    return loaded


def test_importing_the_core_loads_no_spark_airflow_or_delta():
    core = [m for m in MODULES if room_of(m) == "core"]
    code = ("from csparql.core.frontend import compile_query\nfrom csparql.core.optimizer import optimize\n"
            "optimize(compile_query('SELECT * WHERE { ?s ?p ?o }'))\n")
    assert loaded_by_importing(core, code) == set()


def test_the_front_door_names_the_public_api_and_loads_each_part_only_when_it_is_used():
    """``import csparql`` and its language loads neither Spark, Airflow nor Delta; each public name is the
    object of the module that defines it, and loading an Airflow name loads Airflow."""
    code = ("import csparql\ncsparql.compile_query('SELECT * WHERE { ?s ?p ?o }')\ncsparql.parse_instant('2010-03-22T10:10:00Z')\n"
            "assert set(csparql.PUBLIC_NAMES) <= set(dir(csparql))\n")
    language, operators = loaded_by_importing_each([([], code), ([], "import csparql\ncsparql.CsparqlEvaluateWindowOperator\n")])
    assert language == set()
    assert "airflow" in operators
    import importlib

    assert all(getattr(csparql, name) is getattr(importlib.import_module(module), name)
               for name, module in csparql.PUBLIC_NAMES.items())
    assert csparql.__version__ == csparql.__version__.strip() != ""


EXECUTOR_MODULES = tuple(module for module in MODULES if module.startswith("csparql.ingest.parsers"))
"""What Spark's executors import during an ingest (the functions ``mapInArrow`` runs) and the other parsers of a
format, which must not load Spark or Delta either."""


def test_the_modules_the_executors_run_load_neither_spark_nor_delta():
    assert {"csparql.ingest.parsers.lines", "csparql.ingest.parsers.ranges"} <= set(EXECUTOR_MODULES)
    assert loaded_by_importing(list(EXECUTOR_MODULES)) == set()


def test_importing_the_rooms_that_may_not_use_spark_airflow_or_delta_loads_none_of_them():
    rooms = ("storage", "runtime", "deploy", "samples", "web", "stack", "srbench", "commands")
    members = {room: [m for m in MODULES if room_of(m) == room and not m.endswith(".__main__")] for room in rooms}
    assert all(members.values())
    loaded = loaded_by_importing_each([(members[room], "") for room in rooms])
    assert {room: found & set(LAYERS[room][1]) for room, found in zip(rooms, loaded)} == dict.fromkeys(rooms, set())



def test_the_optimizer_and_the_pane_decision_are_handed_their_settings_and_never_read_the_environment():
    """``csparql.core.panes`` (whether and how windows combine from panes) and the optimizer are pure: what the
    environment sets (``CSPARQL_PANES_MIN_TRIPLES``) is read by the engine (``csparql.engine.panes.pane_min_triples``)."""
    pure = {m: path for m, path in MODULES.items() if m.split(".")[1:3] in (["core", "optimizer"], ["core", "panes"])}
    readers = sorted(m for m, path in pure.items()
                     if {"os", "os.environ", "os.getenv"} & imports(path) or "environ" in path.read_text())
    assert readers == []
    assert any(m.startswith("csparql.core.panes.") for m in pure)


def test_no_import_cycles_in_the_package_or_the_benchmarks_even_through_imports_inside_functions():
    """An import inside a function does not break a circle, it hides it: modules that need each other are one
    module, or share a third one (the compiler, the path evaluator and entailment share ``csparql.spark.frames``;
    the benchmarks' Airflow measurement and capacity sweep share ``benchmarks.observation``)."""
    graph = {module: {name for name in imports(path) if name in ALL_MODULES and name != module}
             for module, path in ALL_MODULES.items()}
    cycles = [sorted(component) for component in strongly_connected(graph) if len(component) > 1]
    assert cycles == []


def test_no_module_of_the_package_is_longer_than_the_limit():
    lengths = {str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
               for path in MODULES.values()}
    assert {module: lines for module, lines in lengths.items() if lines > MAX_MODULE_LINES} == {}


def test_no_function_of_the_package_is_longer_than_the_limit():
    lengths = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lengths[f"{module}.{node.name}:{node.lineno}"] = node.end_lineno - node.lineno + 1
    assert {function: lines for function, lines in lengths.items() if lines > MAX_FUNCTION_LINES} == {}


def test_every_module_of_the_engine_uses_spark():
    """The engine evaluates windows on Spark and holds nothing else: each of its modules imports Spark (pyspark,
    the Spark layer or the Spark runtime) or another engine module that does. What reads results without Spark
    lives beside the result tables, in storage."""
    engine = {m: path for m, path in MODULES.items() if room_of(m) == "engine" and not path.name.startswith("__")}
    assert engine
    using = {m for m, path in engine.items() if any(name.startswith(SPARK_PACKAGES) for name in imports(path))}
    while grown := {m for m, path in engine.items() if m not in using and imports(path) & using}:
        using |= grown
    assert sorted(engine.keys() - using) == []


def test_the_compile_path_uses_no_private_name_of_another_module():
    """The compiler, the path evaluator, entailment and one evaluation (``engine/evaluate.py``) use each other
    through public names only (no ``compiler._expand`` from the path evaluator, no ``_PathEvaluator`` from
    entailment)."""
    modules = ["csparql.spark.frames", "csparql.spark.compiler", "csparql.spark.paths", "csparql.spark.entailment",
               "csparql.engine.evaluate"]
    private = []
    for module in [m for m in modules if m in MODULES]:
        for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("csparql."):
                private += [(module, f"{node.module}.{a.name}") for a in node.names if a.name.startswith("_")]
            elif (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                  and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                private.append((module, ast.unparse(node)))
    assert private == []


def test_the_architecture_document_names_every_module_in_its_rooms_row():
    """docs/architecture.md's table of rooms says what every module is for. A row names the packages or modules
    it describes in its second cell (``csparql.engine``, ``csparql.core.windows``); a module is described by the
    row of the longest of those that holds it: it is that row's own module, or the row names it (``m.py``, or
    the rule ``m`` it holds), a module of a folder within it with the folder (``pages/``, ``parsers/``)."""
    rows: dict[str, str] = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        cells = line.split(" | ")
        if line.startswith("| ") and len(cells) > 2:
            for package in re.findall(r"`(csparql(?:\.[a-z_]+)+)`", cells[1]):
                rows[package] = rows.get(package, "") + line
    unnamed = []
    for module, path in MODULES.items():
        if path.name.startswith("__"):
            continue
        parts = module.split(".")
        holder = next((".".join(parts[:n]) for n in range(len(parts), 1, -1) if ".".join(parts[:n]) in rows), None)
        if holder is None:
            unnamed.append(module)
            continue
        row, rest = rows[holder], parts[len(holder.split(".")):]
        leaf = rest[-1] if rest else ""
        named = (not rest or (f"`{leaf}.py`" in row or f"`{leaf}`" in row)
                 and all(f"{folder}/" in row for folder in rest[:-1]))
        if not named:
            unnamed.append(module)
    assert unnamed == []
