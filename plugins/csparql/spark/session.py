"""One SparkSession per process, configured for micro-batches on small machines.

``spark_session(master)`` returns the process's session, creating it on first use:

- ``local[*]`` (the default), a standalone cluster ``spark://host:7077``, or a Spark Connect server
  ``sc://host:15002``; the master comes from the argument, else ``CSPARQL_SPARK_MASTER``, else ``local[*]``;
- Python workers run the interpreter of this process; times are UTC; Parquet timestamps are written as
  microseconds (Delta's type), and Spark leaves no ``.crc`` or ``_SUCCESS`` files in table folders.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
_LOCK = threading.Lock()
_LOG4J = Path(__file__).with_name("log4j2.properties")


def configured_master(master: str | None = None) -> str:
    """The Spark master to use: the argument, else ``CSPARQL_SPARK_MASTER``, else ``local[*]``."""
    return master or os.environ.get("CSPARQL_SPARK_MASTER") or DEFAULT_MASTER


def _quiet_python_loggers() -> None:
    # PySpark logs every failed analysis as a large JSON record; the engine reports errors itself.
    import logging

    logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)


def _prepare_environment() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Row objects carry datetimes in the Python process's zone: keep it UTC like the data.
    os.environ["TZ"] = "UTC"
    if hasattr(time, "tzset"):
        time.tzset()


def spark_session(master: str | None = None, app_name: str = "csparql") -> SparkSession:
    """The process's SparkSession (created on first call with the given or configured master)."""
    with _LOCK:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        _prepare_environment()
        _quiet_python_loggers()
        master = configured_master(master)
        shuffle_partitions = os.environ.get("CSPARQL_SHUFFLE_PARTITIONS", str(max(2, 2 * (os.cpu_count() or 2))))
        settings = {
            "spark.app.name": app_name,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": shuffle_partitions,
            "spark.sql.adaptive.enabled": "true",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
            "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
            "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
            # SPARQL turns an invalid cast or a division by zero into an error value, not a failed query.
            "spark.sql.ansi.enabled": "false",
        }
        if master.startswith("sc://"):
            builder = SparkSession.builder.remote(master)
            for key, value in settings.items():
                if key.startswith("spark.sql."):
                    builder = builder.config(key, value)
            return builder.getOrCreate()
        builder = SparkSession.builder.master(master)
        java_options = f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{_LOG4J}"
        settings.update(
            {
                "spark.driver.memory": os.environ.get("CSPARQL_DRIVER_MEMORY", "2g"),
                "spark.driver.extraJavaOptions": java_options,
                "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
                "spark.default.parallelism": str(max(2, os.cpu_count() or 2)),
            }
        )
        if master.startswith("spark://"):
            settings.setdefault("spark.driver.host", "127.0.0.1")
        for key, value in settings.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        return session


def stop_spark_session() -> None:
    """Stop the process's session, if any."""
    with _LOCK:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
