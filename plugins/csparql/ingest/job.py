"""One ingest's work between the checked request and the commit: parse the inputs, stage Parquet files inside the
table folder, summarise them, write the rejects; the caller commits the staged files (``csparql.ingest.ingest``).

``IngestJob`` holds what every ingest shares (blank-node scopes, rdflib's whole-file parse, the rejects, the
commit-or-clean-up sequence of ``run``). Two kinds do the heavy part:

- ``csparql.ingest.spark_job.SparkIngestJob``: Spark parses line files in parallel byte ranges and writes the
  staged files; for files of any size.
- ``LocalIngestJob``: this process parses (the same line parser, over each whole file) and pyarrow writes the
  staged files, with no JVM: for small inputs that must land in seconds, an HTTP body or a batch of messages.
  Streams only.

Both stage the same rows in the same layout: a stream's files are partitioned by hour bucket and hold their rows
in (ts, arrival) order, so the Parquet page indexes let a window read only the pages it overlaps.
"""

from __future__ import annotations

import gc
import json
import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import rdflib

from csparql.ingest.parsers import graph_parts, graphs
from csparql.ingest.event_times import event_times_metadata, recorded_until, staged_event_times_metadata
from csparql.ingest.inputs import (
    BATCH_SHIFT, GRAPH_FORMATS, QUAD_FORMATS, SHOWN_REJECTS, IngestReport, Input, InputError, Reject,
)
from csparql.ingest.parsers.lines import FutureLimit
from csparql.ingest.parsers.ranges import ByteRange, count_newlines, parse_range
from csparql.ingest.parsers.rejects import escape_field, line_text, parser_position, read_rejects, unescape_field
from csparql.storage import delta, schema
from csparql.storage.instants import hour_buckets
from csparql.storage.location import location, remove_tree, write_parquet
from csparql.storage.tables import INGEST_ID, INPUTS, OPERATION, TARGET
from csparql.storage.terms import BLANK, term_row
from csparql.storage.warehouse import Warehouse

Staged = list[tuple[str, str | None]]
"""The Parquet files an ingest staged, each with its hour bucket (None for a static graph)."""


class IngestJob:
    """What one ingest parses, stages and rejects (see the module docstring); subclasses parse and write."""

    def __init__(self, path: Path, inputs: list[Input], targets: dict[int, Path], stream: bool,
                 default_micros: int | None = None, batch: int = 0, replace: bool = False,
                 explicit_rejects: str | os.PathLike | None = None, future: FutureLimit | None = None,
                 timestamp_predicates: Sequence[str] = graphs.DEFAULT_TIMESTAMP_PREDICATES):
        self.path = location(path)
        self.inputs = inputs
        self.targets = targets
        self.stream = stream
        self.default_micros = default_micros
        self.future = future
        self.timestamp_predicates = tuple(timestamp_predicates)
        self.batch = batch
        self.replace = replace
        self.explicit_rejects = Path(explicit_rejects).resolve() if explicit_rejects else None
        self.id = uuid.uuid4().hex[:12]
        self.stage = self.path / f"ingest-{self.id}"
        self.rejects_folder = self.path / f"ingest-{self.id}-rejects"
        self.rejects: list[tuple[int, int, str, str]] = []  # (file index, line, reason, text), escaped

    def scope(self, file_index: int) -> str:
        """The prefix of the blank-node labels of input ``file_index``: unique to this ingest and file."""
        return f"i{self.id}f{file_index}_"

    def commit_metadata(self, operation: str, target: str) -> dict[str, str]:
        return {OPERATION: operation, TARGET: target, INGEST_ID: self.id,
                INPUTS: json.dumps([str(i.path) for i in self.inputs])}

    def run(self, report: IngestReport, commit, always_commit: bool = False, commit_rejected: bool = True) -> None:
        """Parse, stage, summarise into ``report``, write the rejects, then ``commit(staged)`` when something
        was staged (or ``always_commit``), unless something was rejected and not ``commit_rejected`` or a
        replace would empty a graph because everything was rejected; the report gets the committed version.
        Whatever happens, nothing staged stays behind uncommitted."""
        committed = False
        try:
            # a full disk (the write, the rejects, the commit) or a corrupt log: one line naming the table
            with delta.named_failures(self.path, "writing to"):
                self.rejects_folder.mkdir(parents=True, exist_ok=True)
                staged = self.parse_and_stage()
                self.summarise(report, staged)
                self.write_rejects(report)
                if report.rejected and not commit_rejected:
                    report.landed, report.counts, report.min_ts, report.max_ts = 0, {}, None, None
                elif self.replace and not staged and report.rejected:
                    # every input was rejected: emptying the graph is surely not what was meant
                    report.warnings.append("nothing was replaced: no triple of the input could be read")
                elif staged or always_commit:
                    commit(staged)
                    committed = True
                    report.version = delta.open_table(self.path).version()
                    report.data_files = len(staged)
        finally:
            remove_tree(self.rejects_folder)
            if not committed:
                remove_tree(self.stage)

    def parse_and_stage(self) -> Staged:
        raise NotImplementedError

    def summarise(self, report: IngestReport, staged: Staged) -> None:
        """Triples per predicate (and, for a stream, the timestamp range) of the staged files, into ``report``."""
        raise NotImplementedError

    def event_times(self, warehouse: Warehouse, staged: Staged) -> dict[str, str]:
        """The commit metadata giving the staged triples' event times (``csparql.ingest.event_times``)."""
        raise NotImplementedError

    def arrival_bases(self, spans: dict[int, int]) -> dict[int, int]:
        """The arrival of each input's line 0 (``spans``: lines, or triples, per input): file 2's lines follow
        all of file 1's."""
        bases, offset = {}, 0
        for item in self.inputs:
            bases[item.index] = (self.batch << BATCH_SHIFT) + offset
            offset += spans[item.index]
        if offset >= 1 << BATCH_SHIFT:
            raise InputError(f"one ingest holds at most {1 << BATCH_SHIFT} lines; split the input")
        return bases

    def parse_whole(self, item: Input) -> pa.Table:
        """A file parsed whole in this process; rejected whole, with the parser's line and message, when it is
        not valid. A stream's TriG, JSON-LD, TriX or standard N-Quads file is a sequence of timestamped named
        graphs (``csparql.ingest.parsers.graphs``, read with pyoxigraph); other formats are read with rdflib."""
        if self.stream and item.format in GRAPH_FORMATS:
            return self.parse_graphs(item)
        graph = rdflib.Dataset() if item.format in QUAD_FORMATS else rdflib.Graph()
        if not self.parse_with_rdflib(item, graph):
            return parsed_schema(self.stream).empty_table()
        triples = list(graph.quads((None, None, None, None)) if item.format in QUAD_FORMATS else graph)
        rows = [tuple(term_row(term) for term in triple[:3]) for triple in triples]
        return self.arrow_rows(item, rows, [self.default_micros] * len(rows))

    def parse_with_rdflib(self, item: Input, graph) -> bool:
        """Whether rdflib read the file into ``graph``; a reject of the whole file when it could not."""
        previous = rdflib.NORMALIZE_LITERALS
        rdflib.NORMALIZE_LITERALS = False  # keep lexical forms as written
        try:
            graph.parse(str(item.path), format=item.format)
        except Exception as error:  # rdflib raises many kinds: each means the file is not valid
            self.reject_file(item, error)
            return False
        finally:
            rdflib.NORMALIZE_LITERALS = previous
        return True

    def reject_file(self, item: Input, error: Exception) -> None:
        line, reason = parser_position(error)
        self.rejects.append((item.index, line, escape_field(reason), escape_field(line_text(item.path, line))))

    def parse_graphs(self, item: Input) -> pa.Table:
        """A file of timestamped named graphs: each graph's triples with its instant; rejects name the graph
        and the line where it is first written."""
        dataset = None
        if item.format == "trix":
            dataset = rdflib.Dataset()
            if not self.parse_with_rdflib(item, dataset):
                return parsed_schema(self.stream).empty_table()
        with collection_paused():
            try:
                if dataset is not None:
                    quads = graphs.quad_columns(graphs.dataset_quads(dataset))
                else:
                    fmt = "nquads" if item.format == graphs.GRAPH_NQUADS else item.format
                    quads = graph_parts.read_quads(item.path, fmt)
                timed, rejected = graphs.timed_triples(quads, self.timestamp_predicates, self.default_micros,
                                                       self.future)
            except SyntaxError as error:  # pyoxigraph parses as it is read
                self.reject_file(item, error)
                return parsed_schema(self.stream).empty_table()
            except TypeError as error:  # a triple term (RDF 1.2), which a stream table cannot hold
                self.reject_file(item, ValueError(f"{error}: a stream holds IRIs, blank nodes and literals"))
                return parsed_schema(self.stream).empty_table()
        at = graphs.first_line_naming(item.path, [r.graph for r in rejected if r.graph is not None])
        self.rejects.extend((item.index, at.get(r.graph, 0), escape_field(r.reason), escape_field(r.text))
                            for r in rejected)
        column = timed.column
        predicate_kinds = pa.repeat(pa.scalar(schema.IRI, pa.int8()), timed.num_rows)
        return self.parsed_table(item, [(column("s_kind"), column("s_value"), None, None),
                                        (predicate_kinds, column("p_value"), None, None),
                                        tuple(column(name) for name in ("o_kind", "o_value", "o_datatype",
                                                                        "o_language"))],
                                 column("ts_micros"))

    def arrow_rows(self, item: Input, rows: list[tuple], micros: list[int | None]) -> pa.Table:
        """``parsed_table`` of rows of stored terms (subject, predicate, object)."""
        columns = [tuple(zip(*(row[position] for row in rows))) or ((), (), (), ()) for position in range(3)]
        return self.parsed_table(item, columns, micros)

    def parsed_table(self, item: Input, terms: Sequence[tuple], micros) -> pa.Table:
        """The parsed rows of ``item``: ``terms`` holds the subjects', predicates' and objects' kinds, values,
        datatypes and languages (arrays or sequences; None: all null), blank nodes scoped to the file here; for a
        stream, with their instants ``micros`` and arrivals 1, 2, ..."""
        scope = pa.scalar(self.scope(item.index))
        arrays = []
        for kind, value, datatype, language in terms:
            kind, value = _array(kind, pa.int8()), _array(value, pa.string())
            count = len(kind)
            value = pc.if_else(pc.equal(kind, BLANK), pc.binary_join_element_wise(scope, value, ""), value)
            datatype, language = (pa.nulls(count, pa.string()) if part is None else _array(part, pa.string())
                                  for part in (datatype, language))
            arrays.append(pa.StructArray.from_arrays([kind, value, datatype, language], fields=list(schema.TERM_TYPE)))
        if self.stream:
            ts = _array(micros, pa.int64())
            arrays += [ts, pa.array(range(1, len(ts) + 1), pa.int64()), hour_buckets(ts)]
        return pa.Table.from_arrays(arrays, schema=parsed_schema(self.stream))

    def write_rejects(self, report: IngestReport) -> None:
        """Every reject, in file and line order, into its rejects file (``targets``, or the one named file);
        the first few and the count into ``report``."""
        rejects = list(self.rejects)
        for file in sorted(self.rejects_folder.glob("*.tsv")):
            rejects.extend(read_rejects(str(file)))
        rejects.sort(key=lambda r: (r[0], r[1]))
        names = {i.index: str(i.path) for i in self.inputs}
        report.rejected = len(rejects)
        report.first_rejects = [
            Reject(names[f], line, unescape_field(reason), unescape_field(text))
            for f, line, reason, text in rejects[:SHOWN_REJECTS]
        ]
        by_target: dict[Path, list[str]] = {}
        for file_index, line, reason, text in rejects:
            row = f"{escape_field(names[file_index])}\t{line}\t{reason}\t{text}\n"
            by_target.setdefault(self.targets[file_index], []).append(row)
        if self.explicit_rejects is not None:  # a named rejects file is always written, even empty
            by_target.setdefault(self.explicit_rejects, [])
        for target, rows in by_target.items():
            temporary = target.with_name(f".{target.name}.{self.id}.tmp")
            with open(temporary, "w", encoding="utf-8") as handle:
                handle.writelines(rows)
            os.replace(temporary, target)
        report.rejects_paths = tuple(t for t, rows in by_target.items() if rows)


@contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused: building millions of small objects that form no cycle (terms,
    tuples, rows) otherwise sets off collections that walk the whole heap again and again, most of a parse's
    time. Reference counting still frees what is dropped."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _array(values, type: pa.DataType) -> pa.Array:
    """``values`` (an Arrow array, chunked or not, or a Python sequence) as one Arrow array of ``type``."""
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks().cast(type)
    return values.cast(type) if isinstance(values, pa.Array) else pa.array(values, type)


def parsed_schema(stream: bool) -> pa.Schema:
    """The rows the parsers return: ``PARSED_STREAM`` (timestamps in µs, arrival, bucket) or ``PARSED_STATIC``."""
    return schema.PARSED_STREAM if stream else schema.PARSED_STATIC


class LocalIngestJob(IngestJob):
    """A stream ingest done in this process: the line parser reads each line file whole, rdflib the other
    formats, pyarrow writes one Parquet file per hour bucket (see the module docstring)."""

    def __init__(self, path: Path, inputs: list[Input], targets: dict[int, Path], **options):
        super().__init__(path, inputs, targets, stream=True, **options)
        self.rows: pa.Table | None = None  # what was staged, for the summary and the event times

    def parse_and_stage(self) -> Staged:
        spans, parsed = {}, {}
        for item in self.inputs:
            if item.line_based:
                spans[item.index] = count_newlines(str(item.path), 0, item.path.stat().st_size) + 1
            else:
                parsed[item.index] = self.parse_whole(item)
                spans[item.index] = parsed[item.index].num_rows
        bases = self.arrival_bases(spans)
        tables = []
        for item in self.inputs:
            if item.line_based:
                whole = ByteRange(item.index, item.index, str(item.path), 0, item.path.stat().st_size)
                batches = list(parse_range(whole, self.scope(item.index), bases[item.index], True,
                                           self.default_micros, str(self.rejects_folder), self.future))
                tables.append(pa.Table.from_batches(batches, schema=schema.PARSED_STREAM))
            else:
                arrow = parsed[item.index]
                arrow = arrow.set_column(4, "arrival", pc.add(arrow.column("arrival"), bases[item.index]))
                tables.append(pa.Table.from_arrays(arrow.columns, schema=schema.PARSED_STREAM))
        rows = pa.concat_tables(tables) if tables else schema.PARSED_STREAM.empty_table()
        if not rows.num_rows:
            return []
        rows = rows.sort_by([("bucket", "ascending"), ("ts_micros", "ascending"), ("arrival", "ascending")])
        self.rows = rows
        staged = []
        buckets = rows.column("bucket")
        for bucket in pc.unique(buckets).to_pylist():
            selected = rows.filter(pc.equal(buckets, bucket))
            file_rows = pa.Table.from_arrays(
                [selected.column("s"), selected.column("p"), selected.column("o"),
                 selected.column("ts_micros").cast(schema.TIMESTAMP), selected.column("arrival")],
                schema=schema.STREAM_FILE)
            folder = self.stage / f"bucket={bucket}"
            folder.mkdir(parents=True, exist_ok=True)
            file = folder / f"part-{self.id}.snappy.parquet"
            write_parquet(file_rows, file, compression="snappy", write_page_index=True)
            staged.append((str(file), bucket))
        return staged

    def summarise(self, report: IngestReport, staged: Staged) -> None:
        if not staged or self.rows is None:
            return
        predicates = pc.struct_field(self.rows.column("p"), "value")
        grouped = pa.table({"predicate": predicates}).group_by("predicate").aggregate([("predicate", "count")])
        report.counts = dict(zip(grouped.column("predicate").to_pylist(),
                                 grouped.column("predicate_count").to_pylist()))
        report.landed = sum(report.counts.values())
        bounds = pc.min_max(self.rows.column("ts_micros"))
        report.min_ts, report.max_ts = bounds["min"].as_py(), bounds["max"].as_py()

    def event_times(self, warehouse: Warehouse, staged: Staged) -> dict[str, str]:
        until = recorded_until(warehouse)
        if not staged or self.rows is None:
            return event_times_metadata((), until)
        return staged_event_times_metadata(self.rows.column("ts_micros"), until)
