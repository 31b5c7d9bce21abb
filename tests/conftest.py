"""Fixtures shared by the whole suite. One SparkSession serves every test that needs Spark (it takes 10–20 s
to start), created on first use.

The suite runs in two pytest-xdist workers (``-n 2`` in pyproject.toml; ``./test.sh -n 0`` runs it in one
process). A worker takes whole test files, and whole packages where they share a package- or session-scoped
fixture (``SHARED_PACKAGES``), so that no stack, server or loaded workload is started twice; the files that take
minutes start first (``LONG_FILES``) so that the two workers end together.

Markers (registered in pyproject.toml): a test that uses a Spark fixture is marked ``spark`` here, one that
uses the ``ui`` stack ``airflow``; modules that start Spark, import or run Airflow, or drive a browser
otherwise say so with ``pytestmark``. ``pytest -m "not spark and not airflow and not browser"`` runs the rest,
the pure tests, in seconds.

The Spark drivers of a run map one class-data archive of a driver's classes (``class_archive``), written before
the workers start and kept for later runs."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SHARED_SESSION_MEMORY = "3g"
"""The shared session's driver heap: the conformance harness evaluates three queries at a time in it, some
of them cross products, and a broadcast built while the others hold 1–1.5 GB ran out of the default 2 GB."""


TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVM options of every Spark driver the tests start (through ``SPARK_SUBMIT_OPTS``, which Spark's launcher adds
to each JVM spark-submit starts: this process's sessions, the Spark Connect servers, spark-submitted jobs, the
sessions of Airflow tasks): the quick compiler only and a single-threaded collector. The tests run many small
queries in short-lived JVMs on two cores, where the optimising compiler's and the parallel collector's threads
cost more than they win (the W3C file: 134 s → 123 s in one process). They change no answer."""
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTIONS)

CLASS_ARCHIVE_WORKLOAD = """
import tempfile
import pyarrow as pa
from pyspark.sql import SparkSession, Window, functions as F
session = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
left = session.createDataFrame(pa.table({"k": [i % 7 for i in range(200)], "s": [f"s{i}" for i in range(200)],
                                         "v": [i * 1.5 for i in range(200)]}).to_pandas())
right = session.createDataFrame([(i, f"z{i}") for i in range(7)], "k int, z string").cache()
joined = left.join(right.hint("broadcast"), "k").groupBy("z").agg(F.count("*").alias("n"), F.sum("v"),
                                                                   F.collect_set("s"), F.countDistinct("s"))
ranked = left.withColumn("r", F.row_number().over(Window.partitionBy("k").orderBy("v"))).unionByName(
    left.crossJoin(right.select("z")).select("k", "s", "v", F.lit(0).alias("r")).limit(5))
mapped = left.mapInArrow(lambda batches: (b for b in batches), left.schema).localCheckpoint()
with tempfile.TemporaryDirectory() as folder:
    joined.write.partitionBy("z").parquet(folder + "/t")
    session.read.parquet(folder + "/t").where("n > 1").orderBy("z").toArrow()
    ranked.persist().write.mode("append").parquet(folder + "/r")
    session.read.parquet(folder + "/r").join(mapped, ["k", "s"], "left_anti").toArrow()
session.sql("SELECT explode(sequence(1, 5)) AS x").distinct().collect()
session.stop()
"""
"""What the JVM that writes the class archive runs: a session doing what the engine's do (Arrow and pandas
in, broadcast and cross joins, aggregates, window functions, unions, ``mapInArrow``, caches and checkpoints,
Parquet written and read back, results collected through Arrow), so that it loads the classes they load."""


def class_archive() -> Path | None:
    """A class-data archive (the JVM's CDS) of the classes a Spark driver of the tests loads, written by one
    short ``spark-submit`` of ``CLASS_ARCHIVE_WORKLOAD`` (about 35 s) and kept in the temporary folder for the
    next runs with the same Java, Spark, JVM options and workload; None if it could not be written. Every Spark
    driver the tests start maps it (``-XX:SharedArchiveFile`` in ``SPARK_SUBMIT_OPTS``) instead of loading and
    verifying its ~10,000 classes from the jars again: 2–4 s less CPU for each of the suite's hundreds of JVM
    starts. A JVM whose class path differs (another Spark, another ``SPARK_CONF_DIR``) or that another Java
    runs silently loads its classes as before; no answer changes."""
    import pyspark

    spark_home = Path(pyspark.__file__).resolve().parent
    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java" if os.environ.get("JAVA_HOME") else shutil.which("java")
    if java is None:
        return None
    java = Path(java).resolve()
    options = os.environ["SPARK_SUBMIT_OPTS"]
    key = hashlib.sha256("\0".join([str(java), str(java.stat().st_mtime_ns), str(spark_home), pyspark.__version__,
                                     options, CLASS_ARCHIVE_WORKLOAD]).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "csparql-test-jvm"
    archive = folder / f"spark-driver-{key}.jsa"
    if archive.exists():
        return archive
    folder.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        written, workload = Path(work) / "archive.jsa", Path(work) / "workload.py"
        workload.write_text(CLASS_ARCHIVE_WORKLOAD, encoding="utf-8")
        environment = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable,
                       "SPARK_SUBMIT_OPTS": f"{options} -XX:ArchiveClassesAtExit={written}"}
        for name in ("SPARK_CONF_DIR", "SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS"):
            environment.pop(name, None)
        try:
            subprocess.run([str(Path(sys.executable).parent / "spark-submit"), str(workload)], env=environment,
                           cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=300, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        if not written.exists():
            return None
        os.replace(written, archive)  # whole or not at all, for a run starting beside this one
    return archive


def pytest_configure(config):
    """In the process that starts the workers (or runs the tests), before any JVM: ``class_archive`` for every
    Spark driver of the run, the workers included (they inherit the setting)."""
    if hasattr(config, "workerinput") or "-XX:SharedArchiveFile" in os.environ["SPARK_SUBMIT_OPTS"]:
        return
    if config.option.collectonly or "not spark" in (config.option.markexpr or ""):
        return  # no Spark driver will start
    archive = class_archive()
    if archive is not None:
        os.environ["SPARK_SUBMIT_OPTS"] += f" -XX:SharedArchiveFile={archive} {ARCHIVE_WARNINGS_TO_STDERR}"


ARCHIVE_WARNINGS_TO_STDERR = "-Xlog:cds*=warning:stderr -Xlog:cds*=off:stdout"
"""A JVM that cannot map the class archive (now and then the address it needs is taken) loads its classes as
before and says so, by default on its standard output, where a test reading a child's first line, or a job's
result line, would read it instead: the archive's warnings go to standard error."""


SPARK_FIXTURES = {"spark", "conformance_spark"}
AIRFLOW_FIXTURES = {"ui"}

SHARED_PACKAGES = ("tests/ui/", "tests/srbench/")
"""Packages whose files share a fixture wider than a module (the UI's Airflow stack; the SRBench workload):
one worker runs the whole package."""

LONG_FILES = (
    "tests/orchestration/test_airflow_end_to_end.py",
    "tests/conformance/test_generated.py",
    "tests/conformance/test_whole_way.py",
    "tests/bench/test_quick_run.py",
    "tests/conformance/test_w3c.py",
    "tests/engine/test_panes.py",
    "tests/provider/test_installed_wheel.py",
    "tests/stack/test_stack_command.py",
    "tests/srbench/",
    "tests/ui/",
    "tests/engine/test_compact_windows.py",
    "tests/orchestration/test_spark_cluster.py",
    "tests/storage/test_s3_cluster.py",
    "tests/spark/test_paths.py",
    "tests/spark/test_entailment.py",
    "tests/engine/test_engine.py",
    "tests/engine/test_revision_numbering.py",
    "tests/conformance/test_rspql_evaluation.py",
    "tests/orchestration/test_spark_connect.py",
    "tests/storage/test_s3_warehouse.py",
    "tests/orchestration/test_session_healing.py",
    "tests/ingest/test_kafka_source.py",
    "tests/ingest/test_sources.py",
    "tests/engine/test_revision_concurrency.py",
    "tests/storage/test_delta_spark.py",
)
"""The files (and packages) that take the longest, longest first, as a two-worker run on two cores measured
them (pytest's ``--durations``, summed per file: five to six minutes for the first ones, 40 s for the last)."""


def work_unit(nodeid: str) -> str:
    """What one worker runs together: the test's package if it is one of ``SHARED_PACKAGES``, else its file."""
    path = nodeid.split("::", 1)[0]
    return next((package for package in SHARED_PACKAGES if path.startswith(package)), path)


def _start_rank(item) -> int:
    unit = work_unit(item.nodeid)
    return next((rank for rank, long in enumerate(LONG_FILES) if unit.startswith(long)), len(LONG_FILES))


def pytest_collection_modifyitems(items):
    items.sort(key=_start_rank)  # stable: every file keeps the order of its tests
    for item in items:
        fixtures = set(item.fixturenames)  # with every fixture the test's fixtures depend on
        if fixtures & SPARK_FIXTURES:
            item.add_marker(pytest.mark.spark)
        if fixtures & AIRFLOW_FIXTURES:
            item.add_marker(pytest.mark.airflow)


@pytest.fixture(scope="session")
def spark():
    from csparql.runtime.session import spark_session

    previous = os.environ.get("CSPARQL_DRIVER_MEMORY")
    os.environ["CSPARQL_DRIVER_MEMORY"] = previous or SHARED_SESSION_MEMORY
    try:
        session = spark_session("local[2]")
    finally:  # the setting is for this session only, not for the Spark processes tests start
        if previous is None:
            del os.environ["CSPARQL_DRIVER_MEMORY"]
    yield session
    session.stop()
    # py4j closes its connections at interpreter exit and logs that at INFO, which Airflow's logging setup
    # lets through to a stream pytest has closed by then ("--- Logging error ---").
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's file scheduling, with ``SHARED_PACKAGES`` as one unit each, in the order collected."""
    from xdist.scheduler import LoadFileScheduling

    class WorkUnitScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # xdist would put the files with the most tests first
    return WorkUnitScheduling(config, log)
