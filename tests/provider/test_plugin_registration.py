"""The checkout's environment, as ``scripts/bootstrap.sh`` installs it, holds one csparql distribution, so
Airflow loads the csparql plugin once: no "Plugin 'csparql' already registered" warning in every component's
log and every command, and no plugin import error on Airflow's pages. Run in a new process, as an Airflow
component starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.airflow

_LOAD = """
import json
from importlib import metadata
from airflow import plugins_manager

print("CSPARQL_RESULT " + json.dumps({
    "distributions": [str(d._path) for d in metadata.distributions() if d.metadata["Name"] == "csparql"],
    "import_errors": plugins_manager.get_import_errors(),
    "plugins": [p["name"] for p in plugins_manager.get_plugin_info()],
}))
"""


def test_airflow_loads_the_csparql_plugin_once_without_an_import_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CSPARQL_", "PYTHONPATH"))}
    env.update(AIRFLOW_HOME=str(tmp_path / "airflow"), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    done = subprocess.run([sys.executable, "-c", _LOAD], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("CSPARQL_RESULT ")]
    loaded = json.loads(line.split(" ", 1)[1])
    assert len(loaded["distributions"]) == 1, loaded["distributions"]
    assert loaded["import_errors"] == {}
    assert loaded["plugins"].count("csparql") == 1
    assert "already registered" not in done.stderr
