"""Instants as stored: microseconds since the epoch, UTC, and the hour buckets streams are partitioned by.

The datetime ↔ microseconds conversion itself is the core's (``csparql.core.windows.to_micros``/``from_micros``);
this module adds what storage needs around it: Delta logs and Parquet files give naive datetimes that mean UTC,
values may be missing, and streams are partitioned by the UTC hour of each timestamp. Only the standard
library, pyarrow and the core, so that the executors' line parser can use it.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from csparql.core.windows import from_micros, to_micros

MIN_MICROS = -62_135_596_800_000_000
"""The earliest instant stored: 0001-01-01T00:00:00Z (the hour buckets and Python's datetime cover years
1..9999)."""
MAX_MICROS = 253_402_300_799_999_999
"""The latest instant stored: 9999-12-31T23:59:59.999999Z."""

BUCKET_FORMAT = "%Y%m%dT%H"
"""An hour bucket's name (``yyyyMMddTHH``, UTC)."""


def micros_of(value: datetime | int | None) -> int | None:
    """An instant read from a Delta log or a Parquet file in microseconds since the epoch: a naive datetime
    is UTC, an int is microseconds already, None stays None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return to_micros(value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc))
    return int(value)


def instant_of(micros: int | None) -> datetime | None:
    """The aware UTC datetime of an instant in microseconds (None stays None), as Arrow timestamps take it."""
    return None if micros is None else from_micros(micros)


def bucket_of(micros: int) -> str:
    """The hour bucket (``yyyyMMddTHH``, UTC) a timestamp falls in; streams are partitioned by it."""
    instant = from_micros(micros)
    return f"{instant.year:04d}{instant:%m%dT%H}"


def hour_buckets(micros: pa.Array) -> pa.Array:
    """The hour bucket of each timestamp of an int64 array, as ``bucket_of`` names it (formatted once per
    distinct hour: formatting every value is slow)."""
    hours = pc.floor_temporal(micros.cast(pa.timestamp("us")), unit="hour")
    distinct = pc.unique(hours)
    labels = pc.strftime(distinct, format=BUCKET_FORMAT)
    return pc.take(labels, pc.index_in(hours, value_set=distinct))


def bucket_start(bucket: str | None) -> int | None:
    """The first instant (µs) of an hour bucket, or None when ``bucket`` does not name one."""
    try:
        moment = datetime.strptime(bucket, BUCKET_FORMAT)
    except (TypeError, ValueError):
        return None
    return micros_of(moment)
