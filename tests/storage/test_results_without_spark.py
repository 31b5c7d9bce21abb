"""``csparql results`` and ``csparql sql`` read the warehouse without Spark: each, run as a user runs it (a
process of its own, over a result table written without Spark), prints the stored rows and never imports
pyspark. Result tables live in ``csparql.storage.results`` (Spark-free), and so does ``QueryResult``."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
from rdflib import Literal, URIRef, Variable

from csparql.storage import result_rows as rt
from csparql.storage.results import QueryResult, ResultTable
from csparql.storage.tables import RUN_METADATA
from csparql.storage.warehouse import Warehouse

END = 1_700_000_600_000_000
START = END - 600_000_000

# Runs the command line's entry point in this process, then says whether pyspark was imported on the way.
COMMAND = """
import json, sys
from csparql.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "pyspark": sorted(m for m in sys.modules if m.split(".")[0] == "pyspark")}),
      file=sys.stderr)
"""


def stored_window(root) -> None:
    """One window of a SELECT's results, written through its result table (no Spark)."""
    warehouse = Warehouse.locate(root)
    vars_ = (Variable("gate"), Variable("cars"))
    result = QueryResult("select", vars=vars_, rows=[(URIRef("http://ex.org/g1"), Literal(3)),
                                                     (URIRef("http://ex.org/g2"), Literal(5))])
    table = ResultTable(warehouse, "Tollgates", "bindings", vars_)
    committed = table.write_window(
        END, lambda existing: rt.RESULT_WRITERS["bindings"](result, START, END, "v1", existing), run_metadata)
    assert (committed.version, committed.revision, committed.rows) == (1, 0, 2)


def run_metadata(revision: int, rows: pa.Table) -> dict[str, str]:
    """The commit metadata of a successful run of the window (what the engine records, in brief)."""
    return {RUN_METADATA: json.dumps({"query": "Tollgates", "window_end": END, "status": "succeeded",
                                      "revision": revision, "rows_written": rows.num_rows})}


def run(*arguments: str) -> tuple[str, dict]:
    """What the command printed on standard output, and what it reported of itself."""
    finished = subprocess.run([sys.executable, "-c", COMMAND, *arguments], capture_output=True, text=True,
                              timeout=300)
    report = json.loads(finished.stderr.strip().splitlines()[-1])
    return finished.stdout, report


def test_csparql_results_reads_stored_windows_without_importing_pyspark(tmp_path):
    stored_window(tmp_path)
    out, report = run("results", "Tollgates", "--warehouse", str(tmp_path), "--format", "json")
    assert report == {"code": 0, "pyspark": []}
    [window] = [json.loads(line) for line in out.splitlines()]
    bindings = window["results"]["results"]["bindings"]
    assert [b["gate"]["value"] for b in bindings] == ["http://ex.org/g1", "http://ex.org/g2"]
    assert [b["cars"]["value"] for b in bindings] == ["3", "5"]


def test_csparql_sql_runs_without_importing_pyspark(tmp_path):
    stored_window(tmp_path)
    out, report = run("sql", "--warehouse", str(tmp_path), "--format", "csv",
                      "SELECT gate, cars FROM tollgates ORDER BY cars")
    assert report == {"code": 0, "pyspark": []}
    assert out.splitlines() == ["gate,cars", "http://ex.org/g1,3", "http://ex.org/g2,5"]


def test_a_result_table_writes_a_window_again_as_its_next_revision_and_reads_windows_back(tmp_path):
    stored_window(tmp_path)
    found = ResultTable.find(Warehouse.locate(tmp_path), "Tollgates")
    assert found.kind == "bindings" and found.variables() == (Variable("gate"), Variable("cars"))
    [(start, end, result)] = list(found.windows())
    assert (start, end, result.rows) == (START, END, [(URIRef("http://ex.org/g1"), Literal(3)),
                                                      (URIRef("http://ex.org/g2"), Literal(5))])
    assert list(found.windows(START, END - 1)) == [] and found.latest_window(END).num_rows == 2
    one = QueryResult("select", vars=found.variables(), rows=[(URIRef("http://ex.org/g3"), Literal(7))])
    committed = found.write_window(
        END, lambda existing: rt.RESULT_WRITERS["bindings"](one, START, END, "v2", existing), run_metadata)
    assert (committed.version, committed.revision, committed.rows) == (2, 1, 1)
    latest = found.latest_window()
    assert latest.column("cars").to_pylist() == [7] and latest.column("revision").to_pylist() == [1]
    assert [len(result) for _, _, result in found.windows(revision=0)] == []  # no runs table: no time travel
