"""The event times a stream commit records (``csparql.storage.stale_windows.EVENT_TIMES``), read from the Parquet
files an ingest staged, before they are committed."""

from __future__ import annotations

import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from csparql.spark.schema import STREAM_FILE_SCHEMA
from csparql.lateness import keep_until
from csparql.storage import revisions as rv
from csparql.storage import stale_windows as sw
from csparql.storage.warehouse import Warehouse


def staged_event_times(spark: SparkSession, warehouse: Warehouse, files: list[str]) -> dict[str, str]:
    """The commit metadata giving the event times of the staged stream files: how many triples at each
    timestamp up to the latest window end evaluated or the clock, whichever is later (a later triple is late
    for no window, and an evaluation running now evaluates no window past the clock unless asked to), coarsened
    as ``csparql.lateness.keep_until`` says."""
    if not files:
        return {sw.EVENT_TIMES: sw.encode_event_times(())}
    until = max(rv.latest_evaluated_end(warehouse) or 0, time.time_ns() // 1000)
    frame = spark.read.schema(STREAM_FILE_SCHEMA).parquet(*files)
    micros = F.unix_micros("ts")
    rows = frame.where(micros <= F.lit(until)).groupBy(micros.alias("t")).count().collect()
    return {sw.EVENT_TIMES: sw.encode_event_times(keep_until([(r["t"], r["count"]) for r in rows], until))}
