"""The instant ``CsparqlEvaluateWindowOperator`` evaluates, rendered from a run as Airflow's task runner and
triggerer render it: the operator's template field against the DAG run Airflow gives a task (``DagRun`` of
the Task SDK), for a manual run with a logical date whose data interval Airflow inferred from the moment it
was triggered (``airflow dags trigger --logical-date``), a scheduled run and a manual run without a date."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pendulum
import pytest

from csparql.examples import examples_folder

pytestmark = pytest.mark.airflow

QUERY = examples_folder("queries") / "04-cars-per-district.rq"
TRIGGERED = datetime(2026, 12, 1, 23, 0, tzinfo=timezone.utc)
NINE = datetime(2010, 3, 22, 9, 0, tzinfo=timezone.utc)


def rendered_instant(tmp_path, run_type: str, logical_date, interval, run_after=TRIGGERED) -> str:
    from airflow.sdk import DAG
    from airflow.sdk.api.datamodels._generated import DagRun

    from csparql.orchestration.operators import CsparqlEvaluateWindowOperator

    with DAG("user_dag", schedule=None, start_date=pendulum.datetime(2010, 1, 1, tz="UTC")):
        task = CsparqlEvaluateWindowOperator(task_id="evaluate", query=str(QUERY), name="districts",
                                            warehouse=tmp_path / "warehouse")
    run = DagRun(dag_id="user_dag", run_id="r", logical_date=logical_date, data_interval_start=interval[0],
                 data_interval_end=interval[1], run_after=run_after, start_date=TRIGGERED, end_date=None,
                 run_type=run_type, state="running", consumed_asset_events=[], partition_key=None)
    task.render_template_fields({"dag_run": run})
    return task.window_instant


def test_a_manual_run_for_a_logical_date_evaluates_that_date_not_the_moment_it_was_triggered(tmp_path):
    # what `airflow dags trigger --logical-date 2010-03-22T09:00:00Z` makes: the interval inferred from now
    assert rendered_instant(tmp_path, "manual", NINE, (TRIGGERED, TRIGGERED)) == NINE.isoformat()


def test_scheduled_runs_evaluate_their_interval_end_and_undated_manual_runs_when_they_were_triggered(tmp_path):
    window = (NINE - timedelta(minutes=30), NINE)  # the logical date of a scheduled run is the interval's start
    assert rendered_instant(tmp_path, "scheduled", window[0], window) == NINE.isoformat()
    assert rendered_instant(tmp_path, "backfill", window[0], window) == NINE.isoformat()
    assert rendered_instant(tmp_path, "manual", None, (None, None)) == TRIGGERED.isoformat()
