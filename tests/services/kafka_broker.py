"""A real Apache Kafka broker on 127.0.0.1 for tests: one KRaft node (broker and controller in one JVM).

``broker_classpath()`` resolves the broker's jars (``org.apache.kafka:kafka_2.13``, ``KAFKA_VERSIONS`` in order
of preference, with Log4j's SLF4J binding so that the broker's log is written) from Maven Central through the
Ivy jar pyspark ships, once: the jars stay in Ivy's cache (``IVY_HOME``, the folder Spark keeps its packages in)
and the classpath in a file beside it, which later runs read without reaching the network. The first run
downloads 45 jars, about 45 MB.

``KafkaBroker(folder, classpath)`` writes a minimal single-node ``server.properties`` (free loopback ports for
the client and the controller listeners, its log in ``folder``, every internal topic with one replica), formats
its storage once, and ``start``s ``java -cp ... kafka.Kafka`` waiting until a client gets the cluster's
metadata; ``stop`` shuts it down (controlled, then killed), ``restart`` starts it again on the same ports and
log, ``kill`` ends it at once. ``kafka_broker_or_skip`` is what the test fixtures call: a skip where Java or the
jars cannot be had, a failure when ``$CSPARQL_TESTS_REQUIRE_TOOLS`` is 1 (as in CI).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from csparql.stack.airflow_stack import free_port
from support import tool_missing

KAFKA_VERSIONS = ("4.4.0", "4.3.1")
"""The broker versions tried, newest first: the first that Maven Central serves is used."""
LOG4J_VERSION = "2.25.5"
"""The SLF4J binding's version: the broker's log4j-core's (Kafka's own distribution ships the binding)."""
IVY_HOME = Path(os.environ.get("CSPARQL_TEST_IVY_HOME", Path.home() / ".ivy2.5.2"))
RESOLVE_TIMEOUT = 600
START_TIMEOUT = 90
JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
"""A small heap, the quick compiler and one collector thread: the broker serves a test's few MB on two cores."""


class BrokerUnavailable(RuntimeError):
    """Java or the broker's jars cannot be had on this machine."""


def _ivy_jar() -> Path:
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"))
    if not jars:
        raise BrokerUnavailable("pyspark ships no ivy jar to resolve the Kafka broker's jars with")
    return jars[-1]


def _ivy_module(version: str) -> str:
    return f"""<ivy-module version="2.0">
  <info organisation="csparql.tests" module="kafka-broker"/>
  <configurations><conf name="default"/></configurations>
  <dependencies>
    <dependency org="org.apache.kafka" name="kafka_2.13" rev="{version}" conf="default->default"/>
    <dependency org="org.apache.logging.log4j" name="log4j-slf4j-impl" rev="{LOG4J_VERSION}" conf="default->default"/>
  </dependencies>
</ivy-module>
"""


def broker_classpath() -> tuple[str, str]:
    """(the broker's version, its classpath), resolved on first use and cached (see the module docstring);
    ``BrokerUnavailable`` saying why when neither Java nor Maven Central's jars can be had."""
    java = shutil.which("java")
    if java is None:
        raise BrokerUnavailable("java is not installed (the Kafka broker runs on Java 17 or newer)")
    IVY_HOME.mkdir(parents=True, exist_ok=True)
    with open(IVY_HOME / ".csparql-kafka-broker.lock", "w") as lock:  # two test workers resolve it once
        fcntl.flock(lock, fcntl.LOCK_EX)
        problems = []
        for version in KAFKA_VERSIONS:
            cached = IVY_HOME / f"csparql-kafka-broker-{version}.classpath"
            if cached.is_file():
                classpath = cached.read_text().strip()
                if classpath and all(Path(jar).is_file() for jar in classpath.split(os.pathsep)):
                    return version, classpath
            work = IVY_HOME / f".csparql-kafka-broker-{version}"
            work.mkdir(exist_ok=True)
            (work / "ivy.xml").write_text(_ivy_module(version))
            partial = work / "classpath.partial"
            partial.unlink(missing_ok=True)
            try:
                run = subprocess.run([java, "-cp", str(_ivy_jar()), "org.apache.ivy.Main", "-ivy",
                                      str(work / "ivy.xml"), "-cache", str(IVY_HOME / "cache"), "-confs", "default",
                                      "-cachepath", str(partial)],
                                     capture_output=True, text=True, timeout=RESOLVE_TIMEOUT)
            except subprocess.TimeoutExpired:
                problems.append(f"{version}: Ivy did not finish within {RESOLVE_TIMEOUT} s")
                continue
            classpath = partial.read_text().strip() if partial.is_file() else ""
            if run.returncode != 0 or "kafka_2.13" not in classpath:
                lines = [line.strip(" \t:") for line in (run.stdout + run.stderr).splitlines()]
                said = [line for line in lines if any(word in line for word in ("not found", "FAILED", "rror"))]
                problems.append(f"{version}: {'; '.join(said[:2]) or 'Ivy resolved nothing'}")
                continue
            partial.replace(cached)
            return version, classpath
        raise BrokerUnavailable("the Kafka broker's jars could not be resolved from Maven Central: "
                                + "; ".join(problems))


def cluster_id() -> str:
    """A new KRaft cluster id: a UUID in URL-safe base64, as ``kafka-storage random-uuid`` prints one, never
    starting with ``-`` (which the storage tool's argument parser would read as an option)."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


LOG4J2 = """status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class KafkaBroker:
    """One KRaft node on loopback (see the module docstring); ``bootstrap`` is its client listener."""

    def __init__(self, folder: Path, classpath: str, version: str = "") -> None:
        self.folder, self.classpath, self.version = Path(folder), classpath, version
        self.port, self.controller_port = free_port(), free_port()
        self.logs = self.folder / "data"
        self.properties = self.folder / "server.properties"
        self.output = self.folder / "broker.out"
        self.process: subprocess.Popen | None = None
        self._write_configuration()
        self._formatted = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_configuration(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.properties.write_text("\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={self.logs}",
            "num.partitions=1",
            "num.network.threads=2",
            "num.io.threads=2",
            "num.recovery.threads.per.data.dir=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "",
        ]))
        (self.folder / "log4j2.properties").write_text(LOG4J2.format(log=self.folder / "server.log"))

    def _java(self, main: str, *arguments: str) -> list[str]:
        return [shutil.which("java") or "java", *JVM_OPTIONS,
                f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.folder}", "-cp", self.classpath, main, *arguments]

    def _format(self) -> None:
        run = subprocess.run(self._java("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id()}", "-c",
                                        str(self.properties), "--ignore-formatted"),
                             capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            raise RuntimeError(f"formatting the Kafka broker's storage failed: {run.stdout}{run.stderr}")
        self._formatted = True

    def start(self) -> None:
        """Start the broker (its storage formatted on first start) and wait until it serves metadata."""
        if not self._formatted:
            self._format()
        with open(self.output, "ab") as output:
            self.process = subprocess.Popen(self._java("kafka.Kafka", str(self.properties)), stdout=output,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        self.wait_until_ready()

    def wait_until_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until a client gets the cluster's metadata with this broker in it, and the consumer groups'
        coordinator answers; the broker's output when it exits or the time runs out."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.connection.setup.timeout.ms": 2000})
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited ({self.process.returncode}): {self._tail()}")
            try:
                metadata = admin.list_topics(timeout=2)
                if metadata.brokers:
                    admin.list_consumer_groups(request_timeout=2).result()
                    return
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the Kafka broker was not ready within {timeout} s: {self._tail()}")
            time.sleep(0.3)

    def _tail(self) -> str:
        text = ""
        for path in (self.output, self.folder / "server.log"):
            if path.is_file():
                text += "\n".join(path.read_text(errors="replace").splitlines()[-15:]) + "\n"
        return text

    def stop(self, timeout: float = 60) -> None:
        """Shut the broker down (SIGTERM: a controlled shutdown that flushes its log), killed past
        ``timeout``."""
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def kill(self) -> None:
        """End the broker at once (SIGKILL)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None

    def restart(self) -> None:
        """Stop the broker and start it again on the same ports and log."""
        self.stop()
        self.start()


def kafka_broker_or_skip(folder: Path) -> KafkaBroker:
    """A started broker in ``folder``; the test is skipped (failed with ``$CSPARQL_TESTS_REQUIRE_TOOLS``) where
    Java or the broker's jars cannot be had."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        tool_missing("confluent-kafka is not installed (pip install 'csparql[kafka]')")
    try:
        version, classpath = broker_classpath()
    except BrokerUnavailable as error:
        tool_missing(str(error))
    broker = KafkaBroker(folder, classpath, version)
    broker.start()
    return broker
