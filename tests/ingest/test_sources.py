"""Streams fed from a message bus (``csparql.ingest.sources``): a real Redis server on loopback (Debian's
``redis-server``, started here; the Kafka topic's reader has its own file against a real broker,
``test_kafka_source.py``). Events land exactly once however the consumer dies: 100k events with the consumer process
SIGKILLed again and again, a crash between the commit and the bus's acknowledgement, a crash before the commit,
two consumers racing; unreadable messages are rejected with their position and reason, and the rest land."""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from csparql.ingest import sources
from csparql.ingest.sources import (
    RedisStreamReader, SourceError, committed_positions, consume, parse_source,
)
from csparql.stack.airflow_stack import free_port
from csparql.storage import delta
from csparql.storage.warehouse import Warehouse

from ingest.test_ingest import rows_of
from ingest.test_timestamped_graphs import as_trig, events
from support import tool_missing

STREAM = "http://streams.org/bus"
KEY = "sensor-events"
EX = "http://ex.org/"
START_MS = 1_269_252_000_000  # 2010-03-22T10:00:00Z


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A redis-server on a free loopback port, without persistence; yields its port."""
    binary = shutil.which("redis-server")
    if binary is None:
        tool_missing("redis-server is not installed (apt-get install redis-server)")
    folder = tmp_path_factory.mktemp("redis")
    port = free_port()
    server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                               "no", "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    import redis

    client = redis.Redis(port=port)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise
            time.sleep(0.1)
    yield port
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture
def client(redis_server):
    import redis

    connection = redis.Redis(port=redis_server)
    connection.flushall()
    return connection


def event_line(number: int) -> bytes:
    """Event ``number`` in the project's line format: one triple, its timestamp as the fourth term."""
    return (f'<{EX}car{number}> <{EX}passes> <{EX}gate{number % 7}> "{START_MS + number * 10}" .\n').encode()


def add_events(client, count: int, start: int = 0, key: str = KEY) -> None:
    pipeline = client.pipeline(transaction=False)
    for number in range(start, start + count):
        pipeline.xadd(key, {"body": event_line(number)})
        if number % 5000 == 4999:
            pipeline.execute()
    pipeline.execute()


def cars_landed(warehouse: Warehouse) -> Counter:
    return Counter(row["s"]["value"] for row in rows_of(warehouse.stream(STREAM)))


CONSUMER = """
import sys, redis
from pathlib import Path
from csparql.ingest.sources import RedisStreamReader, consume, parse_source
from csparql.storage.warehouse import Warehouse
port, root, stream = int(sys.argv[1]), sys.argv[2], sys.argv[3]
source = parse_source("redis://redis_default/sensor-events?batch=1000")
reader = RedisStreamReader(redis.Redis(port=port), source.name)
report = consume(Warehouse(root), stream, source, reader, Path(root) / "rejected")
print("done", report.batches, report.landed, flush=True)
"""


def killed_again_and_again(command: list[str], warehouse: Warehouse, source, chosen: random.Random,
                           kills: int = 8, batches: int = 100) -> list[int]:
    """Run the consumer ``command`` until it prints ``done``, SIGKILLing its first ``kills`` runs: each once the
    table holds a batch chosen at random from its own stretch of the ``batches`` (so the kills fall all along the
    work, however fast this host is), then up to a third of a second later (reading, parsing, writing,
    committing or acknowledging the next). Returns the batch being worked on at each kill."""
    stretch = (batches - 10) // kills
    targets = [5 + stretch * kill + chosen.randrange(stretch // 2) for kill in range(kills)]
    killed_at = []
    for attempt in range(60):
        consumer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if len(killed_at) < kills and killed_once_past(consumer, warehouse, source, targets[len(killed_at)],
                                                       chosen.uniform(0, 0.33)):
            killed_at.append(committed_positions(warehouse.stream(STREAM), source)[0] + 1)
            continue
        out, err = consumer.communicate(timeout=600)
        assert consumer.returncode == 0, err
        if out.startswith("done"):
            return killed_at
    pytest.fail("the consumer never finished")


def killed_once_past(consumer: subprocess.Popen, warehouse: Warehouse, source, target: int, delay: float) -> bool:
    """SIGKILL ``consumer`` ``delay`` seconds after the stream table holds batch ``target``; False when it ended
    before that."""
    deadline = time.monotonic() + 600
    while consumer.poll() is None and time.monotonic() < deadline:
        if committed_positions(warehouse.stream(STREAM), source)[0] >= target:
            time.sleep(delay)
            consumer.send_signal(signal.SIGKILL)
            consumer.communicate()
            return True
        time.sleep(0.05)
    return False


def test_100k_events_land_exactly_once_with_the_consumer_sigkilled_again_and_again(client, redis_server, tmp_path):
    add_events(client, 100_000)
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source("redis://redis_default/sensor-events?batch=1000")
    chosen = random.Random(29)
    command = [sys.executable, "-c", CONSUMER, str(redis_server), str(warehouse.root), STREAM]
    killed_at = killed_again_and_again(command, warehouse, source, chosen)
    assert len(killed_at) == 8 and len(set(killed_at)) == 8, killed_at  # killed all along the work
    landed = cars_landed(warehouse)
    assert len(landed) == 100_000 and set(landed.values()) == {1}
    last = client.xrevrange(KEY, count=1)[0][0].decode()
    number, positions = committed_positions(warehouse.stream(STREAM), source)
    # 100 batches of 1000: a batch starts where the last commit says
    assert positions == {"id": last, "entries": 100_000} and number == 99
    group = {g["name"].decode(): g for g in client.xinfo_groups(KEY)}["csparql"]
    assert group["last-delivered-id"].decode() == last and group["lag"] == 0


def test_a_crash_between_the_commit_and_the_acknowledgement_lands_nothing_twice(client, tmp_path, monkeypatch):
    add_events(client, 300)
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source("redis://redis_default/sensor-events?batch=100")
    reader = RedisStreamReader(client, KEY)

    def crash(positions):
        raise KeyboardInterrupt("killed after the commit")

    with monkeypatch.context() as patch:
        patch.setattr(reader, "acknowledge", crash)
        with pytest.raises(KeyboardInterrupt):
            consume(warehouse, STREAM, source, reader, tmp_path / "rejected")
    assert sum(cars_landed(warehouse).values()) == 100

    def failed_commit(*args, **kwargs):
        raise OSError("killed before the commit")

    with monkeypatch.context() as patch:
        patch.setattr(sources.delta, "commit_files", failed_commit)
        with pytest.raises(OSError):
            consume(warehouse, STREAM, source, reader, tmp_path / "rejected")
    assert sum(cars_landed(warehouse).values()) == 100
    report = consume(warehouse, STREAM, source, reader, tmp_path / "rejected")
    assert (report.batches, report.landed) == (2, 200)
    landed = cars_landed(warehouse)
    assert len(landed) == 300 and set(landed.values()) == {1}
    assert consume(warehouse, STREAM, source, reader, tmp_path / "rejected").batches == 0


def test_a_second_consumer_racing_the_first_cannot_commit_the_same_batch(client, tmp_path, monkeypatch):
    add_events(client, 50)
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source("redis://redis_default/sensor-events?batch=50")
    reader = RedisStreamReader(client, KEY)
    read = reader.read
    raced = []

    def read_then_let_the_other_win(after, limit):
        messages = read(after, limit)
        if not raced:  # the other consumer reads and commits the same batch meanwhile
            raced.append(consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected"))
        return messages

    monkeypatch.setattr(reader, "read", read_then_let_the_other_win)
    with pytest.raises(delta.TransactionMoved):
        consume(warehouse, STREAM, source, reader, tmp_path / "rejected")
    assert raced[0].landed == 50
    assert set(cars_landed(warehouse).values()) == {1} and len(cars_landed(warehouse)) == 50


def test_unreadable_messages_are_rejected_with_position_and_reason_and_the_rest_land(client, tmp_path):
    made = events(seed=31, count=6)
    client.xadd(KEY, {"body": as_trig(made[:3]), "content-type": "application/trig"})
    client.xadd(KEY, {"no-body": "x"})
    client.xadd(KEY, {"body": "<a> <b> <c> .", "content-type": "text/plain"})
    client.xadd(KEY, {"body": event_line(1) + b"not a triple\n"})
    client.xadd(KEY, {"body": as_trig(made[3:]), "content-type": "application/trig"})
    only_bad = client.xadd(KEY, {"body": "<a> <b> <c> .", "content-type": "application/n-triples"})
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source("redis://redis_default/sensor-events?batch=5")
    report = consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected")
    assert report.batches == 2 and report.landed == 2 * 6 + 1 and report.rejected == 4, report
    rows = [line.split("\t") for path in report.rejects_paths for line in path.read_text().splitlines()]
    reasons = {row[0].split("#")[1]: (row[1], row[2]) for row in rows}
    ids = [entry.decode() for entry, _ in client.xrange(KEY)]
    assert reasons[ids[1]] == ("0", "the message has no body field")
    assert reasons[ids[2]] == ("0", "unknown media type 'text/plain'")
    assert reasons[ids[3]][0] == "2" and "expected" in reasons[ids[3]][1]
    assert reasons[only_bad.decode()][1].startswith("application/n-triples carries no timestamps")
    assert all(row[0].startswith("redis://redis_default/sensor-events#") for row in rows)
    # the second batch's only message was rejected: its positions are committed all the same
    assert committed_positions(warehouse.stream(STREAM), source) == (1, {"id": only_bad.decode(), "entries": 6})


@pytest.mark.parametrize("text, problem", [
    ("http://redis_default/k", "must start with redis:// or kafka://"),
    ("redis:///k", "name the Airflow connection"),
    ("redis://redis_default/", "name the Redis stream key or Kafka topic"),
    ("redis://redis_default/k?format=text/turtle", "messages must carry timestamps"),
    ("kafka://kafka_default/t?batch=0", "batch= must be a whole number"),
    ("kafka://kafka_default/t?size=3", "unknown option 'size'"),
])
def test_a_source_that_cannot_be_consumed_is_refused_with_the_reason(text, problem):
    with pytest.raises(SourceError, match=problem.replace("?", r"\?").replace("+", r"\+")):
        parse_source(text)
    spec = parse_source("kafka://kafka_default/sensor%20events?format=application/trig&batch=7")
    assert (spec.kind, spec.conn_id, spec.name, spec.media_type, spec.batch) == (
        "kafka", "kafka_default", "sensor events", "application/trig", 7)


def test_a_source_s_graphs_are_timestamped_by_the_stream_s_own_predicates(client, tmp_path):
    sosa = "http://www.w3.org/ns/sosa/resultTime"
    graph = (f"<{EX}e1> {{ <{EX}gate1> <{EX}registers> <{EX}car1> . }}\n"
             f'<{EX}e1> <{sosa}> "2010-03-22T10:00:05Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n')
    client.xadd(KEY, {"body": graph, "content-type": "application/trig"})
    source = parse_source("redis://redis_default/sensor-events")
    by_default = consume(Warehouse(tmp_path / "default"), STREAM, source, RedisStreamReader(client, KEY),
                         tmp_path / "rejected")
    assert (by_default.landed, by_default.rejected) == (0, 2)  # the graph, and the sosa triple as a plain one
    assert "it has no timestamp" in by_default.rejects_paths[0].read_text()
    by_sosa = consume(Warehouse(tmp_path / "sosa"), STREAM, source, RedisStreamReader(client, KEY),
                      tmp_path / "rejected", timestamp_predicates=[sosa])
    assert (by_sosa.landed, by_sosa.rejected, by_sosa.max_ts) == (1, 0, (START_MS + 5_000) * 1000)


def test_rejects_left_by_a_consumer_killed_before_its_commit_are_dropped_when_the_batch_is_read_again(
        client, tmp_path, monkeypatch):
    client.xadd(KEY, {"body": event_line(1) + b"not a triple\n"})
    warehouse, rejected = Warehouse(tmp_path / "warehouse"), tmp_path / "rejected"
    source = parse_source("redis://redis_default/sensor-events")

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed before the commit")

    with monkeypatch.context() as patch:  # the partial rejects stay, as after a SIGKILL
        patch.setattr(sources.delta, "commit_files", killed)
        patch.setattr(sources.Path, "unlink", lambda self, missing_ok=False: None)
        with pytest.raises(KeyboardInterrupt):
            consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), rejected)
    assert [p.name.endswith(".partial") for p in rejected.iterdir()] == [True]
    report = consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), rejected)
    assert (report.landed, report.rejected) == (1, 1)
    assert [p.name for p in rejected.iterdir()] == [report.rejects_paths[0].name]
    assert "not a triple" in report.rejects_paths[0].read_text()


def test_entries_trimmed_before_they_were_read_are_reported_as_a_gap_and_the_rest_land(client, tmp_path):
    add_events(client, 100)
    client.xtrim(KEY, maxlen=0, approximate=False)  # trimmed before the consumer ever read them
    add_events(client, 5, start=100)
    oldest = client.xrange(KEY, count=1)[0][0].decode()
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source("redis://redis_default/sensor-events?batch=3")
    report = consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected")
    assert (report.messages, report.landed, report.lost) == (5, 5, 100)
    assert [gap.to_dict() for gap in report.gaps] == [{"after": None, "before": oldest, "count": 100}]
    assert report.warnings == [f"redis://redis_default/sensor-events: 100 messages lost: the stream was trimmed since "
                               f"the stream's start before they were read (the oldest entry still there is {oldest})"]
    history = delta.open_table(warehouse.stream(STREAM)).history()
    recorded = [json.loads(c["csparql.source_gap"]) for c in history if "csparql.source_gap" in c]
    assert recorded == [[{"after": None, "before": oldest, "count": 100}]]  # in the batch's commit, once
    assert sorted(cars_landed(warehouse)) == [f"{EX}car{n}" for n in range(100, 105)]

    last = client.xrevrange(KEY, count=1)[0][0].decode()
    add_events(client, 40, start=105)
    client.xtrim(KEY, maxlen=0, approximate=False)  # after the consumer's position this time, and nothing left after it
    again = consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected")
    assert (again.messages, again.lost, again.gaps[0].after, again.gaps[0].before) == (0, 40, last, None)
    assert "40 messages lost: the stream was trimmed after entry " + last in again.warnings[0]
    add_events(client, 2, start=145)
    after = consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected")
    assert (after.landed, after.gaps) == (2, [])  # the gap was stepped over once, not reported again


def test_a_stream_capped_by_maxlen_behind_its_consumer_reports_no_gap(client, tmp_path):
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source("redis://redis_default/sensor-events?batch=7")
    for round in range(4):
        for number in range(round * 30, round * 30 + 30):
            client.xadd(KEY, {"body": event_line(number)}, maxlen=30, approximate=False)  # trims only what was read
        report = consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected")
        assert (report.messages, report.gaps, report.warnings) == (30, [], [])
    assert len(cars_landed(warehouse)) == 120


def test_with_on_gap_fail_a_gap_stops_the_consume_before_anything_lands(client, tmp_path):
    from csparql.ingest.sources import SourceGap

    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source("redis://redis_default/sensor-events")
    add_events(client, 10)
    consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected", on_gap="fail")
    before = committed_positions(warehouse.stream(STREAM), source)
    add_events(client, 20, start=10)
    client.xtrim(KEY, maxlen=5, approximate=False)
    with pytest.raises(SourceGap) as refused:
        consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected", on_gap="fail")
    message = str(refused.value)
    assert "\n" not in message and "15 messages lost" in message and "nothing landed" in message, message
    assert committed_positions(warehouse.stream(STREAM), source) == before and len(cars_landed(warehouse)) == 10
    report = consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected")
    assert (report.landed, report.lost) == (5, 15)


def test_a_stream_deleted_and_created_again_behind_its_consumer_is_reported_as_a_gap_of_unknown_size(client, tmp_path):
    warehouse = Warehouse(tmp_path / "warehouse")
    source = parse_source("redis://redis_default/sensor-events")
    add_events(client, 10)
    consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected")
    client.delete(KEY)  # with whatever had arrived since the last consume
    add_events(client, 3, start=10)
    report = consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected")
    assert (report.landed, report.lost, len(report.gaps)) == (3, None, 1)
    assert "some messages lost: the stream was trimmed, or deleted and created again, after entry" in report.warnings[0]
    add_events(client, 2, start=13)
    assert consume(warehouse, STREAM, source, RedisStreamReader(client, KEY), tmp_path / "rejected").gaps == []
