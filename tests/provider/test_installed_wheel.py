"""csparql as a data engineer installs it into their own Airflow: the wheel built from this
repository, installed with the pins of ``constraints.txt`` into a fresh virtual environment (not ``.venv``);
a plain Airflow 3.3 of that environment — api-server, scheduler, triggerer, DAG processor — with its
``AIRFLOW_HOME`` in a temporary folder, no checkout on ``PYTHONPATH`` or as the working directory, configured
only through ``AIRFLOW__CSPARQL__*`` and one ``spark_connect`` connection (to a Connect server started by the
package's own launcher from that environment), and a one-line DAG file of the user's in its DAGs folder.

One stack serves the module. Building the wheel and installing it (with uv) takes under a minute the first time
(uv downloads Airflow and Spark into its cache) and seconds once its cache holds them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from uv import find_uv_bin

from csparql.deploy.plan import ingest_dag_id
from csparql.storage.stored import StoredResults
from csparql.stack.airflow_stack import AirflowStack
from csparql.storage.warehouse import Warehouse, slug
from csparql.core.windows import format_instant, parse_instant

from conformance import reference

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

REPOSITORY = Path(__file__).resolve().parents[2]
AIRFLOW_PORTS = range(18700, 18800)
CONNECT_PORTS = range(15700, 15800)
CONNECTION_ID = "csparql_spark"
USER_DAG = "from csparql.orchestration.factory import csparql_dags; globals().update(csparql_dags())  # Airflow DAGs\n"
"""The user's one-line DAG file: every registered query's DAG and every stream's ingestion DAG. Airflow's
DAG processor only parses files that mention both "airflow" and "dag" (its safe mode): hence the comment."""

OWN_DAG = """# An Airflow DAG of the user's own: one task evaluating a C-SPARQL query file's window through the connection.
import pendulum
from airflow.sdk import DAG

from csparql.orchestration.operators import CsparqlEvaluateWindowOperator

with DAG("own_gate_counts", schedule=None, start_date=pendulum.datetime(2010, 1, 1, tz="UTC")):
    CsparqlEvaluateWindowOperator(task_id="evaluate", query={query!r}, name="own_gate_counts", conn_id={conn_id!r})
"""
"""A DAG a user writes with the public operator: plain arguments (a query file, a result name, a connection)."""

EX = "http://example.org/provider/"
STREAM = f"{EX}gates"
QUERY_NAME = "ProviderGateCounts"
QUERY = f"""REGISTER QUERY {QUERY_NAME} COMPUTED EVERY 10m AS
PREFIX ex: <{EX}>
SELECT ?gate (COUNT(?car) AS ?cars)
FROM STREAM <{STREAM}> [RANGE 10m TUMBLING]
WHERE {{ ?gate ex:registers ?car }}
GROUP BY ?gate
"""
START = parse_instant("2010-03-22T08:00:00Z")
MINUTE = 60_000_000
TRIPLES = [(f"gate{i % 3}", f"car{i}", START + 17 * MINUTE + i * 20_000_000) for i in range(40)]
"""(gate, car, µs): 40 passages from 08:17:00 to 08:30:00, across the windows ending 08:20 and 08:30."""

# Runs in the installed environment: the package's own launcher of a Connect server, until SIGTERM.
CONNECT_SERVER = """
import os, signal, sys
from pathlib import Path
from csparql.runtime.connect_server import ConnectServer
server = ConnectServer(Path(sys.argv[1]), port=int(sys.argv[2]), master="local[1]", memory="1g",
                       token=os.environ["PROVIDER_TEST_TOKEN"])
server.start()
stop = {signal.SIGTERM, signal.SIGINT}
signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # (after the start: the server must not inherit it) for sigwait
try:
    server.wait_until_answering(300)
    print("answering", flush=True)
    signal.sigwait(stop)
finally:
    server.stop()
"""


def free_port(ports: range) -> int:
    for port in ports:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")


def run(command: list, timeout: float = 1200, **kwargs) -> str:
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, command))} failed:\n{(done.stdout + done.stderr)[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The interpreter of a fresh virtual environment holding the wheel and its pinned dependencies."""
    work = tmp_path_factory.mktemp("wheel")
    # built from a copy of what the image copies (Dockerfile): a build in the checkout would leave
    # plugins/csparql.egg-info there, a second csparql distribution for the checkout's own environment
    source = work / "source"
    shutil.copytree(REPOSITORY / "plugins" / "csparql", source / "plugins" / "csparql",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "constraints.txt"):
        shutil.copy(REPOSITORY / name, source / name)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", work / "dist", source],
        cwd=work)
    wheel = next((work / "dist").glob("csparql-*.whl"))
    run([sys.executable, "-m", "venv", work / "venv"], cwd=work)
    python = work / "venv" / "bin" / "python"
    clean = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    # uv resolves and installs as pip does (the same constraints, the same wheels from PyPI) in seconds rather
    # than minutes; modules are compiled to bytecode as a process first imports them
    run([find_uv_bin(), "pip", "install", "--quiet", "--python", python, "-c", REPOSITORY / "constraints.txt",
         wheel], cwd=work, env=clean)
    return python


@pytest.fixture(scope="module")
def world(installed, tmp_path_factory):
    root = tmp_path_factory.mktemp("provider")
    home = root / "airflow"
    dags = home / "dags"
    dags.mkdir(parents=True)
    (dags / "csparql_queries.py").write_text(USER_DAG, encoding="utf-8")
    (root / "own_gate_counts.rq").write_text(QUERY.replace(QUERY_NAME, "OwnGateCounts"), encoding="utf-8")
    (dags / "own_gate_counts.py").write_text(OWN_DAG.format(query=str(root / "own_gate_counts.rq"),
                                                            conn_id=CONNECTION_ID), encoding="utf-8")
    warehouse = root / "warehouse"
    token = os.urandom(18).hex()
    connect_port = free_port(CONNECT_PORTS)
    server = subprocess.Popen(
        [str(installed), "-c", CONNECT_SERVER, str(root / "spark-connect"), str(connect_port)],
        env={key: value for key, value in os.environ.items() if key in ("PATH", "HOME", "LANG", "TMPDIR", "JAVA_HOME")}
        | {"PROVIDER_TEST_TOKEN": token}, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    settings = {
        "AIRFLOW__CSPARQL__WAREHOUSE": str(warehouse),
        "AIRFLOW__CSPARQL__SPARK": "connect",
        "AIRFLOW__CSPARQL__SPARK_CONN_ID": CONNECTION_ID,
        "AIRFLOW__CSPARQL__ALLOWED_LATENESS": "0s",
        "AIRFLOW__CSPARQL__WAIT_TIMEOUT": "1d",
        "AIRFLOW__CSPARQL__POLL_INTERVAL": "2s",
    }
    lineage = {  # the OpenLineage provider writes every event it sends, one JSON line each
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(root / "lineage.jsonl"), "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "csparql-provider",
        # events are sent from a thread of the task process, not from forks of it
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
        # a plain Airflow's parsing interval (the embedded stack's 600 s relies on registrations touching the DAG
        # files beside the registry; this DAG file is the user's own, elsewhere)
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",
    }
    stack = AirflowStack(home=home, dags=dags, settings_environment=settings, port=free_port(AIRFLOW_PORTS),
                         python=installed, isolated=True, pool_slots=2, extra_environment=lineage)
    try:
        stack.set_up()
        stack.run_airflow("connections", "add", CONNECTION_ID, "--conn-type", "spark_connect", "--conn-host",
                          "localhost", "--conn-port", str(connect_port), "--conn-password", token)
        assert server.stdout.readline().strip() == "answering", server.stdout.read()
        stack.start()
        stack.supervise_in_background()
        stack.wait_until_healthy()
        yield {"root": root, "stack": stack, "python": installed, "warehouse": Warehouse(warehouse),
               "landing": warehouse / "landing" / slug(STREAM)}
    finally:
        stack.stop()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def test_the_package_is_imported_from_the_fresh_environment_not_the_checkout(world):
    where = run([world["python"], "-c", "import csparql; print(csparql.__file__)"], cwd=world["root"],
                env={"PATH": os.environ["PATH"]})
    assert "site-packages" in where and not where.startswith(str(REPOSITORY))


def test_airflow_lists_the_provider_its_configuration_section_and_the_plugin(world):
    stack = world["stack"]
    assert "csparql" in stack.run_airflow("providers", "list")
    section = stack.run_airflow("config", "list", "--section", "csparql", "--show-values", "--include-descriptions")
    assert f"warehouse = {world['warehouse'].root}" in section
    home = stack.home.resolve()
    assert "revision_horizon = 1d" in section and f"registry = {home}/csparql/queries" in section, section
    assert "# The warehouse: every stream" in section  # each option with its description
    assert "csparql" in stack.run_airflow("plugins")


def test_the_pages_answer_behind_the_login(world):
    stack = world["stack"]
    with httpx.Client(base_url=f"{stack.url}/csparql", timeout=60, trust_env=False) as anonymous:
        assert anonymous.get("/", headers={"Accept": "application/json"}).status_code == 401
    with httpx.Client(base_url=f"{stack.url}/csparql", timeout=60, trust_env=False,
                      headers={"Authorization": f"Bearer {stack.token()}"}) as admin:
        assert admin.get("/", headers={"Accept": "text/html"}).status_code == 200


def test_a_query_registered_through_the_page_is_evaluated_on_landed_data_as_pyoxigraph_evaluates_it(world):
    stack, warehouse, landing = world["stack"], world["warehouse"], world["landing"]
    with httpx.Client(base_url=f"{stack.url}/csparql", timeout=60, trust_env=False,
                      headers={"Authorization": f"Bearer {stack.token()}", "Accept": "application/json"}) as admin:
        answer = admin.post("/queries", data={"name": QUERY_NAME, "text": QUERY})
    assert answer.status_code == 200 and answer.json()["done"] == "registered", answer.text
    ingest = ingest_dag_id(STREAM)
    stack.wait_for_dags([QUERY_NAME, ingest], timeout=240)

    landing.mkdir(parents=True, exist_ok=True)
    lines = "".join(f'<{EX}{gate}> <{EX}registers> <{EX}{car}> "{format_instant(ts)}"'
                    '^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n' for gate, car, ts in TRIPLES)
    (landing / ".gates.nq").write_text(lines, encoding="utf-8")
    (landing / ".gates.nq").rename(landing / "gates.nq")
    stack.unpause(ingest)
    stack.api("POST", f"dags/{ingest}/dagRuns", {"logical_date": None})
    deadline = time.monotonic() + 300
    while not (landing / "done" / "gates.nq").exists() and time.monotonic() < deadline:
        time.sleep(2)
    assert (landing / "done" / "gates.nq").exists(), stack.log_tail("scheduler")

    stack.unpause(QUERY_NAME)
    stack.backfill(QUERY_NAME, "2010-03-22T08:20:00Z", "2010-03-22T08:30:00Z")
    stack.wait_for_backfills(QUERY_NAME, timeout=300)
    stored = {end: result for _, end, result in StoredResults(warehouse, QUERY_NAME).windows()}
    ends = [START + 20 * MINUTE, START + 30 * MINUTE]
    assert sorted(stored) == ends
    from rdflib import URIRef

    stream = [(URIRef(f"{EX}{gate}"), URIRef(f"{EX}registers"), URIRef(f"{EX}{car}"), ts) for gate, car, ts in TRIPLES]
    for end in ends:
        expected = reference.evaluate(reference.Case(QUERY_NAME, QUERY, {URIRef(STREAM): stream}, {}, end))
        assert Counter(tuple(map(str, row)) for row in stored[end].rows) == Counter(
            tuple(map(str, row)) for row in expected.rows), format_instant(end)


def lineage_events(world, job: str) -> list[dict]:
    """The COMPLETE events the OpenLineage provider wrote for the Airflow task ``job`` (``dag_id.task_id``)."""
    path = world["root"] / "lineage.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [event for event in map(json.loads, lines) if event["eventType"] == "COMPLETE"
            and event["job"]["name"] == job]


def test_the_ingest_reports_its_lineage_the_files_landed_and_the_stream_written(world):
    from csparql.storage.revisions import table_version

    stream_table = world["warehouse"].stream(STREAM)
    events = lineage_events(world, f"{ingest_dag_id(STREAM)}.ingest_landed_files")
    landed = [event for event in events if event["inputs"]]
    assert landed, "the registration test lands gates.nq first"
    [event] = landed
    assert [d["name"] for d in event["inputs"]] == [str(world["landing"] / "done" / "gates.nq")]
    assert [(d["namespace"], d["name"], d["facets"]["version"]["datasetVersion"]) for d in event["outputs"]] == [
        ("file", str(stream_table), str(table_version(stream_table)))]


def test_a_dag_of_the_user_s_own_evaluates_a_window_through_the_connection_as_pyoxigraph_does(world):
    from rdflib import URIRef

    stack, warehouse = world["stack"], world["warehouse"]
    assert (world["landing"] / "done" / "gates.nq").exists(), "the registration test lands the stream first"
    at = START + 30 * MINUTE
    stack.wait_for_dags(["own_gate_counts"], timeout=240)
    stack.unpause("own_gate_counts")
    run = stack.api("POST", "dags/own_gate_counts/dagRuns", {
        "logical_date": format_instant(at), "data_interval_start": format_instant(at),
        "data_interval_end": format_instant(at)})
    stack.wait_for_runs("own_gate_counts", 1)

    [(start, end, stored)] = list(StoredResults(warehouse, "own_gate_counts").windows())
    assert (start, end) == (at - 10 * MINUTE, at)
    stream = [(URIRef(f"{EX}{gate}"), URIRef(f"{EX}registers"), URIRef(f"{EX}{car}"), ts) for gate, car, ts in TRIPLES]
    expected = reference.evaluate(reference.Case("own", QUERY, {URIRef(STREAM): stream}, {}, at))
    assert stored.rows and Counter(tuple(map(str, row)) for row in stored.rows) == Counter(
        tuple(map(str, row)) for row in expected.rows)

    # Through a spark_connect connection the window is evaluated on the triggerer, which ends the task: no task
    # process runs, so the trigger sends the lineage the provider's listener would have sent (docs/orchestration.md)
    task = stack.api("GET", f"dags/own_gate_counts/dagRuns/{run['dag_run_id']}/taskInstances/evaluate")
    assert (task["state"], task["pid"]) == ("success", None)
    [event] = lineage_events(world, "own_gate_counts.evaluate")
    assert [d["name"] for d in event["inputs"]] == [str(warehouse.stream(STREAM))]
    assert event["inputs"][0]["facets"]["csparqlWindow"]["windowEnd"] == format_instant(at)
    assert [d["name"] for d in event["outputs"]] == [str(warehouse.results("own_gate_counts", "bindings"))]
