"""A warehouse in S3 used by Spark where it is not local: a standalone cluster that shares no disk with the
driver (a master and two workers from pyspark's own ``spark-class``, each worker with a working folder of its
own, run where the driver's folders — the input files, its working folder — are hidden from them), and a Spark
Connect server. Ingests and evaluations submitted there, by ``csparql`` processes as a user runs them, give
the windows pyoxigraph gives over the same events, which are also the windows a local session gives
(``test_s3_warehouse``). The S3 server is SeaweedFS on loopback (``services.s3_server``)."""

from __future__ import annotations

import pytest

from conformance.compare import compare
from orchestration.spark_cluster import hides_folders, standalone_cluster
from orchestration.spark_connect import test_server
from services.s3_server import s3_server  # noqa: F401  (the fixtures: the server, its bucket, the variables)
from storage.test_s3_warehouse import (  # noqa: F401
    ENDS, QUERY, STREAM, aws, bucket, csparql, events, oracle, stored_windows, write_events)

from csparql.windows import format_instant

pytestmark = pytest.mark.spark


@pytest.fixture
def s3_environment(aws, monkeypatch):
    """``aws`` (the AWS variables pointed at the server), and an S3 location in use, as in a process whose
    warehouse is in S3: what the Spark processes it starts (a Connect server) are given."""
    monkeypatch.setenv("CSPARQL_OBJECT_STORAGE", "s3")
    return aws


def assert_windows_equal_pyoxigraph(warehouse: str, rows, ends) -> None:
    stored = stored_windows(warehouse)
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
