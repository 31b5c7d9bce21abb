"""A warehouse in S3: the command line and Spark Connect against a real S3-compatible server on loopback
(SeaweedFS, ``services.s3_server``), answers checked against pyoxigraph over the same events.

Each command is a ``csparql`` process of its own, as a user runs it, with ``CSPARQL_WAREHOUSE=s3://…`` and the
standard AWS variables: its local Spark session fetches hadoop-aws on first use (Maven Central, then the Ivy
cache)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from rdflib import URIRef

from conformance import reference
from conformance.compare import compare, from_engine
from services.s3_server import s3_server  # noqa: F401  (the fixture)
from storage.delta_spark import DeltaSpark, plain

from csparql.storage.aws_variables import s3_settings
from csparql.storage.stored import StoredResults
from csparql.runtime.object_storage import spark_s3_settings
from csparql.runtime.packages import DELTA_SPARK, HADOOP_AWS
from csparql.storage import delta
from csparql.storage.location import ObjectPath, location
from csparql.storage.warehouse import Warehouse, slug
from csparql.core.windows import format_instant, parse_instant

EX = "http://example.org/"
XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"
STREAM = EX + "gates"
START = parse_instant("2026-01-05T10:00:00Z")
MINUTE = 60_000_000
QUERY = f"""REGISTER QUERY GatePassages AS
SELECT ?gate (COUNT(?car) AS ?passages)
FROM STREAM <{STREAM}> [RANGE 10m STEP 5m]
WHERE {{ ?car <{EX}passes> ?gate }}
GROUP BY ?gate
"""
ENDS = [START + k * 5 * MINUTE for k in range(2, 7)]  # 10:10 … 10:30


def events(count: int = 600, first: int = 0) -> list[tuple[str, str, int]]:
    """(car, gate, µs): a car every 3 s over 30 minutes from ``START``."""
    return [(f"car{n}", f"gate{n % 5}", START + n * 3_000_000) for n in range(first, first + count)]


def write_events(path: Path, rows) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for car, gate, micros in rows:
            out.write(f'<{EX}{car}> <{EX}passes> <{EX}{gate}> "{format_instant(micros)}"^^<{XSD_DATETIME}> .\n')
    return path


def oracle(rows, end: int):
    triples = [(URIRef(EX + car), URIRef(EX + "passes"), URIRef(EX + gate), micros) for car, gate, micros in rows]
    return reference.evaluate(reference.Case("s3", QUERY, {URIRef(STREAM): triples}, {}, end))


@pytest.fixture(scope="module")
def bucket(s3_server):  # noqa: F811 - the fixture imported above
    s3_server.create_bucket("lakehouse")
    return s3_server


@pytest.fixture
def aws(bucket, monkeypatch):
    """This process's AWS variables pointed at the server (what the in-process reads below use)."""
    for name, value in bucket.environment().items():
        monkeypatch.setenv(name, value)
    return bucket


def csparql(work: Path, server, warehouse: str, *arguments: str, timeout: float = 300, check: bool = True):
    env = {**os.environ, **server.environment(), "CSPARQL_WAREHOUSE": warehouse, "CSPARQL_REGISTRY": str(work / "q"),
           "CSPARQL_SHUFFLE_PARTITIONS": "2", "CSPARQL_DRIVER_MEMORY": "1g"}
    for name in ("SPARK_REMOTE", "CSPARQL_SPARK_MASTER", "PYSPARK_GATEWAY_PORT"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "csparql.cli", *arguments], cwd=work, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert done.returncode == 0, f"csparql {' '.join(arguments)}: {done.returncode}\n{done.stderr[-4000:]}"
    return done


def stored_windows(warehouse: str, name: str = "GatePassages") -> dict[int, object]:
    return {end: from_engine(result) for _, end, result in StoredResults(Warehouse(warehouse), name).windows()}


def test_uris_the_product_cannot_serve_are_refused_in_one_line_and_nothing_is_written(tmp_path):
    for uri, said in [("gs://bucket/warehouse", "the scheme 'gs:' is not supported"),
                      ("abfss://c@a.dfs.core.windows.net/w", "the scheme 'abfss:' is not supported"),
                      ("s3:/bucket/warehouse", "names no bucket"), ("s3://", "names no bucket")]:
        env = {**os.environ, "CSPARQL_WAREHOUSE": uri}
        done = subprocess.run([sys.executable, "-m", "csparql.cli", "results", "Anything"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, (uri, done.stderr)
        assert said in done.stderr and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # no folder named s3: or gs: in the working directory


def test_a_missing_bucket_bad_credentials_and_an_unreachable_endpoint_are_one_line_each(tmp_path, bucket):
    warehouse = "s3://lakehouse/refusals"
    missing = csparql(tmp_path, bucket, "s3://no-such-bucket/w", "results", "GatePassages", check=False)
    assert missing.returncode == 1 and "the bucket 'no-such-bucket' does not exist" in missing.stderr
    env = {**os.environ, **bucket.environment(), "CSPARQL_WAREHOUSE": warehouse, "AWS_SECRET_ACCESS_KEY": "wrong"}
    refused = subprocess.run([sys.executable, "-m", "csparql.cli", "results", "GatePassages"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "the credentials were refused" in refused.stderr
    env["AWS_SECRET_ACCESS_KEY"], env["AWS_ENDPOINT_URL"] = bucket.secret_key, "http://127.0.0.1:9"
    started = time.monotonic()
    unreachable = subprocess.run([sys.executable, "-m", "csparql.cli", "results", "GatePassages"], cwd=tmp_path,
                                 env=env, capture_output=True, text=True, timeout=120)
    assert unreachable.returncode == 1 and "the endpoint does not answer" in unreachable.stderr
    assert time.monotonic() - started < 60
    for done in (missing, refused, unreachable):
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_ingest_replay_results_and_sql_on_an_s3_warehouse_equal_pyoxigraph(tmp_path, aws):
    warehouse = "s3://lakehouse/cli"
    rows = events()
    query = tmp_path / "gates.rq"
    query.write_text(QUERY)
    landed = csparql(tmp_path, aws, warehouse, "ingest", "--stream", STREAM, str(write_events(tmp_path / "a.tnq", rows)))
    assert "600 triples landed" in landed.stdout + landed.stderr
    csparql(tmp_path, aws, warehouse, "replay", str(query), "--from", format_instant(ENDS[0]),
            "--to", format_instant(ENDS[-1]))
    stored = stored_windows(warehouse)
    assert sorted(stored) == ENDS
    for end in ENDS:
        assert not compare(stored[end], oracle(rows, end)), format_instant(end)
    # everything is in the bucket, nothing in a local folder
    root = location(warehouse)
    assert isinstance(root, ObjectPath) and (root / "results" / "GatePassages" / "bindings" / "_delta_log").is_dir()
    assert not any(p.name.startswith("s3") for p in tmp_path.iterdir())
    shown = csparql(tmp_path, aws, warehouse, "results", "GatePassages", "--format", "csv").stdout.splitlines()
    assert shown[0] == "window_start,window_end,gate,passages" and len(shown) == 1 + 5 * len(ENDS)
    sql = csparql(tmp_path, aws, warehouse, "sql", "--format", "json",
                  "SELECT window_end, gate, passages FROM gatepassages ORDER BY window_end, gate").stdout
    answered = [json.loads(line) for line in sql.splitlines() if line.strip()]
    assert len(answered) == 5 * len(ENDS)
    runs = csparql(tmp_path, aws, warehouse, "sql", "--format", "json", "SELECT status FROM runs").stdout
    assert Counter(json.loads(line)["status"] for line in runs.splitlines() if line.strip()) == {"succeeded": len(ENDS)}
    # delta-spark, given the same endpoint, reads the result table and the stream with csparql's rows and commits
    reader = DeltaSpark({**spark_s3_settings(s3_settings()), "spark.jars.packages": f"{DELTA_SPARK},{HADOOP_AWS}"})
    try:
        for table in (root / "results" / "GatePassages" / "bindings", root / "streams" / slug(STREAM)):
            theirs = reader.read(str(table).replace("s3://", "s3a://", 1))
            ours = delta.open_table(table)
            assert Counter(json.dumps(row, sort_keys=True) for row in theirs["rows"]) == Counter(
                json.dumps(plain(row), sort_keys=True) for row in ours.to_pyarrow_table().to_pylist()), table
            assert [c["version"] for c in theirs["history"]] == list(range(ours.version() + 1)), table
    finally:
        reader.close()


def test_late_events_revise_windows_and_a_replay_killed_mid_commit_leaves_every_window_once(tmp_path, aws):
    warehouse = "s3://lakehouse/revisions"
    query = tmp_path / "gates.rq"
    query.write_text(QUERY)
    on_time = events()
    csparql(tmp_path, aws, warehouse, "ingest", "--stream", STREAM, str(write_events(tmp_path / "a.tnq", on_time)))
    # a replay killed while it writes, then run again: every window once
    env = {**os.environ, **aws.environment(), "CSPARQL_WAREHOUSE": warehouse, "CSPARQL_DRIVER_MEMORY": "1g"}
    replay = subprocess.Popen([sys.executable, "-m", "csparql.cli", "replay", str(query), "--from",
                               format_instant(ENDS[0]), "--to", format_instant(ENDS[-1])], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = location(warehouse) / "results" / "GatePassages" / "bindings"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (results / "_delta_log" / f"{1:020d}.json").exists():
        time.sleep(0.2)
    replay.send_signal(signal.SIGKILL)
    replay.wait()
    csparql(tmp_path, aws, warehouse, "replay", str(query), "--from", format_instant(ENDS[0]),
            "--to", format_instant(ENDS[-1]))
    current = delta.open_table(results).to_pyarrow_table().to_pylist()
    kept = Counter(row["window_end"] for row in current)
    assert len(kept) == len(ENDS) and set(kept.values()) == {5}, kept  # five gates a window, each window once
    revision_before = {row["revision"] or 0 for row in current if row["window_end"].timestamp() * 1e6 == ENDS[0]}
    # late events for the first windows land; running those windows again writes revision 1, equal to pyoxigraph
    late = [(f"late{n}", "gate0", ENDS[0] - 60_000_000 - n * 1_000_000) for n in range(7)]
    csparql(tmp_path, aws, warehouse, "ingest", "--stream", STREAM, str(write_events(tmp_path / "late.tnq", late)))
    csparql(tmp_path, aws, warehouse, "run", str(query), "--at", format_instant(ENDS[0]))
    stored = stored_windows(warehouse)
    assert not compare(stored[ENDS[0]], oracle(on_time + late, ENDS[0]))
    current = delta.open_table(results).to_pyarrow_table().to_pylist()
    assert {row["revision"] for row in current if row["window_end"].timestamp() * 1e6 == ENDS[0]} == {
        max(revision_before) + 1}
    # the earlier revision stays readable: Delta time travel on the bucket
    assert len(delta.open_table(results).history()) >= 3
    # the same windows combined from panes stored in the bucket
    csparql(tmp_path, aws, warehouse, "replay", str(query), "--name", "GatePanes", "--panes", "always",
            "--from", format_instant(ENDS[0]), "--to", format_instant(ENDS[-1]))
    assert [p.name for p in Warehouse(warehouse).panes("GatePanes").iterdir()], "no pane table in the bucket"
    from_panes = stored_windows(warehouse, "GatePanes")
    assert sorted(from_panes) == ENDS
    for end in ENDS:
        assert not compare(from_panes[end], oracle(on_time + late, end)), format_instant(end)
    # a forced vacuum of the idle warehouse deletes the files replaced since, and every window reads as before
    before = {name: stored_windows(warehouse, name) for name in ("GatePassages", "GatePanes")}
    vacuumed = csparql(tmp_path, aws, warehouse, "vacuum", "--retain", "0h", "--force")
    assert "deleted 0 file(s)" not in vacuumed.stdout.splitlines()[-1], vacuumed.stdout
    assert {name: stored_windows(warehouse, name) for name in before} == before


def test_the_stack_given_an_s3_warehouse_keeps_it_and_its_sample_files_land_from_local_folders(tmp_path, aws,
                                                                                                 monkeypatch):
    from csparql.cli.orchestration import _settings
    from csparql.stack.embedded import EmbeddedStack

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CSPARQL_LANDING", raising=False)
    settings = _settings("s3://lakehouse/stack")  # what csparql stack --warehouse s3://lakehouse/stack reads
    assert settings.warehouse.remote and str(settings.warehouse.root) == "s3://lakehouse/stack"
    assert settings.landing == tmp_path / "landing"
    stream = "http://streams.org/citytollgates.trdf"
    files, first = EmbeddedStack(settings).drop_samples({stream})
    assert first and files.streams[stream].is_relative_to(tmp_path / "samples")
    assert [p.name for p in settings.landing_folder(stream).iterdir()] == [files.streams[stream].name]
    assert not any(p.name.startswith("s3") for p in tmp_path.iterdir())


_TRIGGER = """
import asyncio, json, sys
from csparql.deploy.plan import StreamInput, WindowWait
from csparql.orchestration.triggers import WindowCompleteTrigger

warehouse, stream, at = sys.argv[1:]
wait = WindowWait(None, (StreamInput(stream, 0),)).to_dict()
trigger = WindowCompleteTrigger(warehouse, wait, at, poll_seconds=0.2)

async def first_event():
    async for event in trigger.run():
        return event.payload

print("EVENT " + json.dumps(asyncio.run(asyncio.wait_for(first_event(), 120))), flush=True)
"""


@pytest.mark.airflow
def test_the_triggerer_reaches_an_s3_warehouse_through_the_aws_connection_it_is_configured_with(tmp_path, aws):
    warehouse = "s3://lakehouse/trigger"
    rows = events(count=20)
    csparql(tmp_path, aws, warehouse, "ingest", "--stream", STREAM, str(write_events(tmp_path / "a.tnq", rows)))
    connection = {"conn_type": "aws", "login": aws.access_key, "password": aws.secret_key,
                  "extra": {"endpoint_url": aws.endpoint, "region_name": "us-east-1"}}
    env = {name: value for name, value in os.environ.items() if not name.startswith(("AWS_", "CSPARQL_"))}
    env.update({"AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CSPARQL__AWS_CONN_ID": "lakehouse",
                "AIRFLOW_CONN_LAKEHOUSE": json.dumps(connection)})  # the triggerer's only way to the bucket
    done = subprocess.run([sys.executable, "-c", _TRIGGER, warehouse, STREAM, format_instant(rows[-1][2])],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    events_seen = [json.loads(line[6:]) for line in done.stdout.splitlines() if line.startswith("EVENT ")]
    assert events_seen == [{"status": "complete", "window_end": rows[-1][2]}], done.stderr[-3000:]
