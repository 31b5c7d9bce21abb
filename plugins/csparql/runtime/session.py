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

A Spark Connect session can end under its client: the server drops a session idle for its timeout
(``INVALID_HANDLE.SESSION_CLOSED``), and a restarted server knows none of the sessions it had
(``SESSION_CHANGED``, ``SESSION_NOT_FOUND``; ``UNAVAILABLE`` while it is down). ``retry_on_lost_session(action)``
runs an action again on a new session when that happens (``session_lost``, ``drop_session``), a bounded number
of times; ``session_in_use(session)`` is the session to use now: a new one on the same server once the last was
dropped. A client waits ``CONNECT_WAIT_SECONDS`` at most for a server to accept connections, then raises
``SparkUnavailable`` naming the address; an open session gives up a request after ``REQUEST_RETRY`` (pyspark
alone would try for about ten minutes).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TypeVar

from pyspark.sql import SparkSession

from csparql.runtime.jvm_output import incubator_warning_dropped
from csparql.storage.aws_variables import s3_in_use
from csparql.runtime.object_storage import configure_session, spark_s3_settings

T = TypeVar("T")
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
    if s3_in_use():
        settings.update(spark_s3_settings())
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
        if key == "spark.jars.packages" and given.get(key):
            builder = builder.config(key, ",".join(dict.fromkeys([*given[key].split(","), *value.split(",")])))
            continue
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
            return _reaching_s3(active)
        _prepare_environment()
        _quiet_python_loggers()
        master = configured_master(master)
        if master.startswith("sc://"):
            return _reaching_s3(_connect_session(master, app_name))
        log.info("Spark: a session of its own in this process, master %s", master)
        # A master chosen over an exported SPARK_REMOTE: PySpark refuses a session given both.
        os.environ.pop(SPARK_REMOTE, None)
        with incubator_warning_dropped():  # the driver JVM starts here
            session = configure(SparkSession.builder.master(master), master, app_name).getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        return _reaching_s3(session)


def _reaching_s3(session: SparkSession) -> SparkSession:
    """``session``, its Hadoop settings made to reach S3 when this process uses an S3 warehouse."""
    if s3_in_use():
        configure_session(session)
    return session


def without_secrets(url: str) -> str:
    """A Spark Connect URL fit for a log: ``sc://host:port`` with its parameters (a token) left out."""
    return url.split(";", 1)[0].rstrip("/")


CONNECT_PORT = 15002
"""The port of an ``sc://`` URL that names none (Spark Connect's)."""
CONNECT_WAIT_SECONDS = 30.0
"""How long a client waits for a Spark Connect server to accept connections before ``SparkUnavailable``: a
server restarting takes 10–30 s to listen again."""
REQUEST_RETRY = {"max_retries": 8, "initial_backoff": 50, "backoff_multiplier": 2.0, "max_backoff": 5000}
"""How an open Connect session retries a request the server cannot take (``UNAVAILABLE``): 8 times over about
12 s (pyspark's default policy with these arguments, in milliseconds)."""
SESSION_ATTEMPTS = 3
"""How many times ``retry_on_lost_session`` runs an action whose session the server lost."""
RETRY_PAUSE_SECONDS = 1.0
"""The pause before the second attempt; each later one waits this much longer."""

_LOST_CONDITIONS = ("INVALID_HANDLE.SESSION_CLOSED", "INVALID_HANDLE.SESSION_NOT_FOUND",
                    "INVALID_HANDLE.SESSION_CHANGED")
_LOST_TEXT = re.compile("|".join(map(re.escape, (*_LOST_CONDITIONS, "incorrect server side session identifier",
                                                 "Cannot invoke RPC on closed channel"))))
_session_urls: dict[str, str] = {}  # session id -> the URL it was opened with


class SparkUnavailable(ConnectionError):
    """No Spark Connect server accepts connections at an address: the message names it. ``answered_before``:
    a server there had given this process a session (it is restarting, and ``retry_on_lost_session`` waits
    for it again), not a server never reached."""

    def __init__(self, message: str, answered_before: bool = False):
        super().__init__(message)
        self.answered_before = answered_before


def connect_address(url: str) -> tuple[str, int]:
    """The host and port an ``sc://host:port/;params`` URL names (port 15002 when it names none)."""
    authority = url.split("://", 1)[-1].split(";", 1)[0].split("/", 1)[0]
    host, colon, port = authority.rpartition(":")
    if not colon or not port.isdigit():
        return authority or "localhost", CONNECT_PORT
    return host.strip("[]") or "localhost", int(port)


def wait_for_server(url: str, timeout: float = CONNECT_WAIT_SECONDS) -> None:
    """Return once the Spark Connect server of ``url`` accepts a TCP connection; ``SparkUnavailable`` when none
    does within ``timeout`` seconds."""
    host, port = connect_address(url)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=2):
                return
        except OSError as error:
            if time.monotonic() >= deadline:
                raise SparkUnavailable(
                    f"no Spark Connect server answers at {without_secrets(url)} (waited {timeout:.0f} s: "
                    f"{error.strerror or error}); start one, or pass another --master or SPARK_REMOTE",
                    answered_before=url in _session_urls.values()) from None
        time.sleep(0.5)


def _connect_session(url: str, app_name: str) -> SparkSession:
    """A session of the Spark Connect server at ``url`` (the process's default one if the server still has it,
    else a new one), its requests retried as ``REQUEST_RETRY`` says; ``SparkUnavailable`` when no server
    listens there."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    wait_for_server(url)
    log.info("Spark: a session of the Spark Connect server %s", without_secrets(url))
    try:
        session = configure(SparkSession.builder.remote(url), url, app_name).getOrCreate()
    except Exception as error:  # the default session's settings are sent to the server, which may have lost it
        if not session_lost(error):
            raise
        log.warning("Spark Connect: the server lost this process's session (%s); opening a new one",
                    " ".join(str(error).split())[:300])
        _drop_unlocked(None)  # spark_session holds _LOCK
        session = configure(SparkSession.builder.remote(url), url, app_name).getOrCreate()
    if session.session_id not in _session_urls:
        session.client.set_retry_policies([DefaultPolicy(**REQUEST_RETRY)])
        _session_urls[session.session_id] = url
    return session


def is_connect_session(session) -> bool:
    """Whether ``session`` is a Spark Connect client's session."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def session_lost(error: BaseException) -> bool:
    """Whether ``error`` (or one it was raised from or while handling) says the Spark Connect server no longer
    has the session: it closed it (an idle timeout), it restarted, or it cannot be reached (``UNAVAILABLE``,
    ``SparkUnavailable`` of a server that had answered)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, SparkUnavailable):
            return current.answered_before
        condition = getattr(current, "getCondition", None)
        if callable(condition) and (condition() or "") in _LOST_CONDITIONS:
            return True
        status = getattr(current, "getGrpcStatusCode", None) or getattr(current, "code", None)
        if callable(status):
            try:
                if getattr(status(), "name", None) == "UNAVAILABLE":
                    return True
            except Exception:  # noqa: BLE001 - an error object that cannot tell its status
                pass
        try:
            if _LOST_TEXT.search(str(current)):
                return True
        except Exception:  # noqa: BLE001 - a Java error whose JVM is gone cannot print itself
            pass
        current = current.__cause__ or current.__context__
    return False


def drop_session(session=None) -> None:
    """Forget the Spark Connect session ``session`` (None: the process's default one and this thread's active
    one): its channel closed, without asking the server to release it (the server has lost it, or drops it
    after its idle timeout), so that the next ``spark_session`` opens a new one. A classic session is left
    alone, and so is a new session another thread opened meanwhile."""
    with _LOCK:
        _drop_unlocked(session)


def _drop_unlocked(session=None) -> None:
    """``drop_session``, its caller holding ``_LOCK``."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    found = [session] if session is not None else [
        ConnectSession._default_session, getattr(ConnectSession._active_session, "session", None)]
    for each in {id(s): s for s in found if s is not None}.values():
        if not is_connect_session(each):
            continue
        each.release_session_on_close = False
        each.stop()  # also when the client closed itself: stop() forgets it as default and active session
        if ConnectSession._default_session is each:
            ConnectSession._default_session = None


def session_in_use(session, master: str | None = None, app_name: str = "csparql"):
    """The session to run Spark with now: ``session`` while it is open, else (None, or a Connect session
    ``drop_session`` closed) ``spark_session`` of the server it was opened with (``master`` for None)."""
    if session is not None and not (is_connect_session(session) and session.is_stopped):
        return session
    url = _session_urls.get(session.session_id) if session is not None else None
    return spark_session(url or master, app_name)


def retry_on_lost_session(action: Callable[[], T], session: Callable[[], object] | None = None,
                          attempts: int = SESSION_ATTEMPTS, what: str = "the action") -> T:
    """``action()``, run again when it fails because the Spark Connect server lost its session
    (``session_lost``): the session (``session()``, else the process's default Connect session) is dropped, and
    ``action`` — which takes its session through ``spark_session`` or ``session_in_use`` — runs on a new one,
    after a pause growing by ``RETRY_PAUSE_SECONDS``, at most ``attempts`` times in all. Any other error, and
    the last attempt's, is raised. ``action`` must be safe to run again after a failure."""
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as error:
            if attempt == attempts or not session_lost(error):
                raise
            log.warning("Spark Connect: the server lost the session of %s (%s); again on a new session "
                        "(attempt %d of %d)", what, " ".join(str(error).split())[:300], attempt + 1, attempts)
            drop_session(session() if session is not None else None)
            time.sleep(RETRY_PAUSE_SECONDS * attempt)
    raise AssertionError("unreachable")


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
        return _reaching_s3(session)


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

