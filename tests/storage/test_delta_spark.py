"""csparql's Delta tables are standard Delta: the real delta-spark connector (in a subprocess of its own,
``storage.delta_spark``) reads every kind of table csparql writes with the rows, column types, partition columns
and commits delta-rs reads; a stream table delta-spark writes (a batch append, a Structured Streaming job) is
a stream csparql evaluates as pyoxigraph does; and tables with deletion vectors or column mapping are refused
with one line naming the table and the feature."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from rdflib import Literal, URIRef

from csparql.deploy.plan import deployment_of
from csparql.deploy.registration import register_text
from csparql.deploy.revisions import detect_after_commits, mark_revised, pending_windows
from csparql.deploy.settings import Settings
from csparql.engine.catalog import Catalog
from csparql.engine.runner import Engine
from csparql.core.frontend import compile_query
from csparql.ingest.ingest import ingest_stream, load_static
from csparql.storage import delta
from csparql.storage import revisions as rv
from csparql.storage.tables import OPERATION
from csparql.storage.terms import term_dict
from csparql.storage.warehouse import Warehouse, output_stream_iri
from csparql.core.windows import format_instant

from conformance import reference
from storage.delta_spark import DeltaSpark, plain, stream_table_ddl

pytestmark = pytest.mark.spark

EX = "http://example.org/"
STREAM = EX + "gates"
GRAPH = EX + "cars"
XSD = "http://www.w3.org/2001/XMLSchema#"
MINUTE = 60_000_000
T0 = 1_600_000_200_000_000 - 1_600_000_200_000_000 % (60 * MINUTE)  # a whole hour


@pytest.fixture(scope="module")
def connector():
    """One delta-spark process for the module's tests."""
    process = DeltaSpark()
    yield process
    process.close()


# --- what delta-rs reads, to compare with ---------------------------------------------------------------------


def _types(node):
    """A Delta schema's (or Spark's, in the same JSON form) column types, without nullability or metadata."""
    if isinstance(node, str):
        return node
    kind = node["type"]
    if kind == "struct":
        return {"struct": [(field["name"], _types(field["type"])) for field in node["fields"]]}
    if kind == "array":
        return {"array": _types(node["elementType"])}
    if kind == "map":
        return {"map": [_types(node["keyType"]), _types(node["valueType"])]}
    return kind


def _multiset(rows) -> Counter:
    return Counter(json.dumps(row, sort_keys=True) for row in rows)


def delta_rs_view(path) -> dict:
    """The table as delta-rs reads it: rows (as ``plain`` makes delta-spark's), types, partitions, commits."""
    table = DeltaTable(str(path))
    return {"rows": [plain(row) for row in table.to_pyarrow_table().to_pylist()],
            "types": _types(json.loads(table.schema().to_json())),
            "partition_columns": list(table.metadata().partition_columns),
            "operations": {commit["version"]: commit["operation"] for commit in table.history()},
            "version": table.version()}


def assert_reads_the_same(connector: DeltaSpark, path, partition_columns: list[str], min_rows: int = 1) -> dict:
    theirs = connector.read(path)
    ours = delta_rs_view(path)
    assert len(ours["rows"]) >= min_rows, path
    assert _multiset(theirs["rows"]) == _multiset(ours["rows"]), path
    assert _types(theirs["schema"]) == ours["types"], path
    assert theirs["partition_columns"] == ours["partition_columns"] == partition_columns, path
    assert [c["version"] for c in theirs["history"]] == list(range(ours["version"] + 1)), path
    assert {c["version"]: c["operation"] for c in theirs["history"]} == ours["operations"], path
    return theirs


# --- 1. every kind of table csparql writes ----------------------------------------------------------------------


def _nquads(path: Path, triples) -> Path:
    """(gate, car, µs) passages as timestamped N-Quads."""
    path.write_text("".join(
        f'<{EX}{g}> <{EX}registers> <{EX}{c}> "{format_instant(ts)}"^^<{XSD}dateTime> .\n'
        for g, c, ts in triples), encoding="utf-8")
    return path


PASSAGES = f"""REGISTER QUERY Passages AS
PREFIX ex: <{EX}>
SELECT ?gate (COUNT(?car) AS ?cars) (MAX(?weight) AS ?heaviest)
FROM STREAM <{STREAM}> [RANGE 1m STEP 1m]
FROM <{GRAPH}>
WHERE {{ ?gate ex:registers ?car . OPTIONAL {{ ?car ex:weight ?weight }} }}
GROUP BY ?gate
"""
ANY_PASSAGE = f"""REGISTER QUERY AnyPassage AS
PREFIX ex: <{EX}>
ASK FROM STREAM <{STREAM}> [RANGE 1m STEP 1m] WHERE {{ ?gate ex:registers ?car }}
"""
SEEN = f"""REGISTER QUERY Seen AS
PREFIX ex: <{EX}>
CONSTRUCT {{ ?car ex:seenAt ?gate }} FROM STREAM <{STREAM}> [RANGE 1m STEP 1m] WHERE {{ ?gate ex:registers ?car }}
"""
BUSY = f"""REGISTER STREAM Busy COMPUTED EVERY 1m AS
PREFIX ex: <{EX}>
CONSTRUCT {{ ?gate ex:busy ?car }} FROM STREAM <{STREAM}> [RANGE 1m STEP 1m] WHERE {{ ?gate ex:registers ?car }}
"""


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory) -> Warehouse:
    """A warehouse made by csparql's own paths: a stream ingested twice (the second time late), a named and the
    default static graph loaded, a registered SELECT query evaluated over three windows and one of them revised
    for the late triples (runs, stale windows, revisions), an ASK, a CONSTRUCT and a REGISTER STREAM query."""
    root = tmp_path_factory.mktemp("csparql")
    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(root / "registry"),
                                          "CSPARQL_WAREHOUSE": str(root / "warehouse"),
                                          "CSPARQL_REVISION_HORIZON": "10m"})
    (root / "registry").mkdir()
    warehouse = settings.warehouse
    (root / "cars.nt").write_text(f'<{EX}c1> <{EX}weight> "1250.5"^^<{XSD}decimal> .\n'
                                  f'<{EX}c2> <{EX}weight> "980"^^<{XSD}integer> .\n', encoding="utf-8")
    load_static(spark, warehouse, GRAPH, [root / "cars.nt"])
    (root / "default.nt").write_text(f'<{EX}g1> <{EX}label> "Gate one"@en .\n', encoding="utf-8")
    load_static(spark, warehouse, None, [root / "default.nt"])
    ingest_stream(spark, warehouse, STREAM, [_nquads(root / "on-time.nq", [
        ("g1", "c1", T0 + 10_000_000), ("g2", "c2", T0 + 20_000_000), ("g1", "c2", T0 + MINUTE + 10_000_000),
        ("g2", "c3", T0 + 2 * MINUTE + 10_000_000)])])

    register_text(PASSAGES, settings, name="Passages")
    deployment = deployment_of(settings.registry / "Passages.rq", settings)
    engine = Engine(warehouse, spark)
    for minutes in (1, 2, 3):
        engine.evaluate(deployment.plan, T0 + minutes * MINUTE, "Passages", version=deployment.version)
    before = rv.table_version(warehouse.stream(STREAM))
    ingest_stream(spark, warehouse, STREAM, [_nquads(root / "late.nq", [("g2", "c9", T0 + 2 * MINUTE + 30_000_000)])])
    stale = detect_after_commits(settings, STREAM, before, now=T0 + 4 * MINUTE)
    assert [w.window_end for w in stale] == [T0 + 3 * MINUTE]
    pending = pending_windows(settings, "Passages")
    engine.evaluate(deployment.plan, T0 + 3 * MINUTE, "Passages", version=deployment.version)
    revision = rv.evaluated_windows(warehouse, {"Passages"})["Passages"][T0 + 3 * MINUTE].revision
    mark_revised(settings, pending[0].stale, revision)
    assert revision == 1

    for text, name in ((ANY_PASSAGE, "AnyPassage"), (SEEN, "Seen"), (BUSY, "Busy")):
        for minutes in (1, 2):
            engine.evaluate(compile_query(text), T0 + minutes * MINUTE, name)
    return warehouse


TABLES = {
    "stream": (lambda w: w.stream(STREAM), ["bucket"]),
    "named static graph": (lambda w: w.static(GRAPH), []),
    "default static graph": (lambda w: w.static(None), []),
    "SELECT results with a revision": (lambda w: w.results("Passages", "bindings"), []),
    "ASK results": (lambda w: w.results("AnyPassage", "answers"), []),
    "CONSTRUCT results": (lambda w: w.results("Seen", "triples"), []),
    "REGISTER STREAM output stream": (lambda w: w.stream(str(output_stream_iri("Busy"))), ["bucket"]),
    "runs": (lambda w: w.runs, []),
    "stale windows": (lambda w: w.stale_windows, []),
    "watermarks": (lambda w: w.watermarks, []),
    "statistics": (lambda w: w.statistics, []),
}


@pytest.mark.parametrize("kind", TABLES)
def test_delta_spark_reads_every_kind_of_table_csparql_writes_as_delta_rs_does(connector, warehouse, kind):
    where, partitions = TABLES[kind]
    path = where(warehouse)
    theirs = assert_reads_the_same(connector, path, partitions)
    assert theirs["protocol"]["minReaderVersion"] == 1, theirs["protocol"]
    if kind == "SELECT results with a revision":
        assert {row["revision"] for row in theirs["rows"]} == {0, 1}
    if kind == "runs":
        assert sorted(row["revision"] for row in theirs["rows"] if row["query"] == "Passages") == [0, 0, 0, 1]
    if kind == "stale windows":
        assert {row["status"] for row in theirs["rows"]} == {"pending", "revised"}


# --- 2. a stream delta-spark writes, evaluated by csparql ---------------------------------------------------------


def _events(seed: int, start: int, count: int, first_arrival: int = 0) -> list[tuple]:
    """``count`` passages (gate, registers, car, τ) and some cars' colours, at distinct instants after ``start``
    over about three minutes, crossing an hour bucket."""
    chosen = random.Random(seed)
    instants = sorted(chosen.sample(range(start, start + 3 * MINUTE, 1_000), count))
    triples = []
    for index, at in enumerate(instants):
        car = URIRef(f"{EX}car{seed}_{index}")
        triples.append((URIRef(f"{EX}gate{chosen.randrange(3)}"), URIRef(EX + "registers"), car, at))
        if chosen.random() < 0.5:
            triples.append((car, URIRef(EX + "colour"), Literal(chosen.choice(["red", "blue"]), lang="en"), at))
    return triples


def _as_events(triples, first_arrival: int = 0) -> list[dict]:
    return [{"s": term_dict(s), "p": term_dict(p), "o": term_dict(o), "ts_micros": at, "arrival": first_arrival + i}
            for i, (s, p, o, at) in enumerate(triples)]


def _queries(stream: str) -> list[tuple[str, str]]:
    return [(f"""REGISTER QUERY Counts AS
PREFIX ex: <{EX}>
SELECT ?gate (COUNT(?car) AS ?cars)
FROM STREAM <{stream}> [RANGE 1m STEP 30s]
WHERE {{ ?gate ex:registers ?car . OPTIONAL {{ ?car ex:colour ?colour }} FILTER (!BOUND(?colour) || STR(?colour) != "red") }}
GROUP BY ?gate""", "Counts"), (f"""REGISTER QUERY Latest AS
PREFIX ex: <{EX}>
SELECT ?gate ?car FROM STREAM <{stream}> [TRIPLES 5] WHERE {{ ?gate ex:registers ?car }}""", "Latest")]


def assert_windows_equal_pyoxigraph(spark, warehouse: Warehouse, stream: str, triples, instants) -> None:
    engine = Engine(warehouse, spark)
    for text, name in _queries(stream):
        plan = compile_query(text)
        for at in instants:
            ours = engine.evaluate(plan, at, name, write=False).result
            truth = reference.evaluate(reference.Case(name, text, {URIRef(stream): triples}, {}, at))
            assert truth.rows, (name, at)
            assert Counter(tuple(map(str, row)) for row in ours.rows) == Counter(
                tuple(map(str, row)) for row in truth.rows), (name, format_instant(at))


START = T0 + 58 * MINUTE  # three minutes from here cross into the next hour's bucket
INSTANTS = [START + seconds * 1_000_000 for seconds in (30, 60, 90, 120, 150, 180)]


def test_a_stream_appended_by_a_delta_spark_batch_job_is_evaluated_as_pyoxigraph_does(connector, spark, tmp_path):
    warehouse = Warehouse(tmp_path / "warehouse")
    stream = EX + "batch-gates"
    path = warehouse.stream(stream)
    triples = _events(1, START, 40)
    half = len(triples) // 2
    connector.sql(stream_table_ddl(str(path), stream))
    connector.append_stream(path, _as_events(triples[:half]))
    connector.append_stream(path, _as_events(triples[half:], half))

    assert Catalog(warehouse).streams() == [(URIRef(stream), str(path))]
    files = delta.live_files(delta.open_table(path), path)
    assert {f.partition["bucket"] for f in files} == {"20200913T12", "20200913T13"}
    assert all(f.min_ts is not None and f.max_ts is not None for f in files)
    assert_windows_equal_pyoxigraph(spark, warehouse, stream, triples, INSTANTS)


def test_a_stream_landed_by_a_structured_streaming_job_with_its_checkpoint_is_evaluated_as_pyoxigraph_does(
        connector, spark, tmp_path):
    warehouse = Warehouse(tmp_path / "warehouse")
    stream = EX + "streamed-gates"
    path = warehouse.stream(stream)
    triples = _events(2, START, 48)
    source = tmp_path / "events"
    source.mkdir()
    events = _as_events(triples)
    for number in range(4):  # four files, one micro-batch each
        (source / f"events-{number}.json").write_text(
            "".join(json.dumps(event) + "\n" for event in events[number::4]), encoding="utf-8")
    connector.sql(stream_table_ddl(str(path), stream),
                  f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '2')")

    batches = connector.stream_folder(path, source, tmp_path / "checkpoint")

    assert batches == 4
    assert (path / "_delta_log" / f"{4:020d}.checkpoint.parquet").exists()  # delta-spark's own checkpoint
    history = connector.read(path)["history"]
    assert [c["operation"] for c in history].count("STREAMING UPDATE") == 4
    assert Catalog(warehouse).streams() == [(URIRef(stream), str(path))]
    assert_windows_equal_pyoxigraph(spark, warehouse, stream, triples, INSTANTS)
    # and evaluated as a registered query would be, its run recorded with the files it read
    evaluation = Engine(warehouse, spark).evaluate(compile_query(_queries(stream)[0][0]), INSTANTS[1], "Counts")
    assert evaluation.rows_written > 0
    assert_reads_the_same(connector, warehouse.results("Counts", "bindings"), [])


def test_a_stream_delta_spark_appends_in_small_files_and_csparql_then_compacts_and_extends_is_evaluated_as_pyoxigraph_does(
        connector, spark, tmp_path):
    warehouse = Warehouse(tmp_path / "warehouse")
    stream = EX + "mixed-gates"
    path = warehouse.stream(stream)
    triples = _events(4, START, 40)
    connector.sql(stream_table_ddl(str(path), stream))
    events = _as_events(triples)
    for minute in range(3):  # two small files a minute, as a job landing every few seconds leaves them
        of_minute = [e for e in events if (e["ts_micros"] - START) // MINUTE == minute]
        connector.append_stream(path, of_minute[::2])
        connector.append_stream(path, of_minute[1::2])
    later = [(URIRef(f"{EX}gate1"), URIRef(EX + "registers"), URIRef(f"{EX}late_car{i}"),
              START + 3 * MINUTE + i * 7_000_000) for i in range(5)]
    ingest_stream(spark, warehouse, stream, [_nquads(tmp_path / "later.nq", [
        (s.split("/")[-1], o.split("/")[-1], at) for s, _, o, at in later])])  # csparql's ingest compacts them

    operations = [c.get(OPERATION) for c in delta.open_table(path).history()]
    assert operations.count("compact") == 3, operations  # the closed minutes' delta-spark files were merged
    files = delta.live_files(delta.open_table(path), path)
    assert all(pq.read_schema(f.uri).field("ts").type == pa.timestamp("us", "UTC") for f in files)
    assert_windows_equal_pyoxigraph(spark, warehouse, stream, triples + later,
                                    INSTANTS + [START + 3 * MINUTE + 40 * 1_000_000])
    assert_reads_the_same(connector, path, ["bucket"])


# --- 3. deletion vectors and column mapping are refused ----------------------------------------------------------


@pytest.mark.parametrize("feature, enable", [
    ("deletionVectors", "'delta.enableDeletionVectors' = 'true'"),
    ("columnMapping", "'delta.columnMapping.mode' = 'name'"),
])
def test_a_stream_with_deletion_vectors_or_column_mapping_is_refused_in_one_line_before_anything_runs(
        connector, tmp_path, feature, enable):
    warehouse = Warehouse(tmp_path / "warehouse")
    stream = EX + "refused"
    path = warehouse.stream(stream)
    triples = _events(3, START, 6)
    connector.sql(stream_table_ddl(str(path), stream), f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({enable})")
    connector.append_stream(path, _as_events(triples))
    if feature == "deletionVectors":  # a deletion vector on disk, not only the property
        connector.sql(f"DELETE FROM delta.`{path}` WHERE arrival = 0")
        assert list((path).glob("**/deletion_vector_*.bin"))
    query = tmp_path / "counts.rq"
    query.write_text(_queries(stream)[0][0], encoding="utf-8")

    run = subprocess.run([str(Path(sys.executable).with_name("csparql")), "run", str(query), "--at",
                          format_instant(INSTANTS[1]), "--warehouse", str(warehouse.root)],
                         capture_output=True, text=True, timeout=300)

    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"failed: the Delta table at {path} uses {feature}" in lines[0], lines[0]
    # refused before Spark started: the failed run is recorded, and nothing was written
    runs = delta.open_table(warehouse.runs).to_pyarrow_table().to_pylist()
    assert [(r["status"], feature in r["error"]) for r in runs] == [("failed", True)]
    assert not (warehouse.root / "results").exists()
