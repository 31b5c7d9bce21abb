"""Windows of example queries evaluated through a real Spark Connect server (started on 127.0.0.1), against
the same windows evaluated on the local Spark of this process: the stored results equal the local ones, and
the runs table records the Connect evaluations as succeeded.

The Connect evaluations run in one fresh Python process (``evaluate_over_connect``): this process holds the
suite's classic SparkSession, and PySpark opens no Connect session beside it."""

from __future__ import annotations

from collections import Counter

import pytest

from csparql.ingest.ingest import ingest_stream, load_static
from csparql.engine.runner import Engine
from csparql.storage.stored import StoredResults
from csparql.core.frontend import compile_query
from csparql.samples import write_samples
from csparql.storage.statistics import read_table
from csparql.examples import examples_folder
from csparql.storage.warehouse import Warehouse
from orchestration.spark_connect import evaluate_over_connect, test_server

pytestmark = pytest.mark.spark

EXAMPLES = examples_folder("queries")
TOLLGATES = "http://streams.org/citytollgates.trdf"
CAMERAS = "http://streams.org/citycameras.trdf"
QUERIES = {
    # a stream window joined with static knowledge, AGGREGATE COUNT
    "cars_per_district": EXAMPLES / "04-cars-per-district.rq",
    # two tumbling windows addressed as graphs, UNION, a static join, AGGREGATE with a FILTER
    "full_streets": EXAMPLES / "08-full-streets-two-streams.rq",
    # a self-join of one window, timestamp(?v) compared in a FILTER, DISTINCT
    "cars_turning": EXAMPLES / "09-timestamp-function.rq",
}


@pytest.fixture(scope="module")
def starting_server(tmp_path_factory):
    """The Connect server, started first so that it comes up while the city is ingested."""
    server = test_server(tmp_path_factory.mktemp("spark-connect"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def city_hour(spark, starting_server, tmp_path_factory):
    """One hour of the sample city: the citytollgates and citycameras streams and the default static graph."""
    tmp_path = tmp_path_factory.mktemp("connect")
    warehouse = Warehouse(tmp_path / "warehouse")
    samples = write_samples(tmp_path / "samples", hours=1)
    for stream in (TOLLGATES, CAMERAS):
        ingest_stream(spark, warehouse, stream, [samples.streams[stream]])
    load_static(spark, warehouse, None, [samples.graphs[None]], replace=True)
    return tmp_path, warehouse, samples


@pytest.fixture(scope="module")
def over_connect(city_hour, starting_server):
    """Every query's window ending at 09:00 (within the hour of data) evaluated through the server, its
    results and run written to the warehouse: the CSPARQL_RESULT record of each."""
    tmp_path, warehouse, samples = city_hour
    url = starting_server.wait_until_answering()
    assert url.startswith("sc://localhost:")
    return evaluate_over_connect(url, [(query, name) for name, query in QUERIES.items()], samples.end,
                                 warehouse.root, tmp_path)


@pytest.mark.parametrize("name", list(QUERIES))
def test_a_window_evaluated_over_spark_connect_matches_the_local_evaluation(spark, city_hour, over_connect, name):
    _, warehouse, samples = city_hour
    query = QUERIES[name]
    plan = compile_query(query.read_text(encoding="utf-8"), str(query))
    local = Engine(warehouse, spark).evaluate(plan, samples.end, name, write=False)
    assert len(local.result.rows) > 0

    record = over_connect[name]
    assert record["session"] == "pyspark.sql.connect.session"  # the engine ran on a Connect session
    # the results came back in one request: no round trip (and analysis on the server) for their schema first
    assert record["schema_requests"] == 0
    assert (record["window_start"], record["window_end"]) == (local.window.start, local.window.end)
    assert record["rows_written"] == len(local.result.rows)
    stored = list(StoredResults(warehouse, name).windows())
    assert [(start, end) for start, end, _ in stored] == [(local.window.start, local.window.end)]
    assert stored[0][2].vars == local.result.vars
    assert Counter(stored[0][2].rows) == Counter(local.result.rows)
    (run,) = [r for r in read_table(warehouse.runs).to_pylist() if r["query"] == name]
    assert run["run_id"] == record["run_id"]
    assert run["status"] == "succeeded" and run["error"] is None
    assert run["rows_written"] == record["rows_written"]


def test_the_server_runs_only_requests_that_carry_its_token(starting_server):
    from pyspark.errors import PySparkException
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from csparql.runtime.connect_server import close_session, connect_mode_left_alone

    starting_server.wait_until_answering()  # with the token: answers
    with connect_mode_left_alone():
        intruder = ConnectSession(connection=f"sc://127.0.0.1:{starting_server.port}")
        try:
            with pytest.raises(PySparkException, match="UNAUTHENTICATED"):
                intruder.range(1).count()
        finally:
            close_session(intruder)


def test_an_exported_spark_remote_is_the_master_of_the_spark_commands(city_hour, starting_server, tmp_path):
    # Spark Connect's standard variable, exported as a Connect user does: `csparql ingest`, `load-static` and
    # `run` (new processes, as from a shell) become clients of that server instead of failing as internal errors.
    import subprocess
    import sys

    from orchestration.spark_cluster import spark_environment

    _, _, samples = city_hour
    url = starting_server.wait_until_answering()
    env = spark_environment(tmp_path)
    for key in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "PYSPARK_GATEWAY_PORT", "CSPARQL_SPARK_MASTER"):
        env.pop(key, None)
    env.update(SPARK_REMOTE=url, CSPARQL_WAREHOUSE=str(tmp_path / "warehouse"))
    csparql = [sys.executable, "-m", "csparql.cli"]
    ingest = subprocess.run([*csparql, "ingest", "--stream", TOLLGATES, str(samples.streams[TOLLGATES])], env=env,
                            capture_output=True, text=True, timeout=300)
    assert ingest.returncode == 0, ingest.stderr
    assert f"landed in <{TOLLGATES}>" in ingest.stdout and "internal error" not in ingest.stderr
    load = subprocess.run([*csparql, "load-static", str(samples.graphs[None])], env=env, capture_output=True,
                          text=True, timeout=300)
    assert load.returncode == 0, load.stderr
    query = QUERIES["cars_per_district"]
    run = subprocess.run([*csparql, "run", str(query), "--at", "2010-03-22T09:00:00Z", "--name", "tollgates"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "written to the results of tollgates" in run.stderr and len(run.stdout.splitlines()) > 1


def test_spark_remote_is_the_master_unless_one_is_chosen(monkeypatch):
    from csparql.runtime.session import configured_master

    monkeypatch.delenv("CSPARQL_SPARK_MASTER", raising=False)
    monkeypatch.setenv("SPARK_REMOTE", "sc://localhost:15002")
    assert configured_master() == "sc://localhost:15002"
    assert configured_master("local[2]") == "local[2]"
    monkeypatch.setenv("CSPARQL_SPARK_MASTER", "spark://127.0.0.1:7077")
    assert configured_master() == "spark://127.0.0.1:7077"


def test_the_sessions_the_engine_starts_and_its_connect_server_keep_the_code_they_compiled(spark, starting_server):
    """Spark's code cache holds ``CODEGEN_CACHE_ENTRIES`` compiled classes in this process's session and in the
    Connect server (a static setting: the server is started with it, a client could not give it)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from csparql.runtime.connect_server import close_session, connect_mode_left_alone
    from csparql.runtime.session import CODEGEN_CACHE_ENTRIES

    setting = "spark.sql.codegen.cache.maxEntries"
    assert spark.conf.get(setting) == str(CODEGEN_CACHE_ENTRIES) != "100"  # Spark's default
    url = starting_server.wait_until_answering()
    with connect_mode_left_alone():
        client = ConnectSession(connection=url)
        try:
            assert client.conf.get(setting) == str(CODEGEN_CACHE_ENTRIES)
        finally:
            close_session(client)
