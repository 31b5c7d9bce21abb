"""The pure core (language, algebra, optimizer, window arithmetic) imports neither pyspark nor airflow."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import csparql

PACKAGE = Path(csparql.__file__).parent
PURE_CORE = ["language", "algebra", "optimizer", "windows.py", "terms.py", "frontend.py"]
FORBIDDEN = ("pyspark", "airflow", "deltalake")


def core_files() -> list[Path]:
    files = []
    for part in PURE_CORE:
        path = PACKAGE / part
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_core_source_never_imports_spark_airflow_or_delta():
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(m for m in imported_modules(path) if m.split(".")[0] in FORBIDDEN)
        for path in core_files()
    }
    offenders = {k: v for k, v in offenders.items() if v}
    assert len(core_files()) > 10
    assert not offenders, offenders


def test_core_source_imports_only_the_core_from_csparql():
    allowed = ("csparql.language", "csparql.algebra", "csparql.optimizer", "csparql.windows", "csparql.terms", "csparql.frontend")
    offenders = {}
    for path in core_files():
        outside = sorted(m for m in imported_modules(path) if m.startswith("csparql") and not m.startswith(allowed))
        if outside:
            offenders[str(path.relative_to(PACKAGE))] = outside
    assert not offenders, offenders


def test_importing_the_core_loads_no_spark_or_airflow():
    code = (
        "import sys\n"
        "import csparql.frontend, csparql.optimizer, csparql.windows, csparql.algebra.sexpr\n"
        "from csparql.frontend import compile_query\n"
        "from csparql.optimizer import optimize\n"
        "optimize(compile_query('SELECT * WHERE { ?s ?p ?o }'))\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_only_the_airflow_layer_imports_airflow_and_the_deployment_plan_needs_neither_airflow_nor_spark():
    airflow_users = sorted(
        str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
        if any(m.split(".")[0] == "airflow" for m in imported_modules(path))
    )
    assert airflow_users and all(p.startswith(("orchestration/", "web/")) for p in airflow_users), airflow_users
    for part in ("schedule.py", "deploy", "storage"):
        path = PACKAGE / part
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            spark_or_airflow = [m for m in imported_modules(file) if m.split(".")[0] in ("pyspark", "airflow")]
            assert not spark_or_airflow, (file, spark_or_airflow)
