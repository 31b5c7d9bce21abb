"""A stream fed from a Redis stream or a Kafka topic, through Airflow: the ``sources`` setting gives its ingestion
DAG a task that consumes the source through the provider's connection (a real redis-server on loopback, the
connection from ``AIRFLOW_CONN_REDIS_DEFAULT``; a real Kafka broker, ``AIRFLOW_CONN_KAFKA_DEFAULT``), landing
each event once; a source or setting that cannot be used, or a broker that does not answer, is refused with a
message that names it."""

from __future__ import annotations

import json

import pytest

from csparql.deploy.settings import Settings

from csparql.stack.airflow_stack import free_port

from ingest.test_kafka_source import event_line, group_offsets, kafka_broker, new_topic, produce  # noqa: F401
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


def kafka_connection(bootstrap: str) -> str:
    """An Airflow connection of the Kafka provider, as ``AIRFLOW_CONN_KAFKA_DEFAULT`` gives it."""
    return json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap, "group.id": "csparql",
                                                       "enable.auto.commit": False, "log_level": 0}})


def test_the_ingestion_dag_of_a_stream_with_a_kafka_source_consumes_it_through_the_kafka_connection(
        kafka_broker, tmp_path, monkeypatch):  # noqa: F811
    from airflow.exceptions import AirflowException

    from csparql.deploy.plan import ingest_dag_id
    from csparql.orchestration.dags import stream_ingestion_dags

    topic = new_topic(kafka_broker, partitions=2)
    (tmp_path / "registry").mkdir()
    settings = settings_with(tmp_path, json.dumps({STREAM: f"kafka://kafka_default/{topic}?batch=100"}))
    consume = stream_ingestion_dags(settings)[ingest_dag_id(STREAM)].get_task("consume_source")
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", kafka_connection(kafka_broker.bootstrap))
    produce(kafka_broker, topic, ((n, event_line(n)) for n in range(250)), partition_of=lambda n: n % 2)
    result = consume.execute({})
    assert (result["batches"], result["messages"], result["landed"], result["rejected"]) == (3, 250, 250, 0)
    assert result["positions"] == {"0": 125, "1": 125}
    assert consume.lineage.inputs[0].namespace == f"kafka://{kafka_broker.bootstrap}"
    produce(kafka_broker, topic, ((n, event_line(n)) for n in range(250, 280)), partition_of=lambda n: n % 2)
    assert consume.execute({})["landed"] == 30
    assert consume.execute({})["batches"] == 0
    landed = cars_landed(settings.warehouse)
    assert len(landed) == 280 and set(landed.values()) == {1}
    assert group_offsets(kafka_broker, topic, 2) == {"0": 140, "1": 140}

    nobody = f"127.0.0.1:{free_port()}"  # no broker listens there
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", kafka_connection(nobody))
    with pytest.raises(AirflowException) as refused:
        consume.execute({})
    assert str(refused.value).startswith(f"kafka://{nobody}: the Kafka broker does not answer (")
    assert "\n" not in str(refused.value)


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
