"""The real delta-spark connector, in a Python subprocess of its own: a local SparkSession with Delta Lake's
extension and catalog (``csparql.runtime.packages.DELTA_SPARK``, from Maven Central through Ivy on first use,
cached in ``~/.ivy2.5.2``), serving requests one JSON line at a time.

The test process's shared session has no Delta (and a JVM's jars are fixed once it starts), so the connector
runs here. One ``DeltaSpark`` serves a whole test module (a JVM start costs 10-20 s). Tables are named by URI
(a local path today; ``extra_conf`` carries what another file system needs, e.g. the ``spark.hadoop.fs.s3a.*``
settings and its package in ``spark.jars.packages``).

Requests (``DeltaSpark`` has one method each):

- ``read(uri)``: the table as delta-spark reads it (``spark.read.format("delta").load(uri)``): its rows (instants
  as µs since the epoch), its schema (Spark's JSON form), its partition columns, protocol and properties
  (``DESCRIBE DETAIL``) and its commits (``DESCRIBE HISTORY``);
- ``sql(statements)``: run Spark SQL statements, the last one's rows returned;
- ``append_stream(uri, events)``: append events to a csparql stream table in one batch write;
- ``stream_folder(uri, source, checkpoint, …)``: a Structured Streaming job appending the event files of a
  folder to a csparql stream table, one micro-batch per file, with its checkpoint.

An event is a triple of stored terms (``csparql.storage.terms.term_dict``) with its event time in µs
(``ts_micros``) and its arrival order; ``STREAM_COLUMNS`` turns events into a stream table's columns as a user's
own Spark job would (``docs/architecture.md``, "Reading the tables with delta-spark").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping

MARKER = "@@delta-spark@@ "
"""Prefixes the subprocess's answers on stdout (Spark and Ivy may print there too)."""

TERM = "STRUCT<kind: TINYINT NOT NULL, value: STRING NOT NULL, datatype: STRING, language: STRING>"
STREAM_TABLE_COLUMNS = (f"s {TERM} NOT NULL, p {TERM} NOT NULL, o {TERM} NOT NULL, ts TIMESTAMP NOT NULL, "
                        "arrival BIGINT NOT NULL, bucket STRING NOT NULL")
"""A csparql stream table's columns in Spark SQL (``csparql.storage.schema.STREAM``)."""
EVENT_SCHEMA = f"s {TERM}, p {TERM}, o {TERM}, ts_micros BIGINT, arrival BIGINT"
"""The events the writers here take (JSON lines): terms, the event time in µs and the arrival order."""
STREAM_COLUMNS = ("s", "p", "o", "timestamp_micros(ts_micros) AS ts", "arrival",
                  "date_format(timestamp_micros(ts_micros), \"yyyyMMdd'T'HH\") AS bucket")
"""Events as a stream table's columns: ``bucket`` is the UTC hour of ``ts`` (the session's time zone is UTC)."""


def stream_table_ddl(uri: str, iri: str) -> str:
    """The statement creating an empty csparql stream table for ``iri`` at ``uri`` with delta-spark: its
    columns, partitioned by ``bucket``, with the IRI csparql finds it by in its properties."""
    return (f"CREATE TABLE delta.`{uri}` ({STREAM_TABLE_COLUMNS}) USING delta PARTITIONED BY (bucket) "
            f"TBLPROPERTIES ('csparql.iri' = '{iri}', 'csparql.kind' = 'stream')")


def _packages() -> str:
    from csparql.runtime.packages import DELTA_SPARK

    return DELTA_SPARK


class DeltaSparkError(RuntimeError):
    """A request the subprocess failed (its Python traceback, which names the JVM's error)."""


class DeltaSpark:
    """One subprocess with a delta-spark session (``local[1]``), started on the first request."""

    def __init__(self, extra_conf: Mapping[str, str] | None = None, timeout: float = 600):
        self.extra_conf = dict(extra_conf or {})
        self.timeout = timeout
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._stderr: list[str] = []

    def _start(self) -> subprocess.Popen:
        conf = {"spark.jars.packages": _packages(), **self.extra_conf}
        environment = {**os.environ, "TZ": "UTC", "PYSPARK_PYTHON": sys.executable}
        process = subprocess.Popen(
            [sys.executable, __file__, json.dumps(conf)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=environment, start_new_session=True)
        threading.Thread(target=self._drain, args=(process,), daemon=True).start()
        return process

    def _drain(self, process: subprocess.Popen) -> None:
        for line in process.stderr:
            self._stderr.append(line)
            del self._stderr[:-200]

    def request(self, operation: str, **arguments):
        """Send one request and wait for its answer (``DeltaSparkError`` when it failed)."""
        with self._lock:
            if self._process is None:
                self._process = self._start()
            process = self._process
            process.stdin.write(json.dumps({"operation": operation, **arguments}) + "\n")
            process.stdin.flush()
            timer = threading.Timer(self.timeout, process.kill)
            timer.start()
            try:
                for line in process.stdout:
                    if line.startswith(MARKER):
                        answer = json.loads(line[len(MARKER):])
                        break
                else:
                    raise DeltaSparkError(f"the delta-spark process ended (exit {process.wait()}): "
                                          + "".join(self._stderr[-40:]))
            finally:
                timer.cancel()
        if "error" in answer:
            raise DeltaSparkError(answer["error"])
        return answer["result"]

    def read(self, uri: str | os.PathLike) -> dict:
        return self.request("read", uri=str(uri))

    def sql(self, *statements: str) -> list[dict]:
        return self.request("sql", statements=list(statements))

    def append_stream(self, uri: str | os.PathLike, events: list[dict]) -> None:
        self.request("append_stream", uri=str(uri), events=events)

    def stream_folder(self, uri: str | os.PathLike, source: str | os.PathLike, checkpoint: str | os.PathLike,
                      files_per_trigger: int = 1) -> int:
        """Run the streaming job until the folder's files are consumed; returns how many micro-batches it ran."""
        return self.request("stream_folder", uri=str(uri), source=str(source), checkpoint=str(checkpoint),
                            files_per_trigger=files_per_trigger)

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                try:
                    self._process.stdin.close()
                    self._process.wait(60)
                except (OSError, subprocess.TimeoutExpired):
                    self._process.kill()
                    self._process.wait()
                self._process = None


# --- the subprocess -------------------------------------------------------------------------------------------


def plain(value):
    """A value of a collected Row as JSON: instants as µs since the epoch (UTC), decimals as text, structs as
    objects."""
    import calendar
    import datetime
    import decimal

    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return calendar.timegm(value.timetuple()) * 1_000_000 + value.microsecond
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def _rows(frame) -> list[dict]:
    return [plain(row.asDict(recursive=True)) for row in frame.collect()]


def _serve(conf: dict) -> None:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[1]").appName("delta-spark-check")
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "1")
               # a table's state is rebuilt from its log in this many tasks (50 by default: seconds per tiny table)
               .config("spark.databricks.delta.snapshotPartitions", "1")
               .config("spark.ui.enabled", "false"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    def read(uri):
        frame = spark.read.format("delta").load(uri)
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0].asDict(recursive=True)
        history = spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").select(
            "version", "operation", "operationParameters").collect()
        return {"rows": _rows(frame), "schema": frame.schema.jsonValue(),
                "partition_columns": list(detail["partitionColumns"]),
                "protocol": {"minReaderVersion": detail["minReaderVersion"],
                             "minWriterVersion": detail["minWriterVersion"],
                             "tableFeatures": sorted(detail.get("tableFeatures") or [])},
                "properties": dict(detail["properties"] or {}),
                "history": sorted(({"version": r["version"], "operation": r["operation"],
                                    "parameters": dict(r["operationParameters"] or {})} for r in history),
                                  key=lambda commit: commit["version"])}

    def sql(statements):
        result = []
        for statement in statements:
            result = _rows(spark.sql(statement))
        return result

    def append_stream(uri, events):
        frame = spark.read.schema(EVENT_SCHEMA).json(spark.sparkContext.parallelize(
            [json.dumps(event) for event in events], 1))
        frame.selectExpr(*STREAM_COLUMNS).write.format("delta").mode("append").partitionBy("bucket").save(uri)
        return None

    def stream_folder(uri, source, checkpoint, files_per_trigger):
        events = (spark.readStream.schema(EVENT_SCHEMA).option("maxFilesPerTrigger", files_per_trigger)
                  .json(source))
        query = (events.selectExpr(*STREAM_COLUMNS).writeStream.format("delta").outputMode("append")
                 .partitionBy("bucket").option("checkpointLocation", checkpoint).trigger(availableNow=True)
                 .start(uri))
        query.awaitTermination()
        return sum(1 for progress in query.recentProgress if progress["numInputRows"] > 0)

    operations = {"read": read, "sql": sql, "append_stream": append_stream, "stream_folder": stream_folder}
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = {"result": operations[request.pop("operation")](**request)}
        except Exception:  # noqa: BLE001 - the test reads what went wrong
            import traceback

            answer = {"error": traceback.format_exc()}
        sys.stdout.write(MARKER + json.dumps(answer) + "\n")
        sys.stdout.flush()
    spark.stop()


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]))
