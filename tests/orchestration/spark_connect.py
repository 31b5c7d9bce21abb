"""A real Spark Connect server on 127.0.0.1 for tests, and windows evaluated through it in a fresh process.

``test_server(work)`` is the product's launcher (``csparql.runtime.connect_server.ConnectServer``: the settings a
Connect client cannot send, the token, the process group) sized for a test: ``local[1]``, a 1 GB driver, a free
port, and a JVM tuned for a short life. Start it early (``start``), take its URL when needed
(``wait_until_answering``), ``stop`` it at the end.

``evaluate_over_connect(url, ...)`` evaluates windows with ``Engine.evaluate`` on a session from
``spark_session(url)`` in a new Python process: a process that holds a classic SparkSession (the test suite's)
cannot also open a Connect one (PySpark's builder refuses with ``SESSION_ALREADY_EXIST``, and
``spark_session(url)`` returns the active classic session).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from csparql.runtime.connect_server import ConnectServer
from orchestration.spark_cluster import RESULT_PREFIX, free_port, spark_environment

SERVER_MASTER = "local[1]"
DRIVER_MEMORY = "1g"
SHORT_LIFE_JVM = "-XX:TieredStopAtLevel=1"
"""A short-lived test JVM spends much of its CPU in the C2 JIT compiler: C1 alone serves a test faster."""


class ConnectServerError(RuntimeError):
    """An evaluation through the server failed; the message carries its output."""


def test_server(work: Path) -> ConnectServer:
    """The product's Connect server, not started, sized for a test (see the module docstring)."""
    return ConnectServer(Path(work), port=free_port(), master=SERVER_MASTER, memory=DRIVER_MEMORY,
                         jvm_options=SHORT_LIFE_JVM)


test_server.__test__ = False  # a factory, not a test


def ingest_city_hour(spark, root: Path, streams: Sequence[str] = ("http://streams.org/citytollgates.trdf",)):
    """One hour of the sample city in a new warehouse under ``root``: the ``streams`` and the default static
    graph, ingested with ``spark``; the warehouse and the sample files."""
    from csparql.ingest.ingest import ingest_stream, load_static
    from csparql.samples import write_samples
    from csparql.storage.warehouse import Warehouse

    warehouse = Warehouse(Path(root) / "warehouse")
    samples = write_samples(Path(root) / "samples", hours=1)
    for stream in streams:
        ingest_stream(spark, warehouse, stream, [samples.streams[stream]])
    load_static(spark, warehouse, None, [samples.graphs[None]], replace=True)
    return warehouse, samples


# Run in a fresh interpreter: compile each query file, evaluate its window through the Connect server (results
# and run written), print one CSPARQL_RESULT line per evaluation.
_EVALUATE = """
import json, sys
from pathlib import Path
from csparql.engine.runner import Engine
from csparql.core.frontend import compile_query
from csparql.runtime.session import spark_session
from csparql.storage.warehouse import Warehouse

url, warehouse, at, *pairs = sys.argv[1:]
spark = spark_session(url)
engine = Engine(Warehouse(Path(warehouse)), spark)
schema_requests = []  # the client's AnalyzePlan requests for a plan's schema
ask_schema = spark.client.schema
spark.client.schema = lambda *args, **kwargs: schema_requests.append(1) or ask_schema(*args, **kwargs)
for query, name in zip(pairs[::2], pairs[1::2]):
    plan = compile_query(Path(query).read_text(encoding="utf-8"), query)
    asked = len(schema_requests)
    evaluation = engine.evaluate(plan, int(at), name)
    record = {"name": name, "session": type(spark).__module__, "window_start": evaluation.window.start,
              "window_end": evaluation.window.end, "rows_written": evaluation.rows_written,
              "run_id": evaluation.run_id, "duration_ms": evaluation.duration_ms,
              "schema_requests": len(schema_requests) - asked}
    print(RESULT_PREFIX + json.dumps(record), flush=True)
spark.stop()
"""


def evaluate_over_connect(url: str, queries: Sequence[tuple[Path, str]], at: int, warehouse: Path, work: Path,
                          timeout: float = 240.0) -> dict[str, dict]:
    """Evaluate the window at ``at`` of each (query file, result name) through the server at ``url``, in one
    new Python process, writing results and runs into ``warehouse``; the CSPARQL_RESULT record of each name."""
    env = spark_environment(Path(work))
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "PYSPARK_GATEWAY_PORT"):
        env.pop(key, None)
    arguments = [url, str(warehouse), str(at)]
    for query, name in queries:
        arguments += [str(query), name]
    code = f"RESULT_PREFIX = {RESULT_PREFIX!r}\n{_EVALUATE}"
    try:
        finished = subprocess.run([sys.executable, "-c", code, *arguments], env=env, cwd=work, capture_output=True,
                                  text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as error:
        stderr = error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) else error.stderr or ""
        raise ConnectServerError(f"the evaluation over {url} did not finish in {timeout:.0f} s\n"
                                 f"{stderr[-3000:]}") from None
    records = {}
    for line in finished.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            record = json.loads(line[len(RESULT_PREFIX):])
            records[record["name"]] = record
    if finished.returncode != 0 or len(records) != len(queries):
        raise ConnectServerError(f"the evaluation over {url} exited with status {finished.returncode}\n"
                                 f"--- stdout:\n{finished.stdout[-3000:]}\n--- stderr:\n{finished.stderr[-4000:]}")
    return records
