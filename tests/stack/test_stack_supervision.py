"""The embedded stack starts again an Airflow component that exits (the scheduler exits on an unexpected
database error and relies on a process manager to restart it), and only that one. The components here are a
stand-in script for their commands: what is tested is the supervision, not Airflow."""

from __future__ import annotations

import time

import pytest

from csparql.stack.airflow_stack import COMPONENTS, AirflowStack

FAKE_AIRFLOW = """#!/bin/sh
echo "$1" >> "$CSPARQL_TEST_CALLS"
[ "$1" = scheduler ] && [ ! -e "$CSPARQL_TEST_CALLS.recovered" ] && exit 3
exec sleep 120
"""


@pytest.fixture
def stack(tmp_path, monkeypatch):
    script = tmp_path / "airflow"
    script.write_text(FAKE_AIRFLOW)
    script.chmod(0o755)
    monkeypatch.setattr(AirflowStack, "command", lambda self, name: [str(script), name])
    monkeypatch.setenv("CSPARQL_TEST_CALLS", str(tmp_path / "calls"))
    started = AirflowStack(home=tmp_path / "home", dags=tmp_path / "dags", settings_environment={})
    started.start()
    yield started
    started.stop(grace=5)


def calls(tmp_path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().split() if path.exists() else []


def test_an_exited_component_is_started_again_and_the_others_are_left_alone(stack, tmp_path):
    deadline = time.monotonic() + 30
    while (stack.processes["scheduler"].poll() is None or len(calls(tmp_path)) < len(COMPONENTS)) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    first = {name: process.pid for name, process in stack.processes.items()}
    (tmp_path / "calls.recovered").touch()  # the next scheduler stays up
    assert stack.restart_exited() == [("scheduler", 3)]
    deadline = time.monotonic() + 30
    while len(calls(tmp_path)) < len(COMPONENTS) + 1 and time.monotonic() < deadline:
        time.sleep(0.1)  # the new process writes its line once it runs
    assert sorted(calls(tmp_path)) == sorted([*COMPONENTS, "scheduler"])
    assert stack.processes["scheduler"].pid != first["scheduler"]
    assert all(stack.processes[name].pid == pid for name, pid in first.items() if name != "scheduler")
    assert stack.restart_exited() == []  # all running now


def test_stopping_leaves_no_component_running(stack):
    processes = list(stack.processes.values())
    stack.stop(grace=5)
    assert all(process.poll() is not None for process in processes)


def test_a_stack_supervised_in_the_background_restarts_an_exited_component_by_itself(stack, tmp_path):
    """What tests and benchmarks run their stacks with (``supervise_in_background``): the scheduler that exits
    is started again without anyone calling ``restart_exited``, and the restart is logged."""
    stack.supervise_in_background(interval=0.2)
    deadline = time.monotonic() + 30
    while not stack.restarts and time.monotonic() < deadline:
        time.sleep(0.1)
    (tmp_path / "calls.recovered").touch()  # from now on the scheduler stays up
    assert stack.restarts and stack.restarts[0] == ("scheduler", 3)
    assert "the scheduler exited with code 3; started again" in (stack.home / "logs" / "supervisor.log").read_text()
    time.sleep(1.0)  # a scheduler started before the file existed may exit once more; the next stays up
    count = len(stack.restarts)
    time.sleep(1.5)
    assert len(stack.restarts) == count and stack.processes["scheduler"].poll() is None
