"""An ingest whose parsing and staging Spark does (``csparql.ingest.ingest``, "Parallel parsing"): line files in
parallel byte ranges, the other formats by rdflib in the driver, the staged Parquet files written by Spark."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from csparql.ingest.event_times import event_times_metadata, recorded_until
from csparql.ingest.inputs import IngestReport, Input
from csparql.ingest.job import IngestJob, Staged, parsed_schema
from csparql.ingest.parsers.ranges import ByteRange, RangeJob, newline_counter, range_bytes, range_parser
from csparql.spark.schema import STATIC_FILE_SCHEMA, STREAM_FILE_SCHEMA, spark_schema
from csparql.storage import delta
from csparql.storage.location import parquet_metadata
from csparql.storage.warehouse import Warehouse

MIN_RANGE_BYTES, MAX_RANGE_BYTES = 1 << 20, 64 << 20


def _parallelism(spark: SparkSession) -> int:
    try:
        value = spark.conf.get("spark.default.parallelism", None)
        if value:
            return max(1, int(value))
    except Exception:  # Spark Connect may refuse to read it
        pass
    return max(1, os.cpu_count() or 1)


def sends_inputs(spark: SparkSession) -> bool:
    """Whether the input files are read here and their bytes sent to the executors: the session's master is a
    cluster (``spark://``, YARN, Kubernetes), whose executors run on machines that cannot read this process's
    files. A local master (``local[*]``, the embedded stack's Connect server) reads them where they are."""
    try:
        master = spark.conf.get("spark.master", None) or "local"
    except Exception:  # noqa: BLE001 - a Connect server may refuse to say: it is taken for a local one
        master = "local"
    return not master.startswith("local")


class SparkIngestJob(IngestJob):
    """An ingest run by ``spark`` (a stream's or a static graph's)."""

    def __init__(self, spark: SparkSession, path: Path, inputs: list[Input], targets: dict[int, Path],
                 stream: bool, **options):
        super().__init__(path, inputs, targets, stream, **options)
        self.spark = spark
        self._sent: dict[int, bytes] = {}  # each byte range's bytes, when executors cannot read the files

    def parse_and_stage(self) -> Staged:
        frame = self.parse()
        return self.write(frame) if frame is not None else []

    # parsing

    def parse(self) -> DataFrame | None:
        line_inputs = [i for i in self.inputs if i.line_based]
        spans: dict[int, int] = {}
        frames = []
        ranges = self.split(line_inputs)
        if ranges:
            ranges = self.count_lines(ranges, spans)
        whole = {}
        for item in self.inputs:
            if not item.line_based:
                whole[item.index] = self.parse_whole(item)
                spans[item.index] = whole[item.index].num_rows
        bases = self.arrival_bases(spans)
        parsed = spark_schema(parsed_schema(self.stream))
        if ranges:
            jobs = [RangeJob(r, self.scope(r.file_index), bases[r.file_index], self.stream, self.default_micros,
                             self.future) for r in ranges]
            parser = range_parser(jobs, str(self.rejects_folder))
            frames.append(self._ranges(ranges).mapInArrow(parser, parsed))
        for index, arrow in whole.items():
            if arrow.num_rows:
                if self.stream:
                    arrow = arrow.set_column(4, "arrival", pc.add(arrow.column("arrival"), bases[index]))
                frames.append(self.spark.createDataFrame(arrow, schema=parsed))
        if not frames:
            return None
        frame = frames[0]
        for other in frames[1:]:
            frame = frame.unionByName(other)
        if self.stream:
            return frame.select("s", "p", "o", F.timestamp_micros("ts_micros").alias("ts"), "arrival", "bucket")
        return frame

    def _ids(self, count: int) -> DataFrame:
        partitions = min(count, 4 * _parallelism(self.spark))
        return self.spark.range(0, count, 1, partitions)

    def _ranges(self, ranges: list[ByteRange]) -> DataFrame:
        """One row per byte range: its id, and, on a cluster whose executors cannot read this process's
        files, its bytes (``sends_inputs``)."""
        if not self._sent:
            return self._ids(len(ranges))
        rows = pa.table({"id": pa.array([r.index for r in ranges], pa.int64()),
                         "data": pa.array([self._sent[r.index] for r in ranges], pa.large_binary())})
        return self.spark.createDataFrame(rows).repartition(min(len(ranges), 4 * _parallelism(self.spark)))

    def split(self, inputs: list[Input]) -> list[ByteRange]:
        sizes = {i.index: i.path.stat().st_size for i in inputs}
        total = sum(sizes.values())
        target = min(MAX_RANGE_BYTES, max(MIN_RANGE_BYTES, -(-total // (3 * _parallelism(self.spark)))))
        ranges = []
        for item in inputs:
            size = sizes[item.index]
            pieces = max(1, -(-size // target))
            step = -(-size // pieces) if size else 0
            for k in range(pieces):
                start, end = k * step, min(size, (k + 1) * step)
                if start < end or (size == 0 and k == 0):
                    ranges.append(ByteRange(len(ranges), item.index, str(item.path), start, end))
        return ranges

    def count_lines(self, ranges: list[ByteRange], spans: dict[int, int]) -> list[ByteRange]:
        """The first pass: newline counts per range, in Spark, or here, from the bytes read to be sent to
        executors that cannot read them (``sends_inputs``); returns the ranges with ``newlines_before``."""
        if sends_inputs(self.spark):
            self._sent = {r.index: range_bytes(r) for r in ranges}
            counts = {r.index: self._sent[r.index][1:1 + r.end - r.start].count(b"\n") for r in ranges}
        else:
            rows = self._ids(len(ranges)).mapInArrow(newline_counter(ranges), "id long, newlines long").collect()
            counts = {row["id"]: row["newlines"] for row in rows}
        before: dict[int, int] = {}
        numbered = []
        for r in ranges:
            seen = before.get(r.file_index, 0)
            numbered.append(ByteRange(r.index, r.file_index, r.path, r.start, r.end, seen))
            before[r.file_index] = seen + counts[r.index]
        for file_index, newlines in before.items():
            spans[file_index] = newlines + 1  # a last line without a newline still counts
        return numbered

    # writing

    def write(self, frame: DataFrame) -> Staged:
        """Spark writes the rows into the stage folder; returns the Parquet files (with their bucket)."""
        if not self.stream:
            frame = frame.dropDuplicates()
            existing = self.existing_static()
            if existing is not None:
                frame = frame.join(existing, ["s", "p", "o"], "left_anti")
            frame.write.parquet(str(self.stage))
        else:
            # Each file holds its rows in event-time order (the partition column leads the sort, as the writer
            # needs it anyway).
            frame.sortWithinPartitions("bucket", "ts", "arrival").write.partitionBy("bucket").parquet(str(self.stage))
        staged = []
        pattern = "bucket=*/*.parquet" if self.stream else "*.parquet"
        for file in sorted(self.stage.glob(pattern)):
            if parquet_metadata(file).num_rows == 0:
                file.unlink()
                continue
            bucket = unquote(file.parent.name.split("=", 1)[1]) if self.stream else None
            staged.append((str(file), bucket))
        return staged

    def existing_static(self) -> DataFrame | None:
        if self.replace:
            return None
        uris = [f.uri for f in delta.live_files(delta.open_table(self.path), self.path)]
        if not uris:
            return None
        return self.spark.read.schema(STATIC_FILE_SCHEMA).parquet(*uris)

    def summarise(self, report: IngestReport, staged: Staged) -> None:
        """Triples per predicate (and the timestamp range) of the staged files: one small aggregation."""
        if not staged:
            return
        files = [f for f, _ in staged]
        if self.stream:
            frame = self.spark.read.schema(STREAM_FILE_SCHEMA).parquet(*files)
            rows = frame.groupBy(F.col("p.value").alias("predicate")).agg(
                F.count(F.lit(1)).alias("triples"),
                F.min(F.unix_micros("ts")).alias("low"),
                F.max(F.unix_micros("ts")).alias("high"),
            ).collect()
            report.min_ts = min(r["low"] for r in rows) if rows else None
            report.max_ts = max(r["high"] for r in rows) if rows else None
        else:
            frame = self.spark.read.schema(STATIC_FILE_SCHEMA).parquet(*files)
            rows = frame.groupBy(F.col("p.value").alias("predicate")).agg(F.count(F.lit(1)).alias("triples")).collect()
        report.counts = {r["predicate"]: r["triples"] for r in rows}
        report.landed = sum(report.counts.values())

    def event_times(self, warehouse: Warehouse, staged: Staged) -> dict[str, str]:
        until = recorded_until(warehouse)
        if not staged:
            return event_times_metadata((), until)
        frame = self.spark.read.schema(STREAM_FILE_SCHEMA).parquet(*[f for f, _ in staged])
        micros = F.unix_micros("ts")
        rows = frame.where(micros <= F.lit(until)).groupBy(micros.alias("t")).count().collect()
        return event_times_metadata([(r["t"], r["count"]) for r in rows], until)
