"""What an ingestion task tells Airflow when it ends: the stream's Asset event only from a run that landed
triples, and OpenLineage datasets that name a message-bus source (a real redis-server on loopback, real Delta
tables, a real local Spark for the landing folder).

The events are read as the Task SDK's task runner builds them when a task succeeds: its own functions turn the
task's outlets into the asset profiles it sends (``_build_asset_profiles``, one event per Asset profile) and the
run's outlet-event accessors into their extras (``_serialize_outlet_events``). The task itself runs as the runner
runs it — on the copy ``prepare_for_execution`` makes — but not under a supervisor: that needs Airflow's API
server and metadata database, which these tests do not start (``test_airflow_end_to_end.py`` does)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from csparql.storage.revisions import table_version

from ingest.test_sources import KEY, STREAM, add_events, client, redis_server  # noqa: F401 (fixtures)
from orchestration.test_message_sources import SOURCE, settings_with
from orchestration.test_operators import CITY, CITY_ASSET, a_dag, landed  # noqa: F401 (fixture)

pytestmark = pytest.mark.airflow


def run_as_the_task_runner_does(task) -> tuple[dict, list[str], list[dict], object]:
    """Execute ``task`` as a run does; returns its value, the Assets that get an event, the events' extras and
    the copy that ran."""
    from airflow.sdk.execution_time.context import OutletEventAccessors
    from airflow.sdk.execution_time.task_runner import _build_asset_profiles, _serialize_outlet_events

    running = task.prepare_for_execution()
    context = {"outlet_events": OutletEventAccessors()}
    value = running.execute(context)
    evented = [profile.uri for profile in _build_asset_profiles(running.outlets) if profile.type == "Asset"]
    extras = [event["extra"] for event in _serialize_outlet_events(context["outlet_events"]) if event.get("extra")]
    return value, evented, extras, running


def test_a_consume_gives_the_stream_an_asset_event_only_when_it_landed_and_names_the_redis_stream_in_lineage(
        client, redis_server, tmp_path, monkeypatch):  # noqa: F811
    from csparql.deploy.plan import ingest_dag_id
    from csparql.orchestration.assets import stream_asset
    from csparql.orchestration.dags import stream_ingestion_dags

    (tmp_path / "registry").mkdir()
    settings = settings_with(tmp_path, json.dumps({STREAM: SOURCE}))
    monkeypatch.setenv("AIRFLOW_CONN_REDIS_DEFAULT", f"redis://127.0.0.1:{redis_server}/0")
    consume = stream_ingestion_dags(settings)[ingest_dag_id(STREAM)].get_task("consume_source")
    asset = stream_asset(STREAM).uri

    value, evented, extras, _ = run_as_the_task_runner_does(consume)  # nothing on the bus yet
    assert value["batches"] == 0 and evented == [] and extras == []
    add_events(client, 150)
    value, evented, extras, running = run_as_the_task_runner_does(consume)
    assert value["landed"] == 150 and evented == [asset]
    assert extras == [{"stream": STREAM, "triples": 150, "version": value["versions"][-1]}]
    lineage = running.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [(f"redis://127.0.0.1:{redis_server}", KEY)]
    [output] = lineage.outputs
    assert (output.namespace, output.name) == ("file", str(settings.warehouse.stream(STREAM)))
    assert output.facets["version"].datasetVersion == str(value["versions"][-1])
    value, evented, _, _ = run_as_the_task_runner_does(consume)  # the minute after: nothing new
    assert value["batches"] == 0 and evented == []


def test_an_ingest_gives_the_stream_an_asset_event_only_when_a_file_landed(landed):  # noqa: F811
    from csparql.orchestration.operators import CsparqlIngestOperator

    settings = landed["settings"]
    with a_dag("user_ingest_events"):
        ingest = CsparqlIngestOperator(task_id="ingest", stream=CITY, warehouse=settings.warehouse.root)
    first, evented, extras, _ = run_as_the_task_runner_does(ingest)  # the sample file waiting in the folder
    assert first["landed_files"] == ["city.nq"] and evented == [CITY_ASSET]
    assert extras == [{"stream": CITY, "triples": first["landed"],
                       "version": table_version(settings.warehouse.stream(CITY))}] and first["landed"] > 0
    value, evented, extras, _ = run_as_the_task_runner_does(ingest)  # nothing waiting any more
    assert value["files"] == 0 and evented == [] and extras == []
    (landed["landing"] / "more.nq").write_text(
        '<http://e/car1> <http://e/passes> <http://e/gate1> "2010-03-22T10:59:00Z"^^'
        '<http://www.w3.org/2001/XMLSchema#dateTime> .\n', encoding="utf-8")
    value, evented, extras, _ = run_as_the_task_runner_does(ingest)
    assert value["landed_files"] == ["more.nq"] and evented == [CITY_ASSET] and extras[0]["triples"] == 1


def test_a_consume_after_the_stream_was_trimmed_warns_in_its_log_or_fails_in_one_line_with_on_gap_fail(
        client, redis_server, tmp_path, monkeypatch):  # noqa: F811
    import structlog
    from airflow.exceptions import AirflowException

    from csparql.deploy.plan import ingest_dag_id
    from csparql.orchestration.dags import stream_ingestion_dags
    from csparql.orchestration.operators import CsparqlConsumeOperator

    from ingest.test_sources import cars_landed

    (tmp_path / "registry").mkdir()
    monkeypatch.setenv("AIRFLOW_CONN_REDIS_DEFAULT", f"redis://127.0.0.1:{redis_server}/0")
    add_events(client, 100)
    client.xtrim(KEY, maxlen=0, approximate=False)  # before the consumer read them
    add_events(client, 5, start=100)
    strict = dataclasses.replace(settings_with(tmp_path, json.dumps({STREAM: SOURCE})), on_gap="fail")
    failing = stream_ingestion_dags(strict)[ingest_dag_id(STREAM)].get_task("consume_source")
    with pytest.raises(AirflowException) as refused:
        failing.execute({})
    message = str(refused.value)
    assert "\n" not in message and message.startswith(
        "redis://redis_default/sensor-events: 100 messages lost: the stream was trimmed since the stream's start "
        "before they were read") and "nothing landed" in message and "on_gap=warn" in message, message
    assert not strict.warehouse.stream(STREAM).exists()

    task = CsparqlConsumeOperator(task_id="consume", stream=STREAM, source=SOURCE, settings=strict, on_gap="warn")
    with structlog.testing.capture_logs() as logged:  # the task's log (Airflow's loggers are structlog's)
        value = task.execute({})
    assert (value["messages"], value["landed"], value["lost"]) == (5, 5, 100)
    assert value["gaps"][0]["count"] == 100 and len(cars_landed(strict.warehouse)) == 5
    warned = [entry["event"] for entry in logged if entry["log_level"] == "warning" and "lost" in entry["event"]]
    assert len(warned) == 1 and warned[0].startswith("redis://redis_default/sensor-events: 100 messages lost")


def test_an_on_gap_setting_that_is_neither_warn_nor_fail_is_refused_by_name(tmp_path):
    from csparql.deploy.settings import Settings

    with pytest.raises(ValueError, match=r"^CSPARQL_ON_GAP='skip': use warn or fail$"):
        Settings.from_environment({"CSPARQL_WAREHOUSE": str(tmp_path), "CSPARQL_ON_GAP": "skip"})
    assert Settings.from_environment({"CSPARQL_ON_GAP": "fail"}, base=tmp_path).on_gap == "fail"
