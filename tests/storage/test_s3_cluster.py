"""A warehouse in S3 used by Spark where it is not local: a standalone cluster that shares no disk with the
driver (a master and two workers from pyspark's own ``spark-class``, each worker with a working folder of its
own, run where the driver's folders — the input files, its working folder — are hidden from them), and a Spark
Connect server. Ingests and evaluations submitted there, by ``csparql`` processes as a user runs them, give
the windows pyoxigraph gives over the same events, which are also the windows a local session gives
(``test_s3_warehouse``); so does a query's DAG run by Airflow, whose operator spark-submits the window to the
cluster, and the pages of an api-server show it. The S3 server is SeaweedFS on loopback
(``services.s3_server``)."""

from __future__ import annotations

import json
import subprocess
import time

import httpx
import pytest

from conformance.compare import compare
from orchestration.spark_cluster import free_port, hides_folders, standalone_cluster
from orchestration.spark_connect import test_server
from services.s3_server import s3_server  # noqa: F401  (the fixtures: the server, its bucket, the variables)
from storage.test_s3_warehouse import (  # noqa: F401
    ENDS, QUERY, STREAM, aws, bucket, csparql, events, oracle, stored_windows, write_events)

from csparql.deploy.registry import write_loader
from csparql.stack.airflow_stack import AirflowStack
from csparql.storage.warehouse import slug
from csparql.core.windows import format_instant


pytestmark = pytest.mark.spark


@pytest.fixture
def s3_environment(aws, monkeypatch):
    """``aws`` (the AWS variables pointed at the server), and an S3 location in use, as in a process whose
    warehouse is in S3: what the Spark processes it starts (a Connect server) are given."""
    monkeypatch.setenv("CSPARQL_OBJECT_STORAGE", "s3")
    return aws


def assert_windows_equal_pyoxigraph(warehouse: str, rows, ends, name: str = "GatePassages") -> None:
    stored = stored_windows(warehouse, name)
    assert sorted(stored) == ends
    for end in ends:
        assert not compare(stored[end], oracle(rows, end)), format_instant(end)


def test_an_ingest_and_a_replay_on_a_cluster_sharing_no_disk_equal_pyoxigraph(tmp_path, s3_environment):
    if not hides_folders():
        pytest.fail("the workers cannot be run apart from the driver's folders: unshare --mount needs root")
    driver = tmp_path / "driver"  # what only the driver sees: the input files, its working folder
    driver.mkdir()
    warehouse = "s3://lakehouse/cluster"
    rows = events()
    inputs = write_events(driver / "passages.tnq", rows)
    query = driver / "gates.rq"
    query.write_text(QUERY)
    with standalone_cluster(tmp_path / "cluster", workers=2, hidden=[driver]) as master:
        landed = csparql(driver, s3_environment, warehouse, "ingest", "--master", master, "--stream", STREAM,
                         str(inputs), timeout=600)
        assert "600 triples landed" in landed.stdout + landed.stderr
        csparql(driver, s3_environment, warehouse, "replay", str(query), "--master", master,
                "--from", format_instant(ENDS[0]), "--to", format_instant(ENDS[-1]), timeout=600)
        # both workers ran executors of both applications, each in its own folder
        for folder in (tmp_path / "cluster" / "worker", tmp_path / "cluster" / "worker-2"):
            assert len([app for app in folder.glob("app-*")]) == 2, sorted(folder.iterdir())
    assert_windows_equal_pyoxigraph(warehouse, rows, ENDS)
    assert not [p for p in driver.iterdir() if p.name not in ("passages.tnq", "gates.rq", "q")], \
        sorted(driver.iterdir())  # nothing of the warehouse in a local folder


def test_an_evaluation_over_spark_connect_on_an_s3_warehouse_equals_pyoxigraph(tmp_path, s3_environment):
    warehouse = "s3://lakehouse/connect"
    rows = events()
    csparql(tmp_path, s3_environment, warehouse, "ingest", "--stream", STREAM,
            str(write_events(tmp_path / "passages.tnq", rows)))
    query = tmp_path / "gates.rq"
    query.write_text(QUERY)
    server = test_server(tmp_path / "connect")
    server.start()
    try:
        url = server.wait_until_answering()
        for end in ENDS[:3]:
            csparql(tmp_path, s3_environment, warehouse, "run", str(query), "--at", format_instant(end),
                    "--master", url)
    finally:
        server.stop()
    assert_windows_equal_pyoxigraph(warehouse, rows, ENDS[:3])


def test_a_dag_run_submits_its_window_to_a_cluster_sharing_no_disk_and_its_pages_show_it_from_s3(
        tmp_path, bucket, monkeypatch):
    """The query's real DAG run by ``airflow dags test`` with ``CSPARQL_SPARK=standalone``: the operator
    spark-submits the window to the cluster. The Airflow processes know the bucket only through the ``aws``
    connection ``[csparql] aws_conn_id`` names, and the cluster's processes not at all (no AWS variables in
    their environment, the driver's folders hidden): the endpoint and credentials reach the executors through
    the submitted application's settings alone. Then the api-server's pages show the window from the bucket."""
    if not hides_folders():
        pytest.fail("the workers cannot be run apart from the driver's folders: unshare --mount needs root")
    for name in bucket.environment():
        monkeypatch.delenv(name, raising=False)
    driver = tmp_path / "driver"
    (driver / "dags" / "queries").mkdir(parents=True)
    warehouse = "s3://lakehouse/dag-run"
    rows = events()
    landed = csparql(driver, bucket, warehouse, "ingest", "--stream", STREAM,
                     str(write_events(driver / "passages.tnq", rows)))
    assert "600 triples landed" in landed.stdout + landed.stderr
    query = driver / "dags" / "queries" / "gates_on_cluster.rq"
    query.write_text(QUERY)
    write_loader(query)
    at = ENDS[1]
    connection = {"conn_type": "aws", "login": bucket.access_key, "password": bucket.secret_key,
                  "extra": {"endpoint_url": bucket.endpoint, "region_name": "us-east-1"}}
    with standalone_cluster(tmp_path / "cluster", workers=2, hidden=[driver]) as master:
        host, port = master.removeprefix("spark://").split(":")
        stack = AirflowStack(
            home=driver / "airflow", dags=driver / "dags", port=free_port(), isolated=True,
            settings_environment={
                "AIRFLOW__CSPARQL__AWS_CONN_ID": "lakehouse",
                "AIRFLOW__CSPARQL__SPARK": "standalone",
                "AIRFLOW__CSPARQL__REGISTRY": str(driver / "dags" / "queries"),
                "AIRFLOW__CSPARQL__WAREHOUSE": warehouse,
                "AIRFLOW__CSPARQL__ALLOWED_LATENESS": "0s",
            },
            extra_environment={
                "AIRFLOW_CONN_SPARK_DEFAULT": f"spark://{host}:{port}?deploy-mode=client",
                "AIRFLOW_CONN_LAKEHOUSE": json.dumps(connection),
                "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                    {"type": "file", "log_file_path": str(tmp_path / "lineage.jsonl"), "append": True}),
                "AIRFLOW__OPENLINEAGE__NAMESPACE": "csparql-s3",
                "SPARK_LOCAL_IP": "127.0.0.1",
            })
        stack.set_up()
        assert not [name for name in stack.environment() if name.startswith("AWS_")]
        run = subprocess.run([stack.airflow, "dags", "test", "gates_on_cluster", format_instant(at)],
                             env=stack.environment(), cwd=stack.home, capture_output=True, text=True, timeout=600)
        log = run.stdout + run.stderr
        assert run.returncode == 0, log[-4000:]
        assert f"--master spark://{host}:{port}" in log  # the hook's spark-submit command line, as logged
        assert bucket.secret_key not in log  # the hook masks the credentials it passes
        applications = [app for folder in (tmp_path / "cluster" / "worker", tmp_path / "cluster" / "worker-2")
                        for app in folder.glob("app-*")]
        assert applications  # the window was evaluated by the cluster's executors
    # the lineage names the tables as OpenLineage names S3 objects: the bucket, then the table's key
    sent = [json.loads(line) for line in (tmp_path / "lineage.jsonl").read_text(encoding="utf-8").splitlines()]
    completed, = [e for e in sent if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith(".evaluate_window")]
    named = [(d["namespace"], d["name"]) for d in completed["inputs"] + completed["outputs"]]
    assert named == [("s3://lakehouse", f"dag-run/streams/{slug(STREAM)}"),
                     ("s3://lakehouse", "dag-run/results/gates_on_cluster/bindings")], named

    # the pages, served by the api-server with only the connection, read the window and the stream from S3
    stack.start(["api-server"])
    try:
        deadline = time.monotonic() + 180
        while not stack.answers() and time.monotonic() < deadline:
            time.sleep(1)
        headers = {"Authorization": f"Bearer {stack.token()}", "Accept": "application/json"}
        with httpx.Client(base_url=f"{stack.url}/csparql", headers=headers, timeout=120) as pages:
            shown = pages.get("/api/queries/gates_on_cluster")
            assert shown.status_code == 200, shown.text
            window, = [w for w in shown.json()["windows"] if w["window_end"] == format_instant(at)]
            assert (window["state"], window["rows_written"]) == ("complete", 5), window
            assert shown.json()["latest_results"]["total"] == 5
            streams = pages.get("/streams")
            assert streams.status_code == 200 and warehouse in streams.text and STREAM in streams.text, streams.text
    finally:
        stack.stop()
    for name, value in bucket.environment().items():
        monkeypatch.setenv(name, value)
    assert_windows_equal_pyoxigraph(warehouse, rows, [at], name="gates_on_cluster")
