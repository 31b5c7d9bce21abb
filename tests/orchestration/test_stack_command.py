"""The README's main command, ``csparql stack`` (what ``./run.sh`` runs), as a user runs it: it comes up,
prints the address and a login that works, lands the sample stream through its ingestion DAG, backfills the
example's sample windows so that results appear, and stops cleanly on Ctrl-C, leaving no process behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from csparql.orchestration.stack import free_port
from csparql.storage import delta
from csparql.storage.statistics import read_table
from csparql.storage.warehouse import Warehouse

REPOSITORY = Path(__file__).resolve().parents[2]


def test_the_stack_comes_up_shows_results_and_stops_on_ctrl_c(tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(REPOSITORY / "dags" / "csparql_streams.py", dags)
    port = free_port()
    env = dict(os.environ, CSPARQL_WAREHOUSE=str(tmp_path / "warehouse"), CSPARQL_REGISTRY=str(dags / "queries"),
               AIRFLOW__CORE__DAGS_FOLDER=str(dags), PYTHONUNBUFFERED="1")
    output = tmp_path / "stack.out"
    with open(output, "w") as out:
        stack = subprocess.Popen(
            [str(Path(sys.executable).with_name("csparql")), "stack", "--port", str(port), "--home",
             str(tmp_path / "airflow"), "--examples", "02", "--windows", "1"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        login = _wait_for(lambda: re.search(r"Airflow is up: (\S+)\s+login: (\S+) / (\S+)", output.read_text()), 600,
                          stack, output)
        url, user, password = login.groups()
        assert url == f"http://127.0.0.1:{port}"
        request = urllib.request.Request(f"{url}/auth/token", method="POST", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"username": user, "password": password}).encode())
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.load(response)["access_token"]
        warehouse = Warehouse(tmp_path / "warehouse")
        _wait_for(lambda: _succeeded(warehouse, "ex02_cars_per_tollgate") >= 1, 900, stack, output)
        assert delta.exists(warehouse.results("ex02_cars_per_tollgate", "bindings"))
    finally:
        if stack.poll() is None:
            os.killpg(stack.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
        code = stack.wait(timeout=120)
    assert code == 0, output.read_text()[-3000:]
    assert "stopped" in output.read_text()
    components = json.loads((tmp_path / "airflow" / "components.json").read_text())
    assert set(components) == {"api-server", "scheduler", "dag-processor", "triggerer"}
    assert not [name for name, group in components.items() if _group_alive(group)], "an Airflow process is left"


def _group_alive(group: int) -> bool:
    """Whether any process of the process group (a component and the workers it started) still runs."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _succeeded(warehouse: Warehouse, query: str) -> int:
    if not delta.exists(warehouse.runs):
        return 0
    return sum(1 for r in read_table(warehouse.runs).to_pylist() if r["query"] == query and r["status"] == "succeeded")


def _wait_for(check, timeout: float, process: subprocess.Popen, output: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        assert process.poll() is None, f"csparql stack exited ({process.returncode}):\n{output.read_text()[-3000:]}"
        time.sleep(3)
    raise AssertionError(f"timed out after {timeout:.0f} s:\n{output.read_text()[-3000:]}")
