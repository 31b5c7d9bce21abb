"""A stream fed from a Redis stream, through Airflow: the ``sources`` setting gives its ingestion DAG a task that
consumes the source through the Redis provider's connection (a real redis-server on loopback, the connection
from ``AIRFLOW_CONN_REDIS_DEFAULT``), landing each event once; a source or setting that cannot be used is
refused with a message that names it."""

from __future__ import annotations

import json

import pytest

from csparql.deploy.settings import Settings

from ingest.test_sources import KEY, STREAM, add_events, cars_landed, client, redis_server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.airflow

SOURCE = "redis://redis_default/sensor-events?batch=100"


def settings_with(tmp_path, sources: str) -> Settings:
    return Settings.from_environment({"CSPARQL_REGISTRY": str(tmp_path / "registry"),
                                      "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse"), "CSPARQL_SOURCES": sources})


def test_the_ingestion_dag_of_a_stream_with_a_source_consumes_it_through_the_redis_connection(
        client, redis_server, tmp_path, monkeypatch):  # noqa: F811
    from airflow.serialization.serialized_objects import DagSerialization

    from csparql.deploy.plan import ingest_dag_id
    from csparql.orchestration.dags import stream_ingestion_dags

    (tmp_path / "registry").mkdir()
    settings = settings_with(tmp_path, json.dumps({STREAM: SOURCE}))
    dag = stream_ingestion_dags(settings)[ingest_dag_id(STREAM)]  # no query reads the stream yet
    assert sorted(dag.task_ids) == ["consume_source", "ingest_landed_files"]
    DagSerialization.to_dict(dag)  # as the DAG processor stores it
    monkeypatch.setenv("AIRFLOW_CONN_REDIS_DEFAULT", f"redis://127.0.0.1:{redis_server}/0")
    add_events(client, 250)
    consume = dag.get_task("consume_source")
    result = consume.execute({})
    assert (result["batches"], result["messages"], result["landed"], result["rejected"]) == (3, 250, 250, 0)
    assert result["positions"] == {"id": client.xrevrange(KEY, count=1)[0][0].decode(), "entries": 250}
    add_events(client, 30, start=250)
    assert consume.execute({})["landed"] == 30
    assert consume.execute({})["batches"] == 0
    landed = cars_landed(settings.warehouse)
    assert len(landed) == 280 and set(landed.values()) == {1}


def test_a_source_or_a_sources_setting_that_cannot_be_used_is_refused_by_name(tmp_path):
    from airflow.exceptions import AirflowException

    from csparql.deploy.plan import ingest_dag_id
    from csparql.orchestration.dags import stream_ingestion_dags

    (tmp_path / "registry").mkdir()
    with pytest.raises(ValueError, match=r"CSPARQL_SOURCES='\[\]': give a JSON object from stream IRIs to sources"):
        settings_with(tmp_path, "[]")
    with pytest.raises(ValueError, match="CSPARQL_SOURCES='{': not JSON"):
        settings_with(tmp_path, "{")
    settings = settings_with(tmp_path, json.dumps({STREAM: "rabbitmq://conn/queue"}))
    task = stream_ingestion_dags(settings)[ingest_dag_id(STREAM)].get_task("consume_source")
    with pytest.raises(AirflowException, match="source 'rabbitmq://conn/queue': it must start with redis:// or kafka://"):
        task.execute({})
