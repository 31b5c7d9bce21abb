"""A stream ingest done in this process (no Spark: ``in_process=True``, what a pushed body or a batch of
messages takes) lands what the Spark ingest lands for the same files: the same rows with the same arrivals,
the same rejects, the same report and event times, files laid out alike (one folder per hour bucket, rows in
event-time order); and it starts no JVM."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from csparql.ingest.ingest import ingest_stream
from csparql.storage import delta
from csparql.storage import stale_windows as sw
from csparql.storage.warehouse import Warehouse

from ingest.test_ingest import rows_of
from ingest.test_timestamped_graphs import as_lines, as_trig, events

pytestmark = pytest.mark.spark

STREAM = "http://streams.org/pushed"
XSD_DATETIME = "<http://www.w3.org/2001/XMLSchema#dateTime>"
BAD_AND_BLANK = (
    '_:car1 <http://ex.org/colour> "red" "2010-03-22T10:00:05Z"^^' + XSD_DATETIME + " .\n"
    '<http://ex.org/g> <http://ex.org/registers> _:car1 "2010-03-22T11:30:00Z"^^' + XSD_DATETIME + " .\n"
    "this is not a triple\n"
    '<http://ex.org/g> <http://ex.org/registers> <http://ex.org/c2> "2010-03-22T10:00:01Z"^^' + XSD_DATETIME + " .\n"
    '<http://ex.org/g> <http://ex.org/registers> <http://ex.org/c3> "9999-01-01T00:00:00Z"^^' + XSD_DATETIME + " .\n"
)


def without_scopes(rows: list[dict]) -> list[tuple]:
    """The rows with each blank node's ingest-scoped label reduced to its label in the file."""
    def term(value: dict) -> tuple:
        value = dict(value)
        if value["kind"] == 2:
            value["value"] = re.sub(r"^i[0-9a-f]{12}f(\d+)_", r"f\1_", value["value"])
        return tuple(value.values())
    return sorted((term(r["s"]), term(r["p"]), term(r["o"]), r["ts"], r["arrival"], r["bucket"]) for r in rows)


def rejects(report) -> list[tuple]:
    """The report's rejects, with the ingest's clock (named by the future-timestamp reason) left out."""
    return [(r.line, re.sub(r"later than \S+Z", "later than <clock>", r.reason), r.text)
            for r in report.first_rejects]


def commit_metadata(path) -> dict:
    return delta.open_table(path).history(1)[0]


@pytest.mark.parametrize("inputs", [
    {"a.nq": BAD_AND_BLANK, "b.trig": as_trig(events(seed=3, count=20)), "c.nq": as_lines(events(seed=4))},
    {"events.trig": as_trig(events(seed=5, count=40), inside=True)},
], ids=["lines-with-rejects-and-graphs", "graphs"])
def test_in_process_lands_what_spark_lands(spark, tmp_path, inputs):
    files = []
    for name, text in inputs.items():
        (tmp_path / name).write_text(text)
        files.append(tmp_path / name)
    landed = {}
    for how in ("spark", "in-process"):
        warehouse = Warehouse(tmp_path / how)
        report = ingest_stream(spark if how == "spark" else None, warehouse, STREAM, files,
                               rejects=tmp_path / f"{how}.rejects.tsv", in_process=how == "in-process")
        path = warehouse.stream(STREAM)
        landed[how] = report, path
        for file in delta.live_files(delta.open_table(path), path):
            table = pq.read_table(file.uri)
            order = list(zip(table.column("ts").to_pylist(), table.column("arrival").to_pylist()))
            assert order == sorted(order), f"{how}: rows of {file.uri} not in event-time order"
            assert file.partition["bucket"] in file.uri
    (spark_report, spark_path), (local_report, local_path) = landed["spark"], landed["in-process"]
    assert local_report.landed == spark_report.landed > 0
    assert local_report.counts == spark_report.counts
    assert (local_report.min_ts, local_report.max_ts) == (spark_report.min_ts, spark_report.max_ts)
    assert local_report.rejected == spark_report.rejected
    assert rejects(local_report) == rejects(spark_report)
    assert without_scopes(rows_of(local_path)) == without_scopes(rows_of(spark_path))
    buckets = {f.partition["bucket"] for f in delta.live_files(delta.open_table(spark_path), spark_path)}
    assert {f.partition["bucket"] for f in delta.live_files(delta.open_table(local_path), local_path)} == buckets
    assert commit_metadata(local_path)[sw.EVENT_TIMES] == commit_metadata(spark_path)[sw.EVENT_TIMES] != "[]"
    if "a.nq" in inputs:
        assert spark_report.rejected == 2 and len(buckets) == 2


def test_an_in_process_ingest_starts_no_jvm_and_imports_no_pyspark(tmp_path):
    (tmp_path / "events.trig").write_text(as_trig(events(seed=6, count=10)))
    program = (
        "import json, sys\n"
        "from csparql.ingest.ingest import ingest_stream\n"
        "from csparql.storage.warehouse import Warehouse\n"
        f"report = ingest_stream(None, Warehouse({str(tmp_path / 'w')!r}), {STREAM!r}, "
        f"[{str(tmp_path / 'events.trig')!r}], in_process=True)\n"
        "print(json.dumps({'landed': report.landed, 'version': report.version,\n"
        "                  'pyspark': any(m.split('.')[0] == 'pyspark' for m in sys.modules)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer == {"landed": 20, "version": 1, "pyspark": False}


def test_the_sample_streams_in_every_format_land_the_same_events(tmp_path):
    from collections import Counter

    from csparql.samples import STREAM_FORMATS, write_samples

    landed = {}
    for format in STREAM_FORMATS:
        files = write_samples(tmp_path / format, hours=1, format=format)
        for iri, path in files.streams.items():
            assert path.suffix == f".{format}"
            warehouse = Warehouse(tmp_path / f"warehouse-{format}")
            report = ingest_stream(None, warehouse, iri, [path], in_process=True)
            assert report.rejected == 0, (format, iri, report.first_rejects)
            landed[format, iri] = Counter((tuple(r["s"].values()), tuple(r["p"].values()), tuple(r["o"].values()),
                                           r["ts"]) for r in rows_of(warehouse.stream(iri)))
    for (format, iri), rows in landed.items():
        assert rows == landed["tnq", iri] and rows, (format, iri)
