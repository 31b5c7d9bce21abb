"""Streams fed from a message bus: a Redis stream or a Kafka topic, consumed in batches, each batch landed in one
commit of the stream's table exactly once.

A source is written ``redis://CONN/KEY`` or ``kafka://CONN/TOPIC`` (``SourceSpec``): ``CONN`` is the Airflow
connection to the bus (``redis_default``, ``kafka_default``), then the Redis stream's key or the topic, and as
query parameters the media type of messages that do not say theirs (``?format=application/trig``; default
``application/n-quads``, which also reads the project's line format) and the most messages per batch
(``?batch=10000``).

A message is one document: a Redis entry's ``body`` field (its ``content-type`` field, if any, names its media
type), a Kafka record's value (its ``content-type`` header likewise). Each message's blank nodes are its own.
Messages must carry their timestamps (TriG, N-Quads, JSON-LD, TriX, or the line format); a message that cannot
be read (no body, a media type without timestamps or unknown) is rejected like a malformed line, with its
position and the reason.

Exactly once. Each batch is one commit that records, beside the triples, where the next batch starts
(``SOURCE_POSITIONS``: the last Redis entry id, or each Kafka partition's next offset) and Delta's application
transaction ``csparql-source:<source>`` numbered by batch (``csparql.storage.delta.commit_files``). A batch is
read from the positions of the latest commit, so a consumer killed before its commit reads the batch again,
and one killed after it does not; a second consumer racing the first cannot commit the same batch number
(``TransactionMoved``). The bus's own bookkeeping (the Redis consumer group ``csparql``'s last delivered id,
the Kafka consumer group's committed offsets) follows each commit, for its monitoring tools; it is never read
back. A batch whose every message is rejected still commits its positions, with no triple.

Gaps. Messages can be gone before they were read: a Redis stream trimmed (``XTRIM``, ``MAXLEN``) past the
consumer's position, a Kafka partition whose retention deleted offsets below it. A read finds them (``Gap``):
for Redis, from ``XINFO STREAM`` read in the same transaction as the entries (Redis 7 or later: how many entries
the stream was ever added, how many it holds, its oldest entry) and the count of entries up to the position,
which the positions carry (``entries``); for Kafka, from each partition's low watermark (its log start offset).
A gap is reported — how many messages, after which position, and the oldest one still there — as a warning
and in the batch's commit (``SOURCE_GAP``), and what remains lands (``on_gap="warn"``, the default); with
``on_gap="fail"`` the consume stops with ``SourceGap`` before anything lands, and the position stays where it
was. Entries deleted one by one with ``XDEL`` after the position, while older ones are still there, are not
detected.

``consume`` lands batches until the source has nothing new (or ``max_batches``); ``RedisStreamReader`` and
``KafkaTopicReader`` are the only code that differs between the two buses.
"""

from __future__ import annotations

import bisect
import json
import re
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from csparql.ingest.ingest import IngestReport, InputError, ensure_stream_table, ingest_stream
from csparql.ingest.inputs import FORMAT_EXTENSIONS, MEDIA_TYPES, media_type_format
from csparql.ingest.parsers.graphs import lines_name_graphs
from csparql.ingest.parsers.rejects import escape_field, unescape_field
from csparql.storage import delta, schema
from csparql.storage.tables import INPUTS, SOURCE, SOURCE_GAP, SOURCE_POSITIONS
from csparql.storage.vocabulary import DEFAULT_TIMESTAMP_PREDICATES
from csparql.storage.warehouse import Warehouse, slug

KINDS = ("redis", "kafka")
DEFAULT_MEDIA_TYPE = "application/n-quads"
DEFAULT_BATCH = 10_000
CONSUMER_GROUP = "csparql"
TIMESTAMPED_FORMATS = ("trig", "nquads", "json-ld", "trix")
"""The formats whose documents carry their triples' timestamps: the only ones a message may have."""
BODY_FIELD, TYPE_FIELD = b"body", b"content-type"

GAP_POLICIES = ("warn", "fail")
"""What a consume does when messages were gone before it read them (``Gap``): report them and land what
remains, or stop before anything lands."""

Positions = dict[str, object]
"""Where a source's next batch starts: ``{"id": "<redis entry id>", "entries": <entries the stream was added up
to it>}`` or ``{"<partition>": <next offset>}``."""


class SourceError(Exception):
    """A source cannot be consumed (its spec, or a log that no longer says where its last batch ended)."""


@dataclass(frozen=True)
class Gap:
    """Messages a source lost before they were read: ``count`` of them (None when it cannot be known), after
    the position ``after`` (None: from the source's start), up to the oldest message still there, ``before``
    (None: none is left); ``partition`` for a Kafka topic."""

    after: str | None
    before: str | None
    count: int | None
    partition: str | None = None

    def describe(self, source: str) -> str:
        """One line saying what was lost and where."""
        many = "some messages" if self.count is None else f"{self.count} message{'s' if self.count != 1 else ''}"
        if self.partition is not None:
            first, last = int(self.after or 0), int(self.before) - 1
            offsets = f"offset {first}" if first == last else f"offsets {first} to {last}"
            what = "it before it was" if self.count == 1 else "them before they were"
            return (f"{source}: partition {self.partition}: {many} lost ({offsets}): the topic's retention "
                    f"deleted {what} read")
        where = f"after entry {self.after}" if self.after else "since the stream's start"
        left = f"the oldest entry still there is {self.before}" if self.before else "the stream holds no entry"
        how = "trimmed" if self.count is not None else "trimmed, or deleted and created again,"
        read = "it was" if self.count == 1 else "they were"
        return f"{source}: {many} lost: the stream was {how} {where} before {read} read ({left})"

    def to_dict(self) -> dict:
        record = {"after": self.after, "before": self.before, "count": self.count}
        return {**record, "partition": self.partition} if self.partition is not None else record


class SourceGap(SourceError):
    """Messages were gone before they were read, and the consume was told to fail (``on_gap="fail"``)."""


@dataclass(frozen=True)
class SourceSpec:
    """A message-bus source of a stream (see the module docstring)."""

    kind: str
    conn_id: str
    name: str
    media_type: str = DEFAULT_MEDIA_TYPE
    batch: int = DEFAULT_BATCH

    @property
    def id(self) -> str:
        """How commits name the source: ``kind://conn/name``."""
        return f"{self.kind}://{self.conn_id}/{self.name}"

    @property
    def application(self) -> str:
        """The Delta application transaction id of the source's batches."""
        return f"csparql-source:{self.id}"


def parse_source(text: str) -> SourceSpec:
    """The source ``text`` names; ``SourceError`` saying what is wrong otherwise."""
    parts = urlsplit(text.strip())
    problem = None
    if parts.scheme not in KINDS:
        problem = f"it must start with {' or '.join(k + '://' for k in KINDS)}"
    elif not re.fullmatch(r"[A-Za-z0-9_.-]+", parts.netloc or ""):
        problem = "name the Airflow connection after :// (e.g. redis_default)"
    elif not unquote(parts.path.lstrip("/")):
        problem = "name the Redis stream key or Kafka topic after the connection"
    if problem:
        raise SourceError(f"source {text!r}: {problem}")
    options = {key: values[-1] for key, values in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = set(options) - {"format", "batch"}
    if unknown:
        raise SourceError(f"source {text!r}: unknown option {sorted(unknown)[0]!r} (use format= and batch=)")
    media_type = options.get("format", DEFAULT_MEDIA_TYPE)
    if media_type_format(media_type) not in TIMESTAMPED_FORMATS:
        accepted = ", ".join(t for t, f in MEDIA_TYPES.items() if f in TIMESTAMPED_FORMATS)
        raise SourceError(f"source {text!r}: format={media_type!r}: messages must carry timestamps: use one of "
                          f"{accepted}")
    try:
        batch = int(options.get("batch", DEFAULT_BATCH))
    except ValueError:
        batch = 0
    if batch < 1:
        raise SourceError(f"source {text!r}: batch= must be a whole number of messages, at least 1")
    return SourceSpec(parts.scheme, parts.netloc, unquote(parts.path.lstrip("/")), media_type, batch)


@dataclass(frozen=True)
class Message:
    """One message: its position in the source (for rejects and logs), its body, its media type if it says."""

    position: str
    body: bytes | None
    media_type: str | None = None


class MessageReader(Protocol):
    """The bus-specific part of a source."""

    def read(self, after: Positions | None, limit: int) -> tuple[list[Message], Positions, list[Gap]]:
        """Up to ``limit`` messages after ``after`` (None: from the start), the positions after them, and the
        messages that were gone between ``after`` and the first message still there (``Gap``): the positions
        step over those."""

    def acknowledge(self, positions: Positions) -> None:
        """Tell the bus the messages up to ``positions`` are consumed (its bookkeeping only)."""


class RedisStreamReader:
    """Reads a Redis stream with ``XRANGE`` after the committed entry id, and ``XINFO STREAM`` in the same
    transaction to find entries trimmed before they were read; acknowledges by moving the consumer group
    ``csparql``'s last delivered id (created on first use), so ``XINFO GROUPS`` shows the lag. ``namespace``
    names the server as lineage does: ``redis://host:port``."""

    def __init__(self, client, key: str, group: str = CONSUMER_GROUP):
        self.client, self.key, self.group = client, key, group
        server = client.connection_pool.connection_kwargs
        self.namespace = f"redis://{server.get('host', 'localhost')}:{server.get('port', 6379)}"

    def read(self, after: Positions | None, limit: int) -> tuple[list[Message], Positions, list[Gap]]:
        import redis

        last = after.get("id") if after else None
        counted = (after or {}).get("entries", None if last else 0)  # entries added up to ``last``
        transaction = self.client.pipeline(transaction=True)
        transaction.xinfo_stream(self.key)
        transaction.xrange(self.key, min=f"({last}" if last else "-", max="+", count=limit)
        info, entries = transaction.execute(raise_on_error=False)
        if isinstance(entries, Exception):
            raise entries
        if isinstance(info, redis.ResponseError):  # no such key: nothing was ever added
            info = {}
        elif isinstance(info, Exception):
            raise info
        messages = []
        for entry_id, fields in entries:
            media_type = fields.get(TYPE_FIELD)
            messages.append(Message(_text(entry_id), fields.get(BODY_FIELD),
                                    _text(media_type) if media_type is not None else None))
        added, length = info.get("entries-added"), info.get("length", 0)
        first = info.get("first-entry")
        first = _text(first[0]) if first else None
        gaps = []
        passed = first is None or last is None or _entry_id(first) > _entry_id(last)
        if added is not None and counted is not None and added < counted:
            # fewer entries ever added than were behind the position: the key was deleted and created again
            gaps.append(Gap(last, first, None))
            counted = None
        elif added is not None and counted is not None and passed:
            # nothing at or before ``last`` is left, so every entry gone past the ``counted`` ones was never read
            lost = added - length - counted
            if lost > 0:
                gaps.append(Gap(last, first, lost))
        missing = sum(gap.count or 0 for gap in gaps)
        if messages:
            positions = {"id": messages[-1].position}
        elif gaps:  # the stream was trimmed up to its newest entry: the next batch starts after it
            positions = {"id": _text(info["last-generated-id"])}
        else:
            positions = {"id": last} if last else {}
        if added is not None and len(messages) < limit and positions:
            positions["entries"] = added  # the batch read to the stream's end: every entry added is behind it
        elif counted is not None and positions:
            positions["entries"] = counted + missing + len(messages)
        else:
            positions.pop("entries", None)
        return messages, positions, gaps

    def acknowledge(self, positions: Positions) -> None:
        import redis

        last = positions.get("id")
        if not last:
            return
        try:
            self.client.xgroup_create(self.key, self.group, id=last, mkstream=True)
        except redis.ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise
            self.client.xgroup_setid(self.key, self.group, id=last)


def _entry_id(text: str) -> tuple[int, int]:
    """A Redis entry id as the pair of numbers it orders by."""
    milliseconds, _, sequence = text.partition("-")
    return int(milliseconds), int(sequence or 0)


class KafkaTopicReader:
    """Reads every partition of a Kafka topic from the committed offsets (assigned, not subscribed: the offsets
    in the stream's log decide), up to each partition's high watermark when the read starts, so that a read
    ends as soon as it has caught up rather than after waiting for more; acknowledges by committing the offsets
    to the consumer's group. ``topic_partition`` builds confluent-kafka's ``TopicPartition`` (its own by
    default). Offsets below a partition's low watermark (``get_watermark_offsets``) that the source had not
    read are a ``Gap``. ``namespace`` names the cluster as lineage does, ``kafka://bootstrap-server``, and so
    does the one line a broker that does not answer within ``timeout`` seconds gives (``SourceError``)."""

    def __init__(self, consumer, topic: str, timeout: float = 5.0,
                 topic_partition: Callable | None = None, beginning: int | None = None, namespace: str = "kafka"):
        if topic_partition is None:
            from confluent_kafka import OFFSET_BEGINNING, TopicPartition

            topic_partition, beginning = TopicPartition, OFFSET_BEGINNING
        self.consumer, self.topic, self.timeout, self.namespace = consumer, topic, timeout, namespace
        self.topic_partition, self.beginning = topic_partition, -2 if beginning is None else beginning

    def read(self, after: Positions | None, limit: int) -> tuple[list[Message], Positions, list[Gap]]:
        try:
            return self._read(after, limit)
        except _kafka_exception() as error:
            raise SourceError(f"{self.namespace}: the Kafka broker does not answer ({_kafka_reason(error)}); "
                              f"nothing was consumed from topic {self.topic!r}") from None

    def _read(self, after: Positions | None, limit: int) -> tuple[list[Message], Positions, list[Gap]]:
        metadata = self.consumer.list_topics(self.topic, timeout=self.timeout).topics[self.topic]
        if getattr(metadata, "error", None) is not None:
            raise SourceError(f"{self.namespace}: kafka topic {self.topic!r}: {_kafka_reason(metadata.error)}")
        positions = {str(p): (after or {}).get(str(p)) for p in sorted(metadata.partitions)}
        gaps, ends = [], {}
        for partition, offset in positions.items():
            low, ends[partition] = self.consumer.get_watermark_offsets(
                self.topic_partition(self.topic, int(partition), 0), timeout=self.timeout)
            if low > int(offset or 0):  # retention deleted offsets this source had not read
                gaps.append(Gap(None if offset is None else str(offset), str(low), low - int(offset or 0),
                                partition))
                positions[partition] = low

        def behind() -> int:  # how many offsets the read is still short of the ends
            return sum(max(0, end - int(positions[p] or 0)) for p, end in ends.items())

        messages: list[Message] = []
        if not behind():
            return messages, {p: o for p, o in positions.items() if o is not None}, gaps
        self.consumer.assign([self.topic_partition(self.topic, int(p), self.beginning if o is None else int(o))
                              for p, o in positions.items()])
        try:
            self._consume(messages, positions, limit, behind)
        finally:
            # stop fetching ahead: a fetch left waiting at the end of a partition would hold the broker's
            # answers to the next read's watermark queries (``fetch.wait.max.ms``) on the same connection
            self.consumer.unassign()
        return messages, {p: o for p, o in positions.items() if o is not None}, gaps

    def _consume(self, messages: list[Message], positions: dict, limit: int, behind: Callable[[], int]) -> None:
        while len(messages) < limit and behind():
            records = self.consumer.consume(num_messages=min(limit - len(messages), behind(), 1000),
                                            timeout=self.timeout)
            if not records:
                # short of the ends, nothing came: the broker stopped answering (raises), or the ends are a
                # transaction's markers, which hold an offset but are no record
                self.consumer.list_topics(self.topic, timeout=self.timeout)
                break
            for record in records:
                error = record.error()
                if error is not None:
                    if _is_partition_end(error):  # ``enable.partition.eof``: a notice, not a record
                        continue
                    raise SourceError(f"{self.namespace}: kafka topic {self.topic!r}: {_kafka_reason(error)}")
                headers = dict(record.headers() or [])
                media_type = headers.get("content-type")
                messages.append(Message(f"{record.partition()}:{record.offset()}", record.value(),
                                        _text(media_type) if media_type is not None else None))
                positions[str(record.partition())] = record.offset() + 1

    def acknowledge(self, positions: Positions) -> None:
        offsets = [self.topic_partition(self.topic, int(p), int(o)) for p, o in positions.items()]
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except _kafka_exception() as error:
            raise SourceError(f"{self.namespace}: the Kafka broker does not answer ({_kafka_reason(error)}): the "
                              "batch landed, but the consumer group's offsets were not committed (the next batch "
                              "commits them)") from None


def _kafka_exception() -> type[BaseException] | tuple:
    """confluent-kafka's ``KafkaException`` (nothing to catch without it)."""
    try:
        from confluent_kafka import KafkaException
    except ImportError:
        return ()
    return KafkaException


def _kafka_reason(error) -> str:
    """A Kafka error's own text (``Local: Broker transport failure``), from a ``KafkaException`` or a
    ``KafkaError``."""
    error = error.args[0] if isinstance(error, Exception) and error.args else error
    text = error.str() if hasattr(error, "str") else str(error)
    return " ".join(str(text).split())


def _is_partition_end(error) -> bool:
    try:
        from confluent_kafka import KafkaError
    except ImportError:
        return False
    return error.code() == KafkaError._PARTITION_EOF


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def committed_positions(path, source: SourceSpec) -> tuple[int, Positions | None]:
    """(the number of the source's latest batch in the table at ``path``, where the next one starts); (-1, None)
    before its first. ``SourceError`` when the log no longer holds that batch's commit (a log cleaned up
    past it): starting over would land the source twice."""
    if not delta.exists(path):
        return -1, None
    table = delta.open_table(path)
    number = table.transaction_version(source.application)
    if number is None:
        return -1, None
    for limit in (16, 1024, None):  # the latest commits first: the source's last batch is usually among them
        for commit in table.history(limit):  # newest first
            if commit.get(SOURCE) == source.id:
                return int(number), json.loads(commit[SOURCE_POSITIONS])
        if limit is not None and limit > table.version():
            break
    raise SourceError(f"{source.id}: batch {number} was committed to {path}, but its commit is no longer in the "
                      "table's log, so where the next batch starts is unknown; nothing was consumed")


@dataclass
class ConsumeReport:
    """What ``consume`` did: batches committed, messages read, triples landed, messages or lines rejected."""

    source: str
    stream: str
    batches: int = 0
    messages: int = 0
    landed: int = 0
    rejected: int = 0
    versions: list[int] = field(default_factory=list)
    rejects_paths: list[Path] = field(default_factory=list)
    positions: Positions | None = None
    max_ts: int | None = None
    warnings: list[str] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)

    @property
    def lost(self) -> int | None:
        """How many messages the gaps lost (None when one of them cannot say)."""
        counts = [gap.count for gap in self.gaps]
        return None if None in counts else sum(counts)

    def to_dict(self) -> dict:
        return {"source": self.source, "stream": self.stream, "batches": self.batches, "messages": self.messages,
                "landed": self.landed, "rejected": self.rejected, "versions": self.versions,
                "rejects": [str(p) for p in self.rejects_paths], "positions": self.positions,
                "warnings": self.warnings, "gaps": [gap.to_dict() for gap in self.gaps], "lost": self.lost}


def consume(warehouse: Warehouse, stream: str, source: SourceSpec, reader: MessageReader, rejects_folder: Path,
            max_batches: int | None = None, max_future_skew: int | None = None,
            timestamp_predicates: Sequence[str] = DEFAULT_TIMESTAMP_PREDICATES, on_gap: str = "warn"
            ) -> ConsumeReport:
    """Land the source's new messages into ``stream``, a batch per commit, until it has no new message or
    ``max_batches`` are landed; rejects go to ``rejects_folder/<source>-<batch>.rejects.tsv``; named graphs
    are timestamped by a triple with one of ``timestamp_predicates``. Messages gone before they were read are
    reported in the report's ``gaps`` and ``warnings`` (``on_gap="warn"``), or stop the consume with
    ``SourceGap`` before their batch lands (``on_gap="fail"``)."""
    if on_gap not in GAP_POLICIES:
        raise SourceError(f"on_gap={on_gap!r}: use {' or '.join(GAP_POLICIES)}")
    report = ConsumeReport(source.id, stream)
    options = {"timestamp_predicates": tuple(timestamp_predicates)}
    if max_future_skew is not None:
        options["max_future_skew"] = max_future_skew
    while max_batches is None or report.batches < max_batches:
        if not land_batch(warehouse, stream, source, reader, rejects_folder, report, on_gap=on_gap, **options):
            break
    return report


def land_batch(warehouse: Warehouse, stream: str, source: SourceSpec, reader: MessageReader,
               rejects_folder: Path, report: ConsumeReport, on_gap: str = "warn", **options) -> bool:
    """Land the next batch (see the module docstring) into ``report``; False when there was none. A batch
    after a gap is landed with the gap recorded (``on_gap="warn"``; a gap with no message after it commits
    the positions past it alone), or refused with ``SourceGap`` (``on_gap="fail"``). ``options`` go to
    ``ingest_stream`` (``max_future_skew``, ``timestamp_predicates``)."""
    path = warehouse.stream(stream)
    number, after = committed_positions(path, source)
    messages, positions, gaps = reader.read(after, source.batch)
    if gaps and on_gap == "fail":
        landed = (f"{report.batches} batch{'es' if report.batches > 1 else ''} landed before it, nothing after it"
                  if report.batches else "nothing landed")
        raise SourceGap(f"{'; '.join(gap.describe(source.id) for gap in gaps)}; {landed}, and the source's "
                        "position stays before it (on_gap=fail; set on_gap=warn to land what remains)")
    if not messages and not gaps:
        if after:
            reader.acknowledge(after)  # a consumer killed after its commit may not have
        report.positions = after
        return False
    rejects_folder.mkdir(parents=True, exist_ok=True)
    _drop_uncommitted_rejects(rejects_folder, source, number)
    target = rejects_folder / f"{slug(source.id)}-{number + 1:08d}.rejects.tsv"
    # the batch's rejects, written before its commit, become ``target`` once it is committed: a consumer that
    # loses the batch to another leaves the other's file alone, one killed after its commit leaves this file
    partial = rejects_folder / f".{target.name}.{uuid.uuid4().hex[:8]}.partial"
    with tempfile.TemporaryDirectory(prefix="csparql-consume-") as folder:
        files, saved, unreadable = _save_messages(messages, source, Path(folder))
        metadata = {SOURCE: source.id, SOURCE_POSITIONS: json.dumps(positions, sort_keys=True)}
        if messages:
            metadata[INPUTS] = json.dumps([f"{source.id}#{messages[0].position}..{messages[-1].position}"])
        if gaps:
            metadata[SOURCE_GAP] = json.dumps([gap.to_dict() for gap in gaps], sort_keys=True)
        transaction = (source.application, number + 1)
        try:
            if files:
                landed = ingest_stream(None, warehouse, stream, files, rejects=partial, commit_metadata=metadata,
                                       in_process=True, again=True, transaction=transaction, **options)
            else:
                landed = _commit_positions(warehouse, stream, metadata, transaction)
        except InputError as error:
            raise SourceError(f"{source.id}: {error}") from None
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        _name_messages(partial, saved, source, unreadable)
        if partial.is_file():
            partial.replace(target)
    reader.acknowledge(positions)
    report.batches += 1
    report.messages += len(messages)
    report.landed += landed.landed
    report.rejected += landed.rejected + len(unreadable)
    report.versions.append(landed.version)
    report.positions = positions
    report.gaps.extend(gaps)
    report.warnings.extend(gap.describe(source.id) for gap in gaps)
    report.warnings.extend(landed.warnings)
    if landed.max_ts is not None:
        report.max_ts = max(report.max_ts or landed.max_ts, landed.max_ts)
    if target.is_file() and target.stat().st_size:
        report.rejects_paths.append(target)
    return True


def _unreadable(message: Message, source: SourceSpec) -> str | None:
    media_type = message.media_type or source.media_type
    format = media_type_format(media_type)
    if message.body is None:
        return "the record has no value" if source.kind == "kafka" else \
            f"the message has no {BODY_FIELD.decode()} field"
    if format is None:
        return f"unknown media type {media_type!r}"
    if format not in TIMESTAMPED_FORMATS:
        return f"{media_type} carries no timestamps: send TriG, N-Quads, JSON-LD or TriX"
    return None


def _commit_positions(warehouse: Warehouse, stream: str, metadata: dict, transaction) -> IngestReport:
    """A commit of the batch's positions alone (its every message was rejected)."""
    path = warehouse.stream(stream)
    ensure_stream_table(warehouse, stream)
    delta.commit_files(path, [], schema.STREAM, schema.STREAM_PARTITIONS, "ts", metadata=metadata,
                       transaction=transaction)
    return IngestReport(stream, path, version=delta.open_table(path).version())


@dataclass(frozen=True)
class _Saved:
    """A file of a batch: one message, or a run of consecutive messages in the line format (``starts``: each
    one's first line in the file, and its position)."""

    position: str | None = None
    starts: tuple[tuple[int, str], ...] = ()

    def message_line(self, line: int) -> tuple[str, int]:
        """The position of the message that holds line ``line`` of the file, and the line's number in it."""
        if self.position is not None:
            return self.position, line
        first, position = self.starts[max(0, bisect.bisect_right(self.starts, (line, "\uffff")) - 1)]
        return position, line - first + 1


def _save_messages(messages: list[Message], source: SourceSpec, folder: Path
                   ) -> tuple[list[Path], dict[str, _Saved], list[tuple[Message, str]]]:
    """The batch's messages saved as input files, in message order: a file per message, except that consecutive
    messages in the line format without blank nodes share one (parsing a file per one-line message would cost
    more than the rest of the ingest; blank nodes need a file of their own, which scopes them). Returns the files,
    what each holds (by resolved path), and the messages that cannot be read, with the reason."""
    files, saved, unreadable = [], {}, []
    runs: dict[Path, tuple[list[bytes], list[tuple[int, str]]]] = {}
    run_file = None
    next_line = 1
    for message in messages:
        reason = _unreadable(message, source)
        if reason:
            unreadable.append((message, reason))
            continue
        format = media_type_format(message.media_type or source.media_type)
        body = message.body
        if format == "nquads" and b"_:" not in body and not lines_name_graphs(
                body.decode("utf-8", "replace").splitlines()):
            if run_file is None:
                run_file = folder / f"{len(files):06d}-lines.nq"
                next_line = 1
                files.append(run_file)
                runs[run_file] = ([], [])
            if not body.endswith(b"\n"):
                body += b"\n"
            bodies, starts = runs[run_file]
            starts.append((next_line, message.position))
            bodies.append(body)
            next_line += body.count(b"\n")
            continue
        run_file = None
        file = folder / f"{len(files):06d}{FORMAT_EXTENSIONS[format]}"
        file.write_bytes(body)
        files.append(file)
        saved[str(file.resolve())] = _Saved(position=message.position)
    for file, (bodies, starts) in runs.items():
        file.write_bytes(b"".join(bodies))
        saved[str(file.resolve())] = _Saved(starts=tuple(starts))
    return files, saved, unreadable


def _drop_uncommitted_rejects(rejects_folder: Path, source: SourceSpec, number: int) -> None:
    """Remove the rejects a consumer killed before its commit left of a batch after batch ``number`` (the
    latest committed): that batch is read again. Those of a committed batch stay."""
    pattern = re.compile(rf"\.{re.escape(slug(source.id))}-(\d+)\.rejects\.tsv\.[0-9a-f]+\.partial")
    for path in rejects_folder.iterdir():
        match = pattern.fullmatch(path.name)
        if match and int(match.group(1)) > number:
            path.unlink(missing_ok=True)


def _name_messages(target: Path, saved: dict[str, _Saved], source: SourceSpec,
                   unreadable: list[tuple[Message, str]]) -> None:
    """The rejects file names each message by the source and its position, and each line by its number in the
    message, not by the file it was saved to; it gets the messages that could not be read at all. An empty one
    is removed."""
    rows = [row.split("\t", 3) for row in target.read_text(encoding="utf-8").splitlines()] if target.is_file() else []
    renamed = []
    for name, line, reason, text in rows:
        where = saved.get(unescape_field(name))
        if where is not None:
            position, number = where.message_line(int(line))
            name, line = escape_field(f"{source.id}#{position}"), str(number)
        renamed.append(f"{name}\t{line}\t{reason}\t{text}\n")
    for message, reason in unreadable:
        text = (message.body or b"").decode("utf-8", "replace")
        renamed.append(f"{escape_field(source.id + '#' + message.position)}\t0\t{escape_field(reason)}\t"
                       f"{escape_field(text)}\n")
    if not renamed:
        target.unlink(missing_ok=True)
        return
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.write_text("".join(renamed), encoding="utf-8")
    temporary.replace(target)
