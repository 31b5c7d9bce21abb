"""A stream fed from a Kafka topic (``csparql.ingest.sources.KafkaTopicReader``) against a real Apache Kafka 4.x
broker: one KRaft node on loopback, started for the module (``services.kafka_broker``; its jars come from Maven
Central on first use). Events land exactly once however the consumer dies: 100k events with the consumer
process SIGKILLed again and again, a crash between the commit and the group's offset commit, the broker
restarted in the middle of a batch; unreadable records are rejected naming the topic, partition and offset;
offsets deleted before they were read (``delete_records``, as retention does) are a gap; a broker that does not
answer is one line naming it, within a bounded time."""

from __future__ import annotations

import json
import random
import sys
import time
import uuid
from collections import Counter

import pytest

from csparql.ingest.sources import (
    KafkaTopicReader, SourceError, SourceGap, committed_positions, consume, parse_source,
)
from csparql.storage import delta
from csparql.storage.tables import SOURCE, SOURCE_POSITIONS
from csparql.storage.warehouse import Warehouse

from ingest.test_sources import EX, STREAM, cars_landed, event_line, killed_again_and_again
from ingest.test_timestamped_graphs import as_trig, events
from services.kafka_broker import kafka_broker_or_skip

GROUP = "csparql"


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory):
    """A Kafka broker on loopback for the module's tests (``services.kafka_broker``)."""
    broker = kafka_broker_or_skip(tmp_path_factory.mktemp("kafka"))
    yield broker
    broker.stop()


def quiet(config: dict) -> dict:
    """A client's settings with librdkafka's own log off (its connection retries would fill the test output)."""
    return {**config, "log_level": 0}


def new_topic(broker, partitions: int = 1) -> str:
    """A new topic with ``partitions`` partitions, each test its own."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"cars-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(quiet({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    return topic


def produce(broker, topic: str, values, partition_of=lambda number: 0, headers=None) -> None:
    """``values`` (number, bytes or None) to ``topic``, each to the partition ``partition_of`` its number gives,
    acknowledged by the broker."""
    from confluent_kafka import Producer

    producer = Producer(quiet({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "enable.idempotence": True}))
    for number, value in values:
        while True:
            try:
                producer.produce(topic, value, partition=partition_of(number),
                                 headers=headers(number) if headers else None)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def new_consumer(broker):
    from confluent_kafka import Consumer

    return Consumer(quiet({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "enable.auto.commit": False}))


def reader_of(broker, topic: str, consumer=None) -> KafkaTopicReader:
    return KafkaTopicReader(consumer or new_consumer(broker), topic, namespace=f"kafka://{broker.bootstrap}")


def ends_of(broker, topic: str, partitions: int) -> dict[str, int]:
    """Each partition's high watermark: the offset after its last record."""
    from confluent_kafka import TopicPartition

    consumer = new_consumer(broker)
    try:
        return {str(p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def group_offsets(broker, topic: str, partitions: int) -> dict[str, int]:
    """The offsets the consumer group ``csparql`` committed for ``topic`` (the broker's bookkeeping)."""
    from confluent_kafka import TopicPartition

    consumer = new_consumer(broker)
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {str(tp.partition): tp.offset for tp in committed}
    finally:
        consumer.close()


CONSUMER = """
import sys
from pathlib import Path
from confluent_kafka import Consumer
from csparql.ingest.sources import KafkaTopicReader, consume, parse_source
from csparql.storage.warehouse import Warehouse
bootstrap, topic, root, stream = sys.argv[1:5]
source = parse_source(f"kafka://kafka_default/{topic}?batch=1000")
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "csparql", "enable.auto.commit": False,
                     "log_level": 0})
reader = KafkaTopicReader(consumer, topic, namespace=f"kafka://{bootstrap}")
report = consume(Warehouse(root), stream, source, reader, Path(root) / "rejected")
print("done", report.batches, report.landed, flush=True)
"""


def test_100k_events_land_exactly_once_with_the_consumer_sigkilled_again_and_again(kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, partitions=3)
    produce(kafka_broker, topic, ((n, event_line(n)) for n in range(100_000)), partition_of=lambda n: n % 3)
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source(f"kafka://kafka_default/{topic}?batch=1000")
    chosen = random.Random(31)
    killed_at = killed_again_and_again([sys.executable, "-c", CONSUMER, kafka_broker.bootstrap, topic,
                                        str(warehouse.root), STREAM], warehouse, source, chosen)
    assert len(killed_at) == 8 and len(set(killed_at)) == 8, killed_at  # killed all along the work
    landed = cars_landed(warehouse)
    assert len(landed) == 100_000 and set(landed.values()) == {1}
    ends = ends_of(kafka_broker, topic, 3)
    assert ends == {"0": 33_334, "1": 33_333, "2": 33_333}
    number, positions = committed_positions(warehouse.stream(STREAM), source)
    assert positions == ends and number == 99  # 100 batches of 1000, each started where the last commit said
    table = delta.open_table(warehouse.stream(STREAM))
    assert table.transaction_version(source.application) == 99  # Delta's application transaction, by batch
    commits = [c for c in reversed(table.history()) if c.get(SOURCE) == source.id]
    recorded = [json.loads(c[SOURCE_POSITIONS]) for c in commits]
    assert len(recorded) == 100 and recorded[-1] == ends
    read = [sum(after.values()) - sum(before.values()) for before, after in zip([{}] + recorded, recorded)]
    assert read == [1000] * 100  # each commit's positions are where its batch ended, none skipped or read twice
    assert group_offsets(kafka_broker, topic, 3) == ends  # the group's offsets followed the last commit


def test_a_crash_between_the_commit_and_the_group_s_offset_commit_lands_nothing_twice(
        kafka_broker, tmp_path, monkeypatch):
    topic = new_topic(kafka_broker, partitions=2)
    produce(kafka_broker, topic, ((n, event_line(n)) for n in range(45)), partition_of=lambda n: int(n >= 30))
    reader = reader_of(kafka_broker, topic)
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source(f"kafka://kafka_default/{topic}?batch=20")

    def killed(positions):
        raise KeyboardInterrupt("killed after the commit")

    with monkeypatch.context() as patch:
        patch.setattr(reader, "acknowledge", killed)
        with pytest.raises(KeyboardInterrupt):
            consume(warehouse, STREAM, source, reader, tmp_path / "rejected")
    number, positions = committed_positions(warehouse.stream(STREAM), source)
    assert number == 0 and sum(positions.values()) == 20 and sum(cars_landed(warehouse).values()) == 20
    assert group_offsets(kafka_broker, topic, 2) == {"0": -1001, "1": -1001}  # none committed to the group yet
    produce(kafka_broker, topic, ((n, event_line(n)) for n in range(45, 50)), partition_of=lambda n: 1)
    report = consume(warehouse, STREAM, source, reader_of(kafka_broker, topic), tmp_path / "rejected")
    assert (report.batches, report.landed) == (2, 30)
    landed = cars_landed(warehouse)
    assert len(landed) == 50 and set(landed.values()) == {1}
    assert committed_positions(warehouse.stream(STREAM), source)[1] == {"0": 30, "1": 20}
    assert group_offsets(kafka_broker, topic, 2) == {"0": 30, "1": 20}
    assert consume(warehouse, STREAM, source, reader_of(kafka_broker, topic), tmp_path / "rejected").batches == 0


def test_unreadable_records_are_rejected_naming_topic_partition_and_offset_and_the_rest_land(kafka_broker, tmp_path):
    topic = new_topic(kafka_broker)
    made = events(seed=31, count=6)
    trig = {"content-type": "application/trig"}
    records = [(as_trig(made[:3]), trig), (None, None), (b"<a> <b> <c> .", {"content-type": "text/plain"}),
               (event_line(1) + b"not a triple\n", None), (as_trig(made[3:]), trig),
               (b"<a> <b> <c> .", {"content-type": "application/n-triples"})]
    produce(kafka_broker, topic, ((n, value) for n, (value, _) in enumerate(records)),
            headers=lambda n: list((records[n][1] or {}).items()))
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source(f"kafka://kafka_default/{topic}?batch=5")
    started = time.monotonic()
    report = consume(warehouse, STREAM, source, reader_of(kafka_broker, topic), tmp_path / "rejected")
    assert time.monotonic() - started < 8  # the end of the topic is known, not waited for
    assert report.batches == 2 and report.landed == 2 * 6 + 1 and report.rejected == 4, report
    rows = [line.split("\t") for path in report.rejects_paths for line in path.read_text().splitlines()]
    reasons = {row[0]: (row[1], row[2]) for row in rows}
    where = f"kafka://kafka_default/{topic}#0:"
    assert reasons[where + "1"] == ("0", "the record has no value")
    assert reasons[where + "2"] == ("0", "unknown media type 'text/plain'")
    assert reasons[where + "3"][0] == "2" and "expected" in reasons[where + "3"][1]
    assert reasons[where + "5"][1].startswith("application/n-triples carries no timestamps")
    assert len(rows) == 4
    # the second batch's only record was rejected: its position is committed all the same
    assert committed_positions(warehouse.stream(STREAM), source) == (1, {"0": 6})
    subjects = Counter(s for _, _, triples in made for s, _, _ in triples) + Counter({f"{EX}car1": 1})
    assert cars_landed(warehouse) == subjects  # the two graphs' triples and the good line, each once


def test_the_broker_restarted_in_the_middle_of_a_batch_loses_and_doubles_nothing(kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, partitions=2)
    produce(kafka_broker, topic, ((n, event_line(n)) for n in range(3000)), partition_of=lambda n: n % 2)
    consumer = new_consumer(kafka_broker)
    reader = reader_of(kafka_broker, topic, consumer)
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source(f"kafka://kafka_default/{topic}?batch=1000")
    fetches = []

    class Restarting:
        """The consumer, whose broker is restarted after the first fetch of the second batch."""

        def __getattr__(self, name):
            return getattr(consumer, name)

        def consume(self, num_messages, timeout):
            records = consumer.consume(num_messages=min(num_messages, 300), timeout=timeout)
            fetches.append(len(records))
            if committed_positions(warehouse.stream(STREAM), source)[0] == 0 and not restarted:
                restarted.append(True)
                kafka_broker.restart()  # the records read so far are in memory only
            return records

    restarted = []
    reader.consumer = Restarting()
    report = consume(warehouse, STREAM, source, reader, tmp_path / "rejected")
    assert restarted and report.messages == 3000, (report, fetches)
    landed = cars_landed(warehouse)
    assert len(landed) == 3000 and set(landed.values()) == {1}
    assert committed_positions(warehouse.stream(STREAM), source)[1] == {"0": 1500, "1": 1500}
    assert group_offsets(kafka_broker, topic, 2) == {"0": 1500, "1": 1500}


def test_a_broker_that_does_not_answer_is_one_line_naming_it_within_a_bounded_time(kafka_broker, tmp_path):
    topic = new_topic(kafka_broker)
    produce(kafka_broker, topic, ((n, event_line(n)) for n in range(10)))
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source(f"kafka://kafka_default/{topic}")
    reader = reader_of(kafka_broker, topic)
    assert consume(warehouse, STREAM, source, reader, tmp_path / "rejected").landed == 10
    produce(kafka_broker, topic, ((n, event_line(n)) for n in range(10, 15)))
    kafka_broker.stop()
    try:
        started = time.monotonic()
        with pytest.raises(SourceError) as refused:
            consume(warehouse, STREAM, source, reader, tmp_path / "rejected")
        took = time.monotonic() - started
        message = str(refused.value)
        assert "\n" not in message and f"kafka://{kafka_broker.bootstrap}" in message, message
        assert "does not answer" in message and took < 30, (message, took)
        assert committed_positions(warehouse.stream(STREAM), source) == (0, {"0": 10})  # nothing moved
    finally:
        kafka_broker.start()
    report = consume(warehouse, STREAM, source, reader, tmp_path / "rejected")
    assert report.landed == 5 and set(cars_landed(warehouse).values()) == {1} and len(cars_landed(warehouse)) == 15


def test_offsets_deleted_before_they_were_read_are_reported_as_a_gap(kafka_broker, tmp_path):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = new_topic(kafka_broker, partitions=2)
    produce(kafka_broker, topic, ((n, event_line(n)) for n in range(20)), partition_of=lambda n: int(n >= 10))
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source(f"kafka://kafka_default/{topic}")
    assert consume(warehouse, STREAM, source, reader_of(kafka_broker, topic), tmp_path / "rejected").gaps == []
    produce(kafka_broker, topic, ((n, event_line(n)) for n in range(20, 30)))
    admin = AdminClient(quiet({"bootstrap.servers": kafka_broker.bootstrap}))

    def delete_before(partition: int, offset: int) -> None:  # what retention does to a partition's oldest records
        done = admin.delete_records([TopicPartition(topic, partition, offset)])
        assert next(iter(done.values())).result(timeout=30).low_watermark == offset

    delete_before(0, 16)  # offsets 10..15 of partition 0 were never read
    with pytest.raises(SourceGap, match=rf"kafka://kafka_default/{topic}: partition 0: 6 messages lost \(offsets 10 "
                                        r"to 15\): the topic's retention deleted them before they were read; nothing "
                                        r"landed"):
        consume(warehouse, STREAM, source, reader_of(kafka_broker, topic), tmp_path / "rejected", on_gap="fail")
    assert committed_positions(warehouse.stream(STREAM), source) == (0, {"0": 10, "1": 10})
    report = consume(warehouse, STREAM, source, reader_of(kafka_broker, topic), tmp_path / "rejected")
    assert (report.landed, report.lost, [g.to_dict() for g in report.gaps]) == (
        4, 6, [{"after": "10", "before": "16", "count": 6, "partition": "0"}])
    assert sorted(cars_landed(warehouse)) == sorted(f"{EX}car{n}" for n in [*range(20), *range(26, 30)])
    history = delta.open_table(warehouse.stream(STREAM)).history(1)[0]
    assert json.loads(history["csparql.source_gap"])[0]["count"] == 6
    delete_before(1, 10)  # at the source's position: nothing it had not read
    assert consume(warehouse, STREAM, source, reader_of(kafka_broker, topic), tmp_path / "rejected").gaps == []
    assert Counter(cars_landed(warehouse).values()) == Counter({1: 24})


def test_the_broker_s_cluster_ids_are_never_read_as_an_option_by_the_storage_tool():
    """One URL-safe base64 UUID in 64 starts with ``-``, which ``kafka-storage format -t`` took for an option:
    the broker's storage then failed to format, once in a while, for every test using it."""
    import base64

    from services.kafka_broker import cluster_id

    identifiers = [cluster_id() for _ in range(2000)]
    assert not [identifier for identifier in identifiers if identifier.startswith("-")]
    assert {len(base64.urlsafe_b64decode(identifier + "==")) for identifier in identifiers} == {16}
    assert len(set(identifiers)) == len(identifiers)
