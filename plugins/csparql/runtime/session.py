"""One SparkSession per process, configured for micro-batches on small machines.

``spark_session(master)`` returns the process's session, creating it on first use:

- ``local[*]`` (the default), a standalone cluster ``spark://host:7077``, or a Spark Connect server
  ``sc://host:15002``; the master comes from the argument, else ``CSPARQL_SPARK_MASTER``, else
  ``SPARK_REMOTE`` (Spark Connect's own variable), else ``local[*]``;
- Python workers run the interpreter of this process; times are UTC; Parquet timestamps are written as
  microseconds (Delta's type), and Spark leaves no ``.crc`` or ``_SUCCESS`` files in table folders.

``submitted_session()`` is the session of an application that ``spark-submit`` runs (``spark_jobs/``): the
master, memory and ``--conf`` settings spark-submit gives are kept, and the project's settings are added to
them — those the engine's results depend on (``RESULT_SETTINGS``) always win. Both go through
``configure(builder, master)``, so the settings live in one place.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
_LOCK = threading.Lock()
log = logging.getLogger(__name__)
_LOG4J = Path(str(resources.files("csparql") / "runtime" / "log4j2.properties"))
LOG4J_CONFIGURATION = _LOG4J
"""The log4j2 configuration that keeps Spark to warnings and errors (for ``-Dlog4j2.configurationFile``)."""

RESULT_SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    # SPARQL turns an invalid cast or a division by zero into an error value, not a failed query.
    "spark.sql.ansi.enabled": "false",
}
"""Settings the engine's results and table layout depend on: applied over whatever else configures a session."""

CODEGEN_CACHE_ENTRIES = 1000
"""How many compiled classes of generated code a Spark JVM keeps (``spark.sql.codegen.cache.maxEntries``,
Spark's default 100). One evaluation of an SRBench query compiles up to ~100 classes, and a driver that
evaluates several registered queries in turn needs them all: with 100 it compiled again on nearly every
evaluation (SRBench Q12 ~100 compilations, 1–1.5 s of Janino, per warm window), with 1000 on almost none
(docs/performance/keeping-up.md, "Compiled code kept between evaluations"). A static setting: it is given when
the JVM's first session starts, never by a Spark Connect client."""

_UTC_JVM = "-Duser.timezone=UTC"


SPARK_REMOTE = "SPARK_REMOTE"
"""Spark Connect's standard variable: the server a PySpark client connects to."""


def configured_master(master: str | None = None) -> str:
    """The Spark master to use: the argument, else ``CSPARQL_SPARK_MASTER``, else ``SPARK_REMOTE``, else
    ``local[*]``."""
    return (master or os.environ.get("CSPARQL_SPARK_MASTER") or os.environ.get(SPARK_REMOTE)
            or DEFAULT_MASTER)


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


def session_settings(master: str, app_name: str = "csparql", launch: bool = True) -> dict[str, str]:
    """The project's settings for a session on ``master``: ``RESULT_SETTINGS`` plus tuning for small machines.
    ``launch``: this process starts the driver JVM, so driver memory and JVM options are included."""
    shuffle_partitions = os.environ.get("CSPARQL_SHUFFLE_PARTITIONS", str(max(2, 2 * (os.cpu_count() or 2))))
    settings = {
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": shuffle_partitions,
        "spark.sql.adaptive.enabled": "true",
        # A join of two one-partition sides (a compact evaluation, csparql.spark.compiler.COMPACT_TRIPLES) stays
        # in one partition whatever its estimated size, rather than being shuffled for parallelism.
        "spark.sql.maxSinglePartitionBytes": str(2**63 - 1),
        **RESULT_SETTINGS,
    }
    if master.startswith("sc://"):
        # A Spark Connect client can only set SQL settings; the server owns the rest.
        return {key: value for key, value in settings.items() if key.startswith("spark.sql.")}
    # PySpark's DataFrame debugging sends the Python call site to the JVM on every Column function (several
    # round trips each): most of the cost of building a plan.
    settings["spark.python.sql.dataFrameDebugging.enabled"] = "false"
    settings["spark.executor.extraJavaOptions"] = _UTC_JVM
    settings["spark.default.parallelism"] = str(max(2, os.cpu_count() or 2))
    settings["spark.sql.codegen.cache.maxEntries"] = str(CODEGEN_CACHE_ENTRIES)
    if launch:
        settings["spark.driver.memory"] = os.environ.get("CSPARQL_DRIVER_MEMORY", "2g")
        settings["spark.driver.extraJavaOptions"] = f"{_UTC_JVM} -Dlog4j2.configurationFile=file:{_LOG4J}"
    if master.startswith("spark://"):
        settings["spark.driver.host"] = "127.0.0.1"
    return settings


def configure(
    builder: SparkSession.Builder,
    master: str,
    app_name: str = "csparql",
    given: Mapping[str, str] | None = None,
    launch: bool = True,
) -> SparkSession.Builder:
    """``builder`` with the project's settings for ``master`` (``session_settings``). Settings already in
    ``given`` (what spark-submit set) are kept, except ``RESULT_SETTINGS``, which always apply; the executors'
    JVM options keep the given ones and add UTC as the default zone."""
    given = given or {}
    for key, value in session_settings(master, app_name, launch).items():
        if key in given and key not in RESULT_SETTINGS:
            if key == "spark.executor.extraJavaOptions" and "-Duser.timezone" not in given[key]:
                builder = builder.config(key, f"{given[key]} {value}".strip())
            continue
        builder = builder.config(key, value)
    return builder


def spark_session(master: str | None = None, app_name: str = "csparql") -> SparkSession:
    """The process's SparkSession (created on first call with the given or configured master)."""
    with _LOCK:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        _prepare_environment()
        _quiet_python_loggers()
        master = configured_master(master)
        if master.startswith("sc://"):
            log.info("Spark: a session of the Spark Connect server %s", without_secrets(master))
            return configure(SparkSession.builder.remote(master), master, app_name).getOrCreate()
        log.info("Spark: a session of its own in this process, master %s", master)
        # A master chosen over an exported SPARK_REMOTE: PySpark refuses a session given both.
        os.environ.pop(SPARK_REMOTE, None)
        session = configure(SparkSession.builder.master(master), master, app_name).getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        return session


def without_secrets(url: str) -> str:
    """A Spark Connect URL fit for a log: ``sc://host:port`` with its parameters (a token) left out."""
    return url.split(";", 1)[0].rstrip("/")


def submitted_session(app_name: str = "csparql") -> SparkSession:
    """The SparkSession of an application run by ``spark-submit`` (the process's session if it has one).

    spark-submit has started the driver JVM already, so its ``--master``, ``--driver-memory``,
    ``--driver-java-options`` and ``--conf`` settings stand; the project's settings fill in the rest and
    ``RESULT_SETTINGS`` override. Run outside spark-submit, it is ``spark_session()``."""
    from pyspark import SparkConf, SparkContext

    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # spark-submit did not start this process's JVM
        return spark_session(app_name=app_name)
    with _LOCK:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        _prepare_environment()
        _quiet_python_loggers()
        # Connect to spark-submit's JVM first: only then does SparkConf() load the settings spark-submit
        # passed it, instead of starting empty.
        SparkContext._ensure_initialized()
        given = dict(SparkConf().getAll())
        master = given.get("spark.master") or configured_master()
        builder = SparkSession.builder if "spark.master" in given else SparkSession.builder.master(master)
        session = configure(builder, master, app_name, given, launch=False).getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        return session


COMPACT_SETTINGS = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1"}
"""What a compact evaluation (one partition, ``csparql.spark.compiler.COMPACT_TRIPLES``) runs with: without
adaptive execution, which runs each shuffle of a plan as a Spark job of its own and plans the rest again after
each, and with one partition for whatever shuffle Spark still adds (a join of two one-partition sides whose
estimated size is large). Neither changes a result."""

_compact_runs: dict[int, list] = {}  # id(session) -> [runs in progress, the settings they replaced]
_COMPACT_LOCK = threading.Lock()


@contextmanager
def compact_execution(spark: SparkSession) -> Iterator[None]:
    """Run the Spark actions inside with ``COMPACT_SETTINGS``, and restore the session's own settings after
    the last compact run in progress on the session ends (runs of several threads overlap safely; a
    non-compact action another thread starts meanwhile runs with them too, which changes its speed, never its
    result)."""
    key = id(spark)
    with _COMPACT_LOCK:
        runs = _compact_runs.get(key)
        if runs is None:
            saved = {name: spark.conf.get(name, None) for name in COMPACT_SETTINGS}
            for name, value in COMPACT_SETTINGS.items():
                spark.conf.set(name, value)
            runs = _compact_runs[key] = [0, saved]
        runs[0] += 1
    try:
        yield
    finally:
        with _COMPACT_LOCK:
            runs[0] -= 1
            if runs[0] == 0:
                del _compact_runs[key]
                for name, value in runs[1].items():
                    if value is None:
                        spark.conf.unset(name)
                    else:
                        spark.conf.set(name, value)

