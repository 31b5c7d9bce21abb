"""A warehouse in S3 used by Spark where it is not local: a standalone cluster that shares no disk with the
driver (a master and two workers from pyspark's own ``spark-class``, each worker with a working folder of its
own, run where the driver's folders — the input files, its working folder — are hidden from them), and a Spark
Connect server. Ingests and evaluations submitted there, by ``csparql`` processes as a user runs them, give
the windows pyoxigraph gives over the same events, which are also the windows a local session gives
(``test_s3_warehouse``); so does a query's DAG run by Airflow, whose operator spark-submits the window to the
cluster, and the pages of an api-server show it. One cluster, which knows nothing of the bucket, serves the
module, and the events one ingest on it landed serve its replay and its DAG run. The S3 server is SeaweedFS on
loopback (``services.s3_server``)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class Cluster:
    """The module's standalone cluster: its master URL, its workers' working folders and the folder only the
    driver sees (hidden from the workers)."""

    master: str
    workers: tuple[Path, ...]
    driver: Path

    def driver_folder(self, name: str) -> Path:
        """A working folder of the driver's, which the workers cannot see."""
        folder = self.driver / name
        folder.mkdir(parents=True)
        return folder

    def applications(self) -> dict[Path, set[str]]:
        """Per worker, the applications its executors ran (their folders in its working folder)."""
        return {worker: {app.name for app in worker.glob("app-*")} for worker in self.workers}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, bucket):
    """A master and two workers sharing no disk with the driver, and knowing nothing of the bucket: no AWS
    variable in their environment, so the endpoint and credentials reach the executors through each
    submitted application's settings alone."""
    if not hides_folders():
        pytest.fail("the workers cannot be run apart from the driver's folders: unshare --mount needs root")
    root = tmp_path_factory.mktemp("s3-cluster")
    driver = root / "driver"  # what only the driver sees: the input files, its working folders
    driver.mkdir()
    unaware = {name: value for name, value in os.environ.items()
               if name not in bucket.environment() and name != "CSPARQL_OBJECT_STORAGE"}
    with standalone_cluster(root / "spark", workers=2, hidden=[driver], environment=unaware) as master:
        yield Cluster(master, (root / "spark" / "worker", root / "spark" / "worker-2"), driver)


@dataclass(frozen=True)
class Landed:
    """The events an ingest on the cluster landed in the warehouse, and the applications that ran it."""

    warehouse: str
    rows: list
    work: Path
    applications: dict[Path, set[str]]


@pytest.fixture(scope="module")
def landed(cluster, bucket):
    """600 passages landed in ``s3://lakehouse/cluster`` by ``csparql ingest --master`` on the cluster."""
    work = cluster.driver_folder("ingest")
    warehouse = "s3://lakehouse/cluster"
    rows = events()
    inputs = write_events(work / "passages.tnq", rows)
    done = csparql(work, bucket, warehouse, "ingest", "--master", cluster.master, "--stream", STREAM, str(inputs),
                   timeout=600)
    assert "600 triples landed" in done.stdout + done.stderr
    return Landed(warehouse, rows, work, cluster.applications())


def assert_windows_equal_pyoxigraph(warehouse: str, rows, ends, name: str = "GatePassages") -> None:
    stored = stored_windows(warehouse, name)
    assert sorted(stored) == ends
    for end in ends:
        assert not compare(stored[end], oracle(rows, end)), format_instant(end)


def test_an_ingest_and_a_replay_on_a_cluster_sharing_no_disk_equal_pyoxigraph(cluster, landed, s3_environment):
    work = cluster.driver_folder("replay")
    query = work / "gates.rq"
    query.write_text(QUERY)
    csparql(work, s3_environment, landed.warehouse, "replay", str(query), "--master", cluster.master,
            "--from", format_instant(ENDS[0]), "--to", format_instant(ENDS[-1]), timeout=600)
    # both workers ran executors of both applications, each in its own folder
    replayed = cluster.applications()
    for worker, ingest in landed.applications.items():
        assert len(ingest) == 1 and len(replayed[worker] - ingest) == 1, (worker, ingest, replayed[worker])
    assert_windows_equal_pyoxigraph(landed.warehouse, landed.rows, ENDS)
    for folder, inputs in ((landed.work, "passages.tnq"), (work, "gates.rq")):  # nothing of the warehouse there
        assert not [p for p in folder.iterdir() if p.name not in (inputs, "q")], sorted(folder.iterdir())


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
        tmp_path, cluster, landed, bucket, monkeypatch):
    """The query's real DAG run by ``airflow dags test`` with ``CSPARQL_SPARK=standalone``: the operator
    spark-submits the window to the cluster. The Airflow processes know the bucket only through the ``aws``
    connection ``[csparql] aws_conn_id`` names, and the cluster's processes not at all (no AWS variables in
    their environment, the driver's folders hidden): the endpoint and credentials reach the executors through
    the submitted application's settings alone. Then the api-server's pages show the window from the bucket."""
    for name in bucket.environment():
        monkeypatch.delenv(name, raising=False)
    driver = cluster.driver_folder("dag-run")
    (driver / "dags" / "queries").mkdir(parents=True)
    warehouse = landed.warehouse
    query = driver / "dags" / "queries" / "gates_on_cluster.rq"
    query.write_text(QUERY)
    write_loader(query)
    at = ENDS[1]
    connection = {"conn_type": "aws", "login": bucket.access_key, "password": bucket.secret_key,
                  "extra": {"endpoint_url": bucket.endpoint, "region_name": "us-east-1"}}
    before = cluster.applications()
    host, port = cluster.master.removeprefix("spark://").split(":")
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
    after = cluster.applications()
    assert any(after[worker] - before[worker] for worker in cluster.workers)  # the cluster's executors ran it
    # the lineage names the tables as OpenLineage names S3 objects: the bucket, then the table's key
    sent = [json.loads(line) for line in (tmp_path / "lineage.jsonl").read_text(encoding="utf-8").splitlines()]
    completed, = [e for e in sent if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith(".evaluate_window")]
    named = [(d["namespace"], d["name"]) for d in completed["inputs"] + completed["outputs"]]
    assert named == [("s3://lakehouse", f"cluster/streams/{slug(STREAM)}"),
                     ("s3://lakehouse", "cluster/results/gates_on_cluster/bindings")], named

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
    assert_windows_equal_pyoxigraph(warehouse, landed.rows, [at], name="gates_on_cluster")
