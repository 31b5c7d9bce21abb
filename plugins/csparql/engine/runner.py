"""Running registered queries: one evaluation per window, its results written, its run recorded.

``Engine.evaluate(plan, at)`` evaluates the windows that close at or before ``at`` (decision 4), writes the
results, replacing any earlier results of the same (query, window end) in one commit (decision 11), and
appends a row to the runs table — also when the evaluation fails, with the error. ``Engine.replay`` does
the same for every scheduled evaluation in a range, as a backfill would.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from rdflib import URIRef

from csparql.algebra import operators as alg
from csparql.engine import results as rt
from csparql.engine.catalog import Catalog, DeltaSourceReader, Scan
from csparql.engine.evaluate import CompiledEvaluation, QueryResult, compile_plan
from csparql.schedule import EvaluationWindow, evaluation_at, previous_evaluation, scheduled_evaluations
from csparql.storage import delta, schema
from csparql.storage.watermarks import advance_watermark
from csparql.storage.terms import from_dict
from csparql.storage.warehouse import Warehouse, check_query_name, output_stream_iri


@dataclass
class Evaluation:
    """The outcome of one evaluation."""

    query: str
    window: EvaluationWindow
    result: QueryResult
    rows_written: int
    duration_ms: int
    run_id: str
    scans: dict[URIRef, Scan] = field(default_factory=dict)


class EvaluationFailed(Exception):
    """An evaluation failed; the runs table has a row saying so."""


class Engine:
    """Evaluates plans over a warehouse with one SparkSession (created on first use)."""

    def __init__(self, warehouse: Warehouse, spark=None, master: str | None = None):
        self.warehouse = warehouse
        self.catalog = Catalog(warehouse)
        self._spark = spark
        self.master = master

    @property
    def spark(self):
        if self._spark is None:
            from csparql.spark.session import spark_session

            self._spark = spark_session(self.master)
        return self._spark

    # evaluating

    def compile(self, plan: alg.QueryPlan, window: EvaluationWindow) -> tuple[CompiledEvaluation, DeltaSourceReader]:
        """The Spark plan of one evaluation, over exactly the files of its windows (and, for ISTREAM and
        DSTREAM, of the previous evaluation's windows too: its scans count in the returned reader's)."""
        reader = DeltaSourceReader(self.spark, self.catalog, window.streams)
        statistics = self.catalog.statistics()
        previous = None
        if plan.stream_operator != alg.RSTREAM:
            before = previous_evaluation(plan, window)
            previous = (DeltaSourceReader(self.spark, self.catalog, before.streams), before.end)
        compiled = compile_plan(self.spark, plan, reader, at=window.end, statistics=statistics, previous=previous)
        if previous is not None:
            for iri, scan in previous[0].scans.items():
                total = reader.scans.setdefault(iri, Scan())
                total.files += scan.files
                total.rows += scan.rows
                total.file_uris.extend(scan.file_uris)
        return compiled, reader

    def evaluate(self, plan: alg.QueryPlan, at: int, name: str, write: bool = True, complete: bool | None = None,
                 version: str | None = None) -> Evaluation:
        """Evaluate the query at instant ``at``; write its results and record the run. ``version`` (the
        version of the query text, ``csparql.deployment.text_version``) is recorded with the run and the
        result rows."""
        check_query_name(name)
        window = evaluation_at(plan, at)
        started = time.time_ns() // 1000
        clock = time.perf_counter()
        run_id = uuid.uuid4().hex
        reader = None
        try:
            compiled, reader = self.compile(plan, window)
            result = _collect(compiled)
            rows = self._write(plan, name, window, result, version) if write else 0
        except Exception as error:
            duration = int((time.perf_counter() - clock) * 1000)
            if write:
                self._record(run_id, name, window, started, "failed", _describe(error), reader, 0, duration, complete,
                             version)
            raise EvaluationFailed(f"{name}: the evaluation of the window ending {_iso(window.end)} failed: {_describe(error)}") from error
        duration = int((time.perf_counter() - clock) * 1000)
        if write:
            self._record(run_id, name, window, started, "succeeded", None, reader, rows, duration, complete, version)
        return Evaluation(name, window, result, rows, duration, run_id, dict(reader.scans))

    def replay(self, plan: alg.QueryPlan, start: int, end: int, name: str, write: bool = True,
               version: str | None = None) -> Iterator[Evaluation]:
        """Evaluate every scheduled evaluation with its instant in [start, end], in order."""
        for window in scheduled_evaluations(plan, start, end):
            yield self.evaluate(plan, window.at, name, write=write, version=version)

    # writing

    def _write(self, plan: alg.QueryPlan, name: str, window: EvaluationWindow, result: QueryResult,
               version: str | None) -> int:
        registration = plan.registration
        if registration is not None and registration.kind == "STREAM":
            # The stream is named by the REGISTER name (decision 10), whatever the run's result name.
            stream = str(output_stream_iri(registration.name))
            path = self.warehouse.stream(stream)
            delta.ensure(
                path, schema.STREAM, schema.STREAM_PARTITIONS,
                {"csparql.iri": stream, "csparql.kind": "stream", "csparql.query": name},
            )
            table = rt.output_stream_table(result.triples, window.end)
            rt.write_window(path, table, schema.STREAM, window.end, column="ts", partition_by=schema.STREAM_PARTITIONS)
            counts: dict[str, int] = {}
            for _, p, _ in result.triples:
                counts[str(p)] = counts.get(str(p), 0) + 1
            self.catalog.record_statistics(stream, "stream", counts, replaces=False)
            # The producer wrote this window: readers of the stream may evaluate windows up to its end.
            advance_watermark(self.warehouse, stream, window.end, f"evaluation of {name}")
            return table.num_rows
        if result.form == "select":
            path = self.warehouse.results(name, "bindings")
            delta.ensure(
                path, pa.schema(list(schema.WINDOW_COLUMNS)),
                properties={"csparql.query": name, "csparql.variables": json.dumps([str(v) for v in result.vars])},
            )
            existing = delta.open_table(path).schema().to_arrow()
            existing = pa.schema(existing) if existing is not None else None
            table = rt.bindings_table(result.vars, result.rows, window.start, window.end, existing, version)
            base = pa.schema(list(schema.WINDOW_COLUMNS))
            rt.write_window(path, table, base if existing is None else existing, window.end, merge_schema=True)
            return table.num_rows
        if result.form == "ask":
            table = rt.answers_table(bool(result.boolean), window.start, window.end, version)
            rt.write_window(self.warehouse.results(name, "answers"), table, schema.ANSWERS, window.end, merge_schema=True)
            return 1
        table = rt.triples_table(result.triples, window.start, window.end, version)
        rt.write_window(self.warehouse.results(name, "triples"), table, schema.TRIPLES, window.end, merge_schema=True)
        return table.num_rows

    def _record(self, run_id, name, window, started, status, error, reader, rows, duration, complete, version) -> None:
        scans = reader.scans if reader is not None else {}
        row = {
            "run_id": run_id,
            "query": name,
            "window_start": rt._instant(window.start),
            "window_end": rt._instant(window.end),
            "started_at": rt._instant(started),
            "status": status,
            "error": error,
            "triples_read": json.dumps({str(k): v.rows for k, v in scans.items()}),
            "files_read": json.dumps({str(k): v.files for k, v in scans.items()}),
            "rows_written": rows,
            "duration_ms": duration,
            "complete": complete,
            "query_version": version,
        }
        # merge: a runs table written before a column was added gains it (its older rows read null)
        delta.append(self.warehouse.runs, pa.Table.from_pylist([row], schema=schema.RUNS), schema.RUNS, merge_schema=True)


def _collect(compiled: CompiledEvaluation) -> QueryResult:
    """The evaluation's results, collected with one Spark action (through Arrow)."""
    if compiled.form == "ask":
        return QueryResult("ask", boolean=compiled.df.limit(1).count() > 0)
    arrow = compiled.df.toArrow()
    if compiled.form == "select":
        vars_ = compiled.plan.form.vars
        columns = [arrow.column(compiled.columns[var]).to_pylist() for var in vars_]
        rows = [tuple(from_dict(column[i]) for column in columns) for i in range(arrow.num_rows)]
        return QueryResult("select", vars=vars_, rows=rows)
    triples = [
        (from_dict(s), from_dict(p), from_dict(o))
        for s, p, o in zip(arrow.column("s").to_pylist(), arrow.column("p").to_pylist(), arrow.column("o").to_pylist())
    ]
    return QueryResult(compiled.form, triples=triples)


def _describe(error: Exception) -> str:
    text = str(error).strip().split("\n")[0]
    return f"{type(error).__name__}: {text}"[:1000]


def _iso(micros: int) -> str:
    from csparql.windows import format_instant

    return format_instant(micros)
