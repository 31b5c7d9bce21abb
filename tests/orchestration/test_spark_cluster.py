"""One window of a registered query evaluated on a real Spark standalone cluster (master and worker started on
127.0.0.1) through spark-submit of the packaged job ``csparql/jobs/evaluate_window.py``, against the same window evaluated in
this process; and the job's plain failures: a bad query file, a failed evaluation."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from csparql.deploy.plan import deployment_of
from csparql.deploy.registry import write_loader
from csparql.deploy.settings import Settings
from csparql.ingest.ingest import ingest_stream, load_static
from csparql.engine.runner import Engine
from csparql.storage.stored import StoredResults
from csparql.samples import write_samples
from csparql.storage.statistics import read_table
from csparql.examples import examples_folder
from csparql.storage.warehouse import Warehouse
from csparql.storage.watermarks import advance_watermark
from csparql.core.windows import format_instant
from orchestration.spark_cluster import EVALUATE_WINDOW, standalone_cluster, submit_evaluation

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

EXAMPLE = examples_folder("queries") / "04-cars-per-district.rq"
REPOSITORY = Path(__file__).resolve().parents[2]
STREAM = "http://streams.org/citytollgates.trdf"


def load_job():
    """The packaged job (csparql/jobs/evaluate_window.py) loaded from its file, as spark-submit runs it."""
    spec = importlib.util.spec_from_file_location("evaluate_window", EVALUATE_WINDOW)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def registry_with(tmp_path: Path, source: Path, name: str) -> Settings:
    """A registry folder holding ``source`` as ``<name>.rq`` and a warehouse beside it."""
    registry = tmp_path / "registry"
    registry.mkdir()
    shutil.copy(source, registry / f"{name}.rq")
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    return Settings(registry=registry, warehouse=Warehouse(warehouse), landing=tmp_path / "landing")


@pytest.fixture(scope="module")
def city_hour(spark, tmp_path_factory):
    """One hour of the sample city: the citytollgates stream and the default static graph (the city)."""
    tmp_path = tmp_path_factory.mktemp("cluster")
    settings = registry_with(tmp_path, EXAMPLE, "cars_per_district")
    samples = write_samples(tmp_path / "samples", hours=1)
    ingest_stream(spark, settings.warehouse, STREAM, [samples.streams[STREAM]])
    load_static(spark, settings.warehouse, None, [samples.graphs[None]], replace=True)
    return tmp_path, settings, samples


@pytest.fixture(scope="module")
def cluster(city_hour):
    tmp_path, _, _ = city_hour
    with standalone_cluster(tmp_path / "spark") as master:
        assert master.startswith("spark://127.0.0.1:")
        yield master


def test_a_window_evaluated_on_a_standalone_cluster_matches_the_local_evaluation(spark, city_hour, cluster):
    tmp_path, settings, samples = city_hour
    deployment = deployment_of(settings.registry / "cars_per_district.rq", settings)
    at = samples.end  # the window (08:30, 09:00] lies within the hour of data
    local = Engine(settings.warehouse, spark).evaluate(deployment.plan, at, deployment.name, write=False)
    assert len(local.result) > 0

    record = submit_evaluation(cluster, deployment.path, deployment.name, at, settings.warehouse.root,
                               tmp_path / "spark", complete=True)

    assert record["query"] == deployment.name
    assert (record["window_start"], record["window_end"]) == (local.window.start, local.window.end)
    assert record["rows_written"] == len(local.result.rows) > 0
    stored = list(StoredResults(settings.warehouse, deployment.name).windows())
    assert [(start, end) for start, end, _ in stored] == [(local.window.start, local.window.end)]
    assert Counter(stored[0][2].rows) == Counter(local.result.rows)
    (run,) = [r for r in read_table(settings.warehouse.runs).to_pylist() if r["run_id"] == record["run_id"]]
    assert run["query"] == deployment.name and run["status"] == "succeeded" and run["error"] is None
    assert run["rows_written"] == record["rows_written"] and run["complete"] is True


def test_a_bad_query_file_exits_with_one_message_naming_it(tmp_path, capsys):
    query = tmp_path / "broken_query.rq"
    query.write_text("REGISTER QUERY Broken COMPUTED EVERY 1m AS\nSELECT ?s\nWHERE { ?s ?p }\n", encoding="utf-8")
    status = load_job().main(["--query", str(query), "--name", "broken_query", "--at", "1269248400000000",
                              "--warehouse", str(tmp_path)])
    out, err = capsys.readouterr()
    assert status == 2 and "CSPARQL_RESULT" not in out
    assert str(query) in err and "is not a valid C-SPARQL query" in err and "3:" in err
    assert "Traceback" not in err and "\n\n" not in err.strip()
    assert not (tmp_path / "_csparql").exists()  # nothing was evaluated, nothing recorded


@pytest.mark.parametrize("warehouse, problem", [
    ("{tmp}/no_such_folder", "is not a folder"),
    ("gs://bucket/tables", "gs://"),
    ("s3://lakehouse/tables", "cannot be reached"),  # the endpoint below does not answer
])
def test_a_warehouse_the_job_cannot_use_exits_with_one_message_before_spark(tmp_path, capsys, monkeypatch,
                                                                            warehouse, problem):
    query = tmp_path / "gates.rq"
    query.write_text("REGISTER QUERY gates COMPUTED EVERY 5m AS\nSELECT ?s\n"
                     "FROM STREAM <http://example.org/s> [RANGE 5m STEP 5m]\nWHERE { ?s ?p ?o }\n",
                     encoding="utf-8")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # the discard port: nothing answers
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    status = load_job().main(["--query", str(query), "--name", "gates", "--at", "1269248400000000",
                              "--warehouse", warehouse.format(tmp=tmp_path)])
    out, err = capsys.readouterr()
    assert status == 2 and "CSPARQL_RESULT" not in out
    assert str(query) in err and problem in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_a_failed_evaluation_exits_non_zero_and_is_recorded(spark, tmp_path, capsys):
    settings = registry_with(tmp_path, EXAMPLE, "cars_per_district")
    # A stream table with deletion vectors: the engine refuses to read it, so the evaluation fails.
    write_deltalake(str(settings.warehouse.stream(STREAM)), pa.table({"x": [1]}),
                    configuration={"delta.enableDeletionVectors": "true"})
    query = settings.registry / "cars_per_district.rq"
    status = load_job().main(["--query", str(query), "--name", "cars_per_district", "--at", "1269252000000000",
                              "--warehouse", str(settings.warehouse.root), "--complete", "false"])
    out, err = capsys.readouterr()
    assert status == 1 and "CSPARQL_RESULT" not in out
    assert str(query) in err and "deletionVectors" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    (run,) = read_table(settings.warehouse.runs).to_pylist()
    assert run["status"] == "failed" and "deletionVectors" in run["error"] and run["complete"] is False


def test_a_dag_run_evaluates_its_window_on_the_cluster(spark, city_hour, cluster):
    """The query's real DAG, run by ``airflow dags test`` (a DAG run executed in one process, with the real
    operators): CSPARQL_SPARK=standalone sends the evaluation through SparkSubmitHook to the cluster."""
    tmp_path, settings, samples = city_hour
    dags = tmp_path / "dags"
    (dags / "queries").mkdir(parents=True)
    shutil.copy(EXAMPLE, dags / "queries" / "on_cluster.rq")
    write_loader(dags / "queries" / "on_cluster.rq")
    # The sample hour is complete: no triple will come for it (else the window would wait for the watermark).
    advance_watermark(settings.warehouse, STREAM, samples.end, "test: the sample hour is complete")
    host, port = cluster.removeprefix("spark://").split(":")
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPOSITORY / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": f"spark://{host}:{port}?deploy-mode=client",
        "CSPARQL_SPARK": "standalone",
        "CSPARQL_REGISTRY": str(dags / "queries"),
        "CSPARQL_WAREHOUSE": str(settings.warehouse.root),
        "CSPARQL_ALLOWED_LATENESS": "0s",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
    })
    airflow = str(Path(sys.executable).with_name("airflow"))
    migrated = subprocess.run([airflow, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    run = subprocess.run([airflow, "dags", "test", "on_cluster", format_instant(samples.end)], env=env,
                         capture_output=True, text=True, timeout=600)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    assert "waits for" not in log  # evaluated at once, as a complete window
    assert f"--master spark://{host}:{port}" in log  # the hook's spark-submit command line, as logged
    deployment = deployment_of(settings.registry / "cars_per_district.rq", settings)
    local = Engine(settings.warehouse, spark).evaluate(deployment.plan, samples.end, "local", write=False)
    stored = list(StoredResults(settings.warehouse, "on_cluster").windows())
    assert [(start, end) for start, end, _ in stored] == [(local.window.start, local.window.end)]
    assert Counter(stored[0][2].rows) == Counter(local.result.rows) and local.result.rows
