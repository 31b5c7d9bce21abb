"""The two places where csparql builds on internals of Airflow and of its Spark provider rather than on a public
API, each pinned here to the versions it was written for and to the internal behaviour it relies on, so that an
upgrade that changes either fails this test instead of breaking silently.

- ``EvaluationSubmitHook`` (``csparql.orchestration.hooks``) overrides the Spark provider's private
  ``SparkSubmitHook._process_spark_submit_log``, the one method the hook hands the driver's output to, to keep
  the job's ``CSPARQL_RESULT`` line.
- The embedded stack's DAG processor (``csparql.orchestration.dag_processor``) replaces the manager class the
  ``airflow dag-processor`` command builds, and overrides its ``fetch_callbacks`` to drop the task success
  callbacks whose child process would run nothing.
"""

from __future__ import annotations

import inspect
import json
import stat
from importlib.metadata import version

import pytest

from csparql.jobs.evaluate_window import RESULT_PREFIX

WRITTEN_FOR = {"apache-airflow-core": "3.3", "apache-airflow-providers-apache-spark": "6.3"}
"""The release series (major.minor) of each distribution whose internals the two overrides were written and
checked against. After an upgrade, check the behaviour the tests below pin, then move the series on."""


@pytest.mark.parametrize("distribution", sorted(WRITTEN_FOR))
def test_the_installed_airflow_and_spark_provider_are_the_series_the_overrides_were_written_for(distribution):
    installed = ".".join(version(distribution).split(".")[:2])
    assert installed == WRITTEN_FOR[distribution], (
        f"{distribution} {version(distribution)} is installed; csparql's overrides of its internals were written "
        f"for {WRITTEN_FOR[distribution]}.x: check the tests of this module still describe it, then update "
        "WRITTEN_FOR")


def test_the_spark_hook_hands_the_driver_output_to_the_method_the_evaluation_hook_overrides():
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    assert list(inspect.signature(SparkSubmitHook._process_spark_submit_log).parameters) == ["self", "itr"]
    assert "self._process_spark_submit_log(iter(self._submit_sp.stdout))" in inspect.getsource(SparkSubmitHook.submit)


@pytest.mark.parametrize("exit_status", [0, 3])
def test_the_evaluation_hook_keeps_the_result_line_of_the_spark_submit_it_runs_and_hands_on_every_line(
        tmp_path, monkeypatch, exit_status):
    """The record is kept, and every line still reaches the provider's own reading of the output: a failed
    submit's error ends with the last lines the driver printed."""
    from airflow.exceptions import AirflowException

    from csparql.orchestration.hooks import EvaluationSubmitHook

    record = {"query": "cars", "window_end": 5, "rows": 3, "stale": []}
    spark_submit = tmp_path / "spark-submit"
    spark_submit.write_text(
        "#!/bin/sh\n"
        "echo 'driver starting'\n"
        f"echo '{RESULT_PREFIX}{json.dumps(record)}'\n"
        "echo 'driver stopped'\n"
        f"exit {exit_status}\n", encoding="utf-8")
    spark_submit.chmod(spark_submit.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("AIRFLOW_CONN_CSPARQL_INTERNALS_SPARK", "spark://local")
    hook = EvaluationSubmitHook(conn_id="csparql_internals_spark", spark_binary=str(spark_submit),
                                name="csparql-cars", application_args=["--name", "cars"])
    if exit_status:
        with pytest.raises(AirflowException, match="(?s)Error code is: 3.*driver stopped"):
            hook.submit(str(tmp_path / "job.py"))
    else:
        hook.submit(str(tmp_path / "job.py"))
    assert hook.record == record


def test_the_dag_processor_command_builds_the_manager_class_its_module_names_and_asks_it_for_callbacks():
    from airflow.cli.commands import dag_processor_command
    from airflow.dag_processing.manager import DagFileProcessorManager

    assert dag_processor_command.DagFileProcessorManager is DagFileProcessorManager
    assert "processor=DagFileProcessorManager(" in inspect.getsource(dag_processor_command)
    assert list(inspect.signature(DagFileProcessorManager.fetch_callbacks).parameters) == ["self"]
    assert "self.fetch_callbacks()" in inspect.getsource(DagFileProcessorManager)


def test_the_callbacks_the_stack_drops_are_those_airflow_s_child_process_would_run_nothing_for():
    from airflow.dag_processing import processor

    source = inspect.getsource(processor._execute_task_callbacks)
    guard = source.split("\n\n")[0]
    assert "if not request.is_failure_callback:" in guard and guard.rstrip().endswith("return"), guard
