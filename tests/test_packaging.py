"""csparql as an installable distribution: nothing in the package resolves a path relative to the
source tree, files needed at run time are package data found through ``importlib.resources``, the provider
info and the entry points say what Airflow needs, and the settings' defaults live under ``AIRFLOW_HOME``
(Airflow's components) or the working directory (the command line), never under the installed package.

The end-to-end check of an installed wheel in a plain Airflow is ``tests/provider/``."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import import_module
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import csparql
from csparql.deploy.provider import get_provider_info
from csparql.deploy.settings import OPTIONS, SECTION, Settings

PACKAGE = Path(csparql.__file__).parent
REPOSITORY = PACKAGE.parents[1]
PYPROJECT = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))


def source_tree_paths(path: Path) -> list[str]:
    """Where the module at ``path`` resolves a path from its own location: ``__file__`` (its own, or a csparql
    module's) and whatever is built from it (``parents[...]``, ``with_name``); each as ``line: code``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        own_file = isinstance(node, ast.Name) and node.id == "__file__"
        package_file = (isinstance(node, ast.Attribute) and node.attr == "__file__"
                        and isinstance(node.value, ast.Name) and node.value.id == "csparql")
        root_helper = isinstance(node, (ast.Name, ast.Attribute)) and getattr(node, "id",
                                                                               getattr(node, "attr", "")) == "project_root"
        if own_file or package_file or root_helper:
            found.append(f"{node.lineno}: {ast.get_source_segment(path.read_text(encoding='utf-8'), node)}")
    return found


def test_no_module_of_the_package_resolves_a_path_relative_to_the_source_tree():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if found := source_tree_paths(path):
            offenders[str(path.relative_to(PACKAGE))] = found
    assert offenders == {}, ("modules that find files relative to the source tree (use importlib.resources for "
                             f"package data, settings for folders): {offenders}")


def test_the_scan_finds_a_path_built_from_the_module_file(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from pathlib import Path\nROOT = Path(__file__).resolve().parents[3]\n"
                      "TEMPLATE = 'registered_query_dag(__file__)'\nimport pyspark\nHOME = Path(pyspark.__file__)\n")
    assert source_tree_paths(module) == ["2: __file__"]


def imported_top_level_modules(path: Path) -> set[str]:
    """The top-level names of the modules ``path`` imports by absolute name, wherever in the module."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.partition(".")[0])
    return modules


def distribution_key(name: str) -> str:
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_module_the_package_imports_is_a_declared_requirement():
    """An installed wheel must bring what it imports: a module that only arrives as somebody else's dependency
    (Airflow's FastAPI, a provider's client library) disappears when that dependency changes. A module not
    installed here (an extra's) is taken to be the distribution of its own name."""
    declared = {distribution_key(Requirement(text).name) for text in PYPROJECT["project"]["dependencies"]}
    for extra, requirements in PYPROJECT["project"]["optional-dependencies"].items():
        if extra != "test":
            declared |= {distribution_key(Requirement(text).name) for text in requirements}
    providers = packages_distributions()
    undeclared = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for module in imported_top_level_modules(path) - set(sys.stdlib_module_names) - {"csparql"}:
            distributions = {distribution_key(name) for name in providers.get(module, [module])}
            if not distributions & declared:
                undeclared.setdefault(module, []).append(str(path.relative_to(PACKAGE)))
    assert undeclared == {}, f"modules imported but not declared in pyproject.toml's dependencies: {undeclared}"


def test_the_import_scan_finds_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os.path\nfrom . import sibling\n\ndef f():\n    from httpx import Client\n")
    assert imported_top_level_modules(module) == {"os", "httpx"}


def test_files_read_at_run_time_are_package_data_declared_in_pyproject():
    from csparql.examples import examples_folder
    from csparql.jobs import LOG4J_CONFIGURATION, job_path
    from csparql.core.language.parser import GRAMMAR_FILE, RSPQL_GRAMMAR_FILE

    for needed in (job_path(), LOG4J_CONFIGURATION, GRAMMAR_FILE, RSPQL_GRAMMAR_FILE):
        assert needed.is_file() and needed.is_relative_to(PACKAGE), needed
    assert sorted(examples_folder("queries").glob("*.rq")) and sorted(examples_folder("srbench").glob("q*.rq"))
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["csparql"]
    for data in (LOG4J_CONFIGURATION, GRAMMAR_FILE, *examples_folder("queries").glob("*.rq"),
                 *examples_folder("srbench").glob("*.rq"), *(PACKAGE / "web" / "templates").glob("*.html"),
                 *(PACKAGE / "web" / "static").glob("*")):
        relative = data.relative_to(PACKAGE)
        assert any(relative.match(pattern) for pattern in patterns), f"{relative} is not package data"


def test_the_checkouts_job_file_is_a_shim_of_the_packaged_job():
    shim = (REPOSITORY / "spark_jobs" / "evaluate_window.py").read_text(encoding="utf-8")
    assert "csparql.jobs.evaluate_window" in shim and len(shim.splitlines()) < 10


def test_the_entry_points_name_the_provider_info_and_the_plugin():
    entry_points = PYPROJECT["project"]["entry-points"]
    provider = entry_points["apache_airflow_provider"]["provider_info"]
    plugin = entry_points["airflow.plugins"]["csparql"]
    module, name = provider.split(":")
    assert getattr(import_module(module), name) is get_provider_info
    assert plugin == get_provider_info()["plugins"][0]["plugin-class"].replace(".CsparqlPlugin", ":CsparqlPlugin")


def test_the_provider_info_describes_every_option_with_airflow_home_defaults():
    info = get_provider_info()
    assert info["package-name"] == PYPROJECT["project"]["name"]
    section = info["config"][SECTION]
    assert list(section["options"]) == [option.key for option in OPTIONS]
    for key, option in section["options"].items():
        assert option["description"] and option["type"] == ("integer" if key in ("triggerer_evaluations", "triggerer_windows_per_job", "push_max_bytes") else "string"), key
        assert "site-packages" not in option["default"] and not Path(option["default"]).is_absolute(), key
    assert section["options"]["warehouse"]["default"].startswith("{AIRFLOW_HOME}/")
    assert section["options"]["registry"]["default"].startswith("{AIRFLOW_HOME}/")
    assert "spark_conn_id" in section["options"]


@pytest.mark.airflow
def test_the_provider_info_is_valid_for_airflows_providers_manager():
    import jsonschema
    from importlib.resources import files

    schema = json.loads((files("airflow") / "provider_info.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(get_provider_info(), schema)


def test_command_line_defaults_live_under_the_working_directory(tmp_path):
    settings = Settings.from_environment({}, base=tmp_path)
    assert settings.warehouse.root == tmp_path / "delta_tables"
    assert settings.registry == tmp_path / "dags" / "queries"
    assert settings.landing == tmp_path / "delta_tables" / "landing"
    assert settings.describe()[0] == "defaults under the working directory"
    given = Settings.from_environment({"CSPARQL_WAREHOUSE": str(tmp_path / "w"), "CSPARQL_SPARK": "connect"},
                                      base=tmp_path)
    assert given.warehouse.root == tmp_path / "w" and given.spark == "connect"
    assert "(CSPARQL_SPARK)" in next(line for line in given.describe() if line.startswith("spark "))


def test_the_settings_command_says_which_defaults_it_uses(tmp_path, monkeypatch, capsys):
    from csparql.cli import main

    monkeypatch.chdir(tmp_path)
    for option in OPTIONS:
        monkeypatch.delenv(option.variable, raising=False)
    monkeypatch.setenv("CSPARQL_REVISION_HORIZON", "2h")
    assert main(["settings"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "defaults under the working directory"
    words = [line.split() for line in out[1:]]  # one line per option: key, value and origin in aligned columns
    assert [w[0] for w in words] == [option.key for option in OPTIONS]
    assert ["warehouse", str(tmp_path / "delta_tables"), "(default)"] in words
    assert ["revision_horizon", "2h", "(CSPARQL_REVISION_HORIZON)"] in words
    assert ["triggerer_evaluations", "2", "(default)"] in words
    monkeypatch.setenv("CSPARQL_WAIT_TIMEOUT", "soon")
    assert main(["settings"]) == 1
    assert capsys.readouterr().err.startswith("csparql: CSPARQL_WAIT_TIMEOUT='soon': ")


@pytest.mark.airflow
def test_airflow_components_read_the_csparql_section_with_defaults_under_airflow_home(tmp_path):
    """A real Airflow configuration in a fresh AIRFLOW_HOME, as a component reads it: the section's variables,
    defaults under AIRFLOW_HOME, CSPARQL_* only for options the section leaves at their defaults, and an
    unusable value named by the variable that gave it."""
    home = tmp_path / "airflow"
    program = ("import json; from csparql.orchestration.config import deployment_settings as d; s = d(); "
               "print(json.dumps([str(s.warehouse.root), str(s.registry), str(s.landing), s.spark, "
               "s.revision_horizon, s.defaults, dict(s.origins)]))")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("CSPARQL_", "AIRFLOW"))}
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CSPARQL__SPARK": "connect",
                "AIRFLOW__CSPARQL__WAREHOUSE": str(tmp_path / "warehouse"), "CSPARQL_REVISION_HORIZON": "2h",
                "CSPARQL_SPARK": "local"})
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    warehouse, registry, landing, spark, horizon, defaults, origins = json.loads(done.stdout.splitlines()[-1])
    assert warehouse == str(tmp_path / "warehouse") and origins["warehouse"] == "AIRFLOW__CSPARQL__WAREHOUSE"
    assert registry == str(home.resolve() / "csparql" / "queries") and origins["registry"] == "default"
    assert landing == str(tmp_path / "warehouse" / "landing")
    assert spark == "connect"  # the section's value wins over CSPARQL_SPARK
    assert horizon == 2 * 3_600_000_000 and origins["revision_horizon"] == "CSPARQL_REVISION_HORIZON"
    assert defaults == "AIRFLOW_HOME"

    env["AIRFLOW__CSPARQL__WAIT_TIMEOUT"] = "soon"
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode != 0 and "AIRFLOW__CSPARQL__WAIT_TIMEOUT='soon'" in done.stderr


class AirflowConfiguration:
    """What ``Settings.from_airflow`` reads of Airflow's configuration object: ``get(section, key, fallback)``.
    Stands for a section Airflow filled from airflow.cfg, which the real-configuration test above covers."""

    def __init__(self, values: dict[str, str]):
        self.values = values

    def get(self, section: str, key: str, fallback=None):
        return self.values.get(key, fallback) if section == SECTION else fallback


def test_a_default_airflow_wrote_into_airflow_cfg_leaves_the_option_to_its_variable(tmp_path):
    # Airflow writes every provider default into a new airflow.cfg, with {AIRFLOW_HOME} expanded but links not
    # resolved: such a value is still the default, so CSPARQL_WAREHOUSE (docker-compose, the stack) decides.
    (tmp_path / "real").mkdir()
    (tmp_path / "home").symlink_to(tmp_path / "real")
    conf = AirflowConfiguration({"warehouse": f"{tmp_path / 'home'}/csparql/warehouse", "spark": "local"})
    settings = Settings.from_airflow(conf, {"AIRFLOW_HOME": str(tmp_path / "home"),
                                            "CSPARQL_WAREHOUSE": str(tmp_path / "w"), "CSPARQL_SPARK": "connect"})
    assert settings.warehouse.root == tmp_path / "w" and settings.spark == "connect"
    assert dict(settings.origins)["warehouse"] == "CSPARQL_WAREHOUSE"
