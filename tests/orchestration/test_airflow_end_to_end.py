"""End to end through a real Airflow: scheduler, DAG processor, triggerer and api-server started on loopback
(SQLite, LocalExecutor), driven through the REST API as a data engineer would drive it from the UI.

One stack serves the module (starting it takes about a minute). The windows evaluated by Airflow are
compared with ``csparql replay`` of the same range, run as a separate process over a copy of the warehouse.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from csparql import samples
from csparql.deployment import Settings, ingest_dag_id, register
from csparql.engine.ingest import ingest_stream, load_static
from csparql.engine.stored import StoredResults
from csparql.orchestration.stack import AirflowStack, free_port
from csparql.storage import delta
from csparql.storage.warehouse import Warehouse
from csparql.storage.watermarks import read_watermarks
from csparql.windows import format_instant

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLES = REPOSITORY / "examples" / "queries"
MILAN = samples.STREAMS["milantollgates"]
MINUTE = 60_000_000
CONSUMER = """REGISTER QUERY EnteringCarsPerDistrict AS
PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT ?district ?passages
FROM STREAM <urn:csparql:stream:CarsEnteringCityCenterPerDistrict> [RANGE 5m TUMBLING]
WHERE { ?district t:has-entering-cars ?passages . }
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("e2e")
    files = samples.write_samples(root / "samples", hours=1)
    dags = root / "dags"
    (dags / "queries").mkdir(parents=True)
    shutil.copy(REPOSITORY / "dags" / "csparql_streams.py", dags)
    environment = {
        "CSPARQL_REGISTRY": str(dags / "queries"),
        "CSPARQL_WAREHOUSE": str(root / "warehouse"),
        "CSPARQL_ALLOWED_LATENESS": "0s",
        "CSPARQL_WAIT_TIMEOUT": "1d",  # the scheduled runs of today's (empty) windows just wait
        "CSPARQL_POLL_INTERVAL": "2s",
    }
    settings = Settings.from_environment(environment)
    load_static(spark, settings.warehouse, None, [files.graphs[None]], replace=True)
    shutil.copy(EXAMPLES / "02-cars-per-tollgate.rq", root / "tollgates.rq")
    register(root / "tollgates.rq", settings, name="tollgates")
    register(EXAMPLES / "07-register-stream-construct.rq", settings, name="districts")
    (root / "consumer.rq").write_text(CONSUMER, encoding="utf-8")
    register(root / "consumer.rq", settings, name="district_consumer")
    stack = AirflowStack(home=root / "airflow", dags=dags, settings_environment=environment, port=free_port(),
                         pool_slots=2)
    stack.set_up()
    stack.start()
    try:
        stack.wait_until_healthy()
        ingest_dag = ingest_dag_id(MILAN)
        stack.wait_for_dags(["tollgates", "districts", "district_consumer", ingest_dag])
        yield {"root": root, "files": files, "settings": settings, "stack": stack, "ingest_dag": ingest_dag,
               "spark": spark}
    finally:
        stack.stop()


def rows_by_window(warehouse: Warehouse, name: str) -> dict[int, Counter]:
    return {end: Counter(tuple(zip(map(str, result.vars), map(str, row), strict=True)) for row in result.rows)
            for _, end, result in StoredResults(warehouse, name).windows()}


def test_a_dropped_file_is_ingested_by_the_stream_dag_and_advances_the_watermark(world):
    stack, settings, files = world["stack"], world["settings"], world["files"]
    landing = settings.landing_folder(MILAN)
    landing.mkdir(parents=True, exist_ok=True)
    shutil.copy(files.streams[MILAN], landing / "milan.nq")
    (landing / "broken.tsv").write_text("not\tN-Triples\n", encoding="utf-8")
    stack.unpause(world["ingest_dag"])
    stack.api("POST", f"dags/{world['ingest_dag']}/dagRuns", {"logical_date": None})
    deadline = time.monotonic() + 300
    while (landing / "milan.nq").exists() and time.monotonic() < deadline:
        time.sleep(3)
    stack.wait_for_runs(world["ingest_dag"], 1)
    assert (landing / "done" / "milan.nq").exists()
    assert (landing / "rejected" / "broken.tsv").exists() and (landing / "rejected" / "broken.tsv.reason").read_text()
    marks = read_watermarks(settings.warehouse)
    assert files.start < marks[MILAN] <= files.end


def test_a_backfill_gives_the_same_windows_as_replay_and_running_it_again_keeps_one_copy(world):
    stack, settings, files = world["stack"], world["settings"], world["files"]
    assert read_watermarks(settings.warehouse).get(MILAN), "the ingest test lands the stream first"
    start, end = format_instant(files.start + 30 * MINUTE), format_instant(files.start + 32 * MINUTE)
    stack.unpause("tollgates")
    stack.backfill("tollgates", start, end)
    stack.wait_for_runs("tollgates", 3, run_type="backfill")
    stack.wait_for_backfills("tollgates")
    airflow_rows = rows_by_window(settings.warehouse, "tollgates")
    assert sorted(airflow_rows) == [files.start + m * MINUTE for m in (30, 31, 32)]
    assert all(sum(rows.values()) > 0 for rows in airflow_rows.values())

    replayed = world["root"] / "replayed"
    shutil.copytree(settings.warehouse.root, replayed)
    shutil.rmtree(replayed / "results")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("csparql")), "replay", str(world["root"] / "tollgates.rq"),
         "--from", start, "--to", end, "--name", "tollgates", "--warehouse", str(replayed)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert rows_by_window(Warehouse(replayed), "tollgates") == airflow_rows

    # A triple arrives late, for the window ending at 32 (already evaluated): it is stored, the window's
    # results stay as they were until the window is run again, and running it again replaces them.
    late_ntriples = world["root"] / "late.nq"
    late_at = files.start + 31 * MINUTE + 30_000_000
    late_ntriples.write_text(
        f'<{samples.C}T-100> <{samples.T}registers> <{samples.C}LATE001> "{format_instant(late_at)}"'
        f'^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n', encoding="utf-8")
    ingest_stream(world["spark"], settings.warehouse, MILAN, [late_ntriples])
    assert rows_by_window(settings.warehouse, "tollgates") == airflow_rows

    stack.backfill("tollgates", start, end, reprocess="completed")
    runs_table = settings.warehouse.runs
    deadline = time.monotonic() + 600
    while _succeeded_runs(runs_table, "tollgates") < 6 and time.monotonic() < deadline:
        time.sleep(3)
    assert _succeeded_runs(runs_table, "tollgates") == 6  # every window evaluated twice …
    rerun = rows_by_window(settings.warehouse, "tollgates")
    assert {end: rows for end, rows in rerun.items() if end != files.start + 32 * MINUTE} == {
        end: rows for end, rows in airflow_rows.items() if end != files.start + 32 * MINUTE}  # … stored once
    before, after = (_passages(rows[files.start + 32 * MINUTE]) for rows in (airflow_rows, rerun))
    assert after == {**before, f"{samples.C}T-100": before.get(f"{samples.C}T-100", 0) + 1}  # one more car


def _passages(rows: Counter) -> dict[str, int]:
    return {dict(row)["tollgate"]: int(dict(row)["passages"]) for row in rows}


def _succeeded_runs(path, query: str) -> int:
    from csparql.storage.statistics import read_table

    rows = read_table(path).to_pylist()
    return sum(1 for r in rows if r["query"] == query and r["status"] == "succeeded")


def test_a_chained_query_evaluates_its_window_only_after_the_producer_wrote_it(world):
    stack, settings, files = world["stack"], world["settings"], world["files"]
    window_end = files.start + 55 * MINUTE  # the stream's watermark, its greatest timestamp, is past it
    instant = format_instant(window_end)
    for dag in ("districts", "district_consumer"):
        stack.unpause(dag)
    stack.backfill("district_consumer", instant, instant)  # the consumer first: it must wait
    deadline = time.monotonic() + 180
    state = None
    while time.monotonic() < deadline:
        runs = stack.dag_runs("district_consumer")
        if runs:
            tasks = stack.api("GET", f"dags/district_consumer/dagRuns/{runs[0]['dag_run_id']}/taskInstances")
            state = {t["task_id"]: t["state"] for t in tasks["task_instances"]}
            if state.get("await_window") == "deferred":
                break
        time.sleep(2)
    assert state and state.get("await_window") == "deferred", state
    assert not delta.exists(settings.warehouse.results("district_consumer", "bindings"))

    stack.backfill("districts", instant, instant)
    producer_run, = stack.wait_for_runs("districts", 1, run_type="backfill")
    consumer_run, = stack.wait_for_runs("district_consumer", 1, run_type="backfill")
    produced = _task(stack, "districts", producer_run, "evaluate_window")
    consumed = _task(stack, "district_consumer", consumer_run, "evaluate_window")
    assert consumed["start_date"] > produced["end_date"]
    windows = rows_by_window(settings.warehouse, "district_consumer")
    assert list(windows) == [window_end] and sum(windows[window_end].values()) > 0
    from csparql.storage.watermarks import latest_run

    assert latest_run(settings.warehouse, "district_consumer", window_end)["complete"] is True


def _task(stack: AirflowStack, dag: str, run: dict, task: str) -> dict:
    return stack.api("GET", f"dags/{dag}/dagRuns/{run['dag_run_id']}/taskInstances/{task}")
