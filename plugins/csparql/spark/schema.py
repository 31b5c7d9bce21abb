"""Spark's schemas of the warehouse's files, derived from the Arrow schemas of the storage contract
(``csparql.storage.schema``) rather than spelled again."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from csparql.storage import schema

_SIMPLE = {pa.int8(): ByteType(), pa.int64(): LongType(), pa.string(): StringType(), pa.bool_(): BooleanType()}


def spark_type(arrow_type: pa.DataType) -> DataType:
    """The Spark type of an Arrow type of the storage contract (structs with their fields' nullability)."""
    if pa.types.is_struct(arrow_type):
        return StructType([StructField(f.name, spark_type(f.type), f.nullable) for f in arrow_type])
    if pa.types.is_timestamp(arrow_type):
        return TimestampType()
    if arrow_type in _SIMPLE:
        return _SIMPLE[arrow_type]
    raise TypeError(f"no Spark type for the Arrow type {arrow_type}")


def spark_schema(arrow_schema: pa.Schema, nullable: tuple[str, ...] = ()) -> StructType:
    """The Spark schema of an Arrow schema; the fields named in ``nullable`` become nullable."""
    return StructType([
        StructField(f.name, spark_type(f.type), f.nullable or f.name in nullable) for f in arrow_schema
    ])


STREAM_FILE_SCHEMA = spark_schema(schema.STREAM_FILE)
"""What Spark reads from (and ingest writes to) a stream table's data files."""
STATIC_FILE_SCHEMA = spark_schema(schema.STATIC)
"""What Spark reads from (and ingest writes to) a static graph's data files."""
CLOSURES_FILE_SCHEMA = spark_schema(schema.CLOSURES_FILE)
"""What Spark reads from (and writes to) the closures table's data files."""
