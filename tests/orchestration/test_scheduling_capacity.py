"""Airflow's scheduler examines at most ``max_dagruns_per_loop_to_schedule`` running DAG runs per loop, the runs
that are not backfills first. Every query DAG keeps up to ``MAX_ACTIVE_RUNS`` scheduled runs waiting for their
windows, so with Airflow's default of 20 and the sixteen example queries of ``./run.sh`` the backfills that
replay the sample history were never examined again once their first task had finished (seen on a fresh clone:
one result in ten minutes). The stack's setting must leave room for every waiting run and the backfills."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from csparql.orchestration.dags import MAX_ACTIVE_RUNS
from csparql.stack.airflow_stack import DAGRUNS_PER_LOOP, AirflowStack

pytestmark = pytest.mark.airflow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "queries"


def test_every_waiting_scheduled_run_and_every_backfill_run_is_examined_each_loop():
    queries = len(list(EXAMPLES.glob("*.rq")))
    backfill_runs = inspect.signature(AirflowStack.backfill).parameters["max_active_runs"].default
    assert DAGRUNS_PER_LOOP >= queries * (MAX_ACTIVE_RUNS + backfill_runs)


def test_the_embedded_stack_gives_the_setting_to_airflow(tmp_path):
    stack = AirflowStack(home=tmp_path / "airflow", dags=tmp_path / "dags", settings_environment={})
    assert stack.environment()["AIRFLOW__SCHEDULER__MAX_DAGRUNS_PER_LOOP_TO_SCHEDULE"] == str(DAGRUNS_PER_LOOP)
