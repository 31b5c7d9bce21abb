"""Result tables: what an evaluation of a registered query writes, window by window, and reading it back.

``QueryResult`` is the results of one evaluation (or of one stored window), without Spark. A ``ResultTable``
is the table a query's results go to, ``results/<query>/<kind>`` (``kind``: ``bindings`` for a SELECT,
``answers`` for an ASK, ``triples`` for a CONSTRUCT or DESCRIBE) or, for ``REGISTER STREAM``, its output
stream (``kind`` ``stream``). It knows its schema, its properties and its variables; it writes one window's
rows in one commit that replaces the window's earlier rows and returns the version it committed
(``write_window``); and it reads windows back through only the files whose ``window_end`` statistics can hold
them (``csparql.storage.pruning``). How each result form's rows are built from an evaluation's terms is the
engine's (``csparql.storage.result_rows``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from rdflib import Variable
from rdflib.term import Identifier

from csparql.core.algebra import operators as alg
from csparql.storage import delta, pruning, schema
from csparql.storage import revisions as rv
from csparql.storage.failures import StorageError
from csparql.storage.instants import instant_of, micros_of
from csparql.storage.tables import (IRI_PROPERTY, KIND_PROPERTY, QUERY_PROPERTY, RESULT_KINDS, VARIABLES_PROPERTY,
                                    column_names)
from csparql.storage.terms import from_dict, parse_ntriples_term, term_array
from csparql.storage.warehouse import Warehouse, check_query_name, output_stream_iri, sql_table_name

Triple = tuple[Identifier, Identifier, Identifier]

STREAM = "stream"
"""The ``kind`` of the result table of a ``REGISTER STREAM`` query: its output stream."""


class QueryResult:
    """The results of one evaluation: bindings for SELECT, a boolean for ASK, triples for CONSTRUCT/DESCRIBE.

    ``terms`` is the Arrow table of the results' terms as structs (``csparql.storage.terms.TERM_TYPE``, null
    when unbound): for SELECT one column per variable of ``vars``, in order, for CONSTRUCT and DESCRIBE the
    columns ``s``, ``p`` and ``o``. An evaluation collects it from Spark and the result tables are written from
    it (``csparql.storage.result_rows``). ``rows`` (SELECT) and ``triples`` (CONSTRUCT/DESCRIBE) are the same
    results as rdflib terms, built from ``terms`` on first use (for printing, W3C formats, comparisons); a
    result read back from a result table is given as ``rows`` or ``triples`` instead."""

    def __init__(
        self,
        form: str,
        vars: tuple[Variable, ...] = (),
        rows: list[tuple[Identifier | None, ...]] | None = None,
        boolean: bool | None = None,
        triples: list[Triple] | None = None,
        terms: pa.Table | None = None,
    ):
        self.form = form  # "select", "ask", "construct" or "describe"
        self.vars = vars
        self.boolean = boolean
        self._rows = rows
        self._triples = triples
        self._terms = terms

    @property
    def terms(self) -> pa.Table:
        """The results' terms as an Arrow table of term structs (see the class docstring)."""
        if self._terms is None:
            if self.form == "select":
                rows = self._rows or []
                columns = [term_array([row[i] for row in rows]) for i in range(len(self.vars))]
                self._terms = terms_table(columns, [str(var) for var in self.vars], len(rows))
            else:
                triples = self._triples or []
                columns = [term_array([triple[i] for triple in triples]) for i in range(3)]
                self._terms = terms_table(columns, ["s", "p", "o"], len(triples))
        return self._terms

    @property
    def rows(self) -> list[tuple[Identifier | None, ...]]:
        """SELECT: the solutions, one tuple of terms (None when unbound) per solution, in order."""
        if self._rows is None:
            self._rows = [] if self.form != "select" else _term_rows(self._terms)
        return self._rows

    @property
    def triples(self) -> list[Triple]:
        """CONSTRUCT/DESCRIBE: the triples, as rdflib terms."""
        if self._triples is None:
            self._triples = [] if self.form in ("select", "ask") else _term_rows(self._terms)
        return self._triples

    def __len__(self) -> int:
        if self.form == "ask":
            return 1
        return self.terms.num_rows

    def __repr__(self) -> str:
        size = "" if self.form == "ask" else f", {len(self)} rows"
        return f"QueryResult({self.form!r}, vars={self.vars!r}, boolean={self.boolean!r}{size})"


def terms_table(columns: list[pa.Array], names: list[str], rows: int) -> pa.Table:
    """A table of these term columns with ``rows`` rows (also when there is no column: solutions without
    variables)."""
    if columns:
        return pa.Table.from_arrays(columns, names=names)
    return pa.table([pa.nulls(rows)], names=["_"]).drop_columns(["_"])


def _term_rows(terms: pa.Table | None) -> list[tuple]:
    if terms is None:
        return []
    if not terms.num_columns:
        return [()] * terms.num_rows
    columns = [[from_dict(term) for term in column.to_pylist()] for column in terms.columns]
    return list(zip(*columns))


def window_predicate(column: str, micros: int) -> str:
    """A delta-rs predicate selecting the rows of one window: ``column = '<instant>'``."""
    instant = instant_of(micros)
    return f"{column} = '{instant.strftime('%Y-%m-%dT%H:%M:%S.%f')}Z'"


@dataclass(frozen=True)
class CommittedWindow:
    """One window written: the table version its commit made, the window's revision (0 its first evaluation)
    and the rows written."""

    version: int
    revision: int
    rows: int


QUERY_TEXT_PROPERTY = "csparql.query_text"
"""The identity of the query text whose results a result table (or output stream) was created for: the
digest of the text as the parser reads it (``csparql.deploy.history.text_identity``), so that texts differing
only in layout or comments are one query."""
QUERY_VERSION_PROPERTY = "csparql.query_version"
"""The version (``csparql.deploy.history.text_version``) of the query text that created a result table."""


@dataclass(frozen=True)
class TextOwner:
    """The query text an evaluation writes results for: its ``identity`` (``QUERY_TEXT_PROPERTY``), its
    ``version``, and ``same_query``, which says whether another text's identity is that of an earlier version
    of the same registered query (an edit saved through the registry); None: no other text is."""

    identity: str
    version: str | None = None
    same_query: Callable[[str], bool] | None = None

    def accepts(self, recorded: str | None) -> bool:
        """Whether results may be written into a table recorded as created for the text ``recorded`` (None:
        a table created before texts were recorded)."""
        if recorded is None or recorded == self.identity:
            return True
        return self.same_query is not None and self.same_query(recorded)


class QueryTextCollision(StorageError):
    """A query text would write into a result table that holds the results of another query text."""


def collision_line(table: str, path: Path, version: str | None) -> str:
    """The one line refusing to write into ``table`` (its SQL name; at ``path``), which holds the results
    of another query text (``version``: that text's, when recorded)."""
    of = f" (version {version})" if version else ""
    return (f"the result table {table} already holds the results of another query text{of}: register or run "
            f"this one under another name (--as NAME, --name NAME), or remove {path} to start those results "
            "afresh")


class ResultTable:
    """The table one query's results go to (see the module docstring)."""

    def __init__(self, warehouse: Warehouse, query: str, kind: str, variables: tuple[Variable, ...] = (),
                 stream: str | None = None, owner: TextOwner | None = None):
        """``variables``: a SELECT's, recorded when its table is created; ``stream``: the IRI of a ``REGISTER
        STREAM`` query's output stream (``kind`` ``STREAM``); ``owner``: the query text written for, recorded
        when the table is created, and checked before each write (``QueryTextCollision``)."""
        self.warehouse = warehouse
        self.query = query
        self.kind = kind
        self.stream = stream
        self.owner = owner
        self._variables = variables
        self.path = warehouse.stream(stream) if kind == STREAM else warehouse.results(query, kind)

    @classmethod
    def of_plan(cls, warehouse: Warehouse, plan: alg.QueryPlan, name: str,
                variables: tuple[Variable, ...] = (), owner: TextOwner | None = None) -> ResultTable:
        """The table the results of ``plan`` evaluated as ``name`` go to: the output stream of a ``REGISTER
        STREAM`` query (named by the REGISTER name, docs/semantics.md, *Output streams*), else the query's result
        table of its form."""
        registration = plan.registration
        if registration is not None and registration.kind == "STREAM":
            return cls(warehouse, name, STREAM, stream=str(output_stream_iri(registration.name)), owner=owner)
        kind = {alg.SelectResult: "bindings", alg.AskResult: "answers"}.get(type(plan.form), "triples")
        return cls(warehouse, name, kind, variables, owner=owner)

    @classmethod
    def check_owner(cls, warehouse: Warehouse, plan: alg.QueryPlan, name: str, owner: TextOwner) -> None:
        """Refuse (``QueryTextCollision``, one line) when evaluating ``plan`` as ``name`` for the text ``owner``
        would put results beside those of another query text: in the table it writes, or in another result
        table of ``name`` (of another result form)."""
        tables = [cls.of_plan(warehouse, plan, name, owner=owner)]
        tables += [cls(warehouse, name, kind) for kind in RESULT_KINDS if kind != tables[0].kind]
        for table in tables:
            if table.exists():
                table.refuse_other_text(delta.properties(table.path), owner)

    @property
    def sql_name(self) -> str:
        """The name SQL knows the table by."""
        if self.kind == STREAM:
            return f"the output stream <{self.stream}>"
        return sql_table_name(self.query, self.kind)

    def refuse_other_text(self, configuration: Mapping[str, str], owner: TextOwner | None) -> None:
        """``QueryTextCollision`` when the table, whose properties are ``configuration``, was created for
        another query text than ``owner``'s, which is not an earlier version of it (``TextOwner.accepts``)."""
        if owner is not None and not owner.accepts(configuration.get(QUERY_TEXT_PROPERTY)):
            raise QueryTextCollision(collision_line(self.sql_name, self.path,
                                                    configuration.get(QUERY_VERSION_PROPERTY)))

    @classmethod
    def find(cls, warehouse: Warehouse, name: str) -> ResultTable | None:
        """The query's stored result table (the first of ``RESULT_KINDS`` that exists), None before its first
        write."""
        check_query_name(name)
        for kind in RESULT_KINDS:
            if delta.exists(warehouse.results(name, kind)):
                return cls(warehouse, name, kind)
        return None

    # what the table is

    @property
    def schema(self) -> pa.Schema:
        """The schema the table is created with (a bindings table gains its variables' columns as it is
        written)."""
        return {STREAM: schema.STREAM, "answers": schema.ANSWERS, "triples": schema.TRIPLES}.get(
            self.kind, pa.schema(list(schema.WINDOW_COLUMNS)))

    @property
    def partitions(self) -> list[str] | None:
        return schema.STREAM_PARTITIONS if self.kind == STREAM else None

    @property
    def window_column(self) -> str:
        """The column a window's rows are found by: their timestamp in a stream, else ``window_end``."""
        return "ts" if self.kind == STREAM else "window_end"

    @property
    def properties(self) -> dict[str, str]:
        """The table properties recorded when the table is created."""
        text = {}
        if self.owner is not None:
            text[QUERY_TEXT_PROPERTY] = self.owner.identity
            if self.owner.version:
                text[QUERY_VERSION_PROPERTY] = self.owner.version
        if self.kind == STREAM:
            return {IRI_PROPERTY: self.stream, KIND_PROPERTY: "stream", QUERY_PROPERTY: self.query, **text}
        if self.kind == "bindings":
            return {QUERY_PROPERTY: self.query, VARIABLES_PROPERTY: json.dumps([str(v) for v in self._variables]),
                    **text}
        return text

    def exists(self) -> bool:
        return delta.exists(self.path)

    def variables(self) -> tuple[Variable, ...]:
        """A SELECT's variables, in order: as recorded on the table, else from its ``<name>_term`` columns
        (column names replace unsafe characters)."""
        recorded = delta.properties(self.path).get(VARIABLES_PROPERTY)
        if recorded:
            return tuple(Variable(v) for v in json.loads(recorded))
        columns = pa.schema(delta.SNAPSHOTS.latest(self.path).schema().to_arrow()).names
        return tuple(Variable(c[: -len("_term")]) for c in columns if c.endswith("_term"))

    # writing

    def write_window(self, window_end: int, rows: Callable[[pa.Schema], pa.Table],
                     metadata: Callable[[int, pa.Table], Mapping[str, str]]) -> CommittedWindow:
        """Replace the window's rows with ``rows(the table's schema)`` in one commit carrying ``metadata(the
        window's revision, the rows)``, and return what was committed. The revision is the window's next one
        (``csparql.storage.revisions.next_revision``), taken from the version the commit is made on, and the
        commit is made on no other (``delta.write_on_version``): two evaluations of one window never both take
        a revision, nor both add their rows. Result tables, not streams, hold it in a ``revision`` column;
        columns a result table lacks are added to it. A table created for another query text than the
        ``owner``'s is left as it is (``QueryTextCollision``)."""
        written: list[tuple[int, int]] = []

        def build(table) -> delta.Write:
            self.refuse_other_text(table.metadata().configuration or {}, self.owner)
            revision = rv.next_revision(self.warehouse, self.query, window_end, table)
            data = rows(pa.schema(table.schema().to_arrow()))
            written[:] = [(revision, data.num_rows)]
            commit = dict(metadata(revision, data))
            if self.kind != STREAM:
                data = rv.with_revision(data, revision)
            return delta.Write(data, mode="overwrite", predicate=window_predicate(self.window_column, window_end),
                               merge_schema=self.kind != STREAM, metadata=commit)

        version = delta.write_on_version(self.path, self.schema, build, "writing the window's results",
                                         self.partitions, self.properties)
        revision, count = written[0]
        return CommittedWindow(version, revision, count)

    # reading

    def files(self, start: int | None = None, end: int | None = None) -> list[delta.FileInfo]:
        """The live files that can hold a window ending in [start, end] (None: unbounded), by their
        ``window_end`` statistics."""
        _, files = delta.SNAPSHOTS.snapshot(self.path, "window_end")
        return [f for f in files if pruning.may_hold_between(f.min_ts, f.max_ts, start, end)]

    def read(self, start: int | None = None, end: int | None = None) -> pa.Table | None:
        """The rows of the windows ending in [start, end], read from the files that can hold them (None when
        no file can)."""
        data = delta.read_files(self.path, [f.uri for f in self.files(start, end)])
        if data is None:
            return None
        ends = pc.cast(data["window_end"], pa.int64())
        if start is not None:
            data, ends = data.filter(pc.greater_equal(ends, start)), ends.filter(pc.greater_equal(ends, start))
        if end is not None:
            data = data.filter(pc.less_equal(ends, end))
        return data

    def latest_window(self, window_end: int | None = None) -> pa.Table | None:
        """The rows of the latest window (or of the window ending at ``window_end``), read from the files that
        can hold it; None when there are none."""
        _, files = delta.SNAPSHOTS.snapshot(self.path, "window_end")
        if window_end is None:
            chosen = pruning.select_latest_window(files)
        else:
            chosen = [f for f in files if pruning.may_hold_instant(f.min_ts, f.max_ts, window_end)]
        data = delta.read_files(self.path, [f.uri for f in chosen])
        if data is None or data.num_rows == 0:
            return None
        ends = pc.cast(data["window_end"], pa.int64())
        target = window_end if window_end is not None else pc.max(ends).as_py()
        rows = data.filter(pc.equal(ends, target))
        return rows if rows.num_rows else None

    def windows(self, start: int | None = None, end: int | None = None,
                revision: int | None = None) -> Iterator[tuple[int | None, int, QueryResult]]:
        """(window start, window end, results) for each stored window ending in [start, end], in order of
        window end: the current results, or with ``revision`` each window's results as that revision of it
        wrote them (windows that have no such revision are left out)."""
        if revision is None:
            table = self.read(start, end)
            rows = [] if table is None else table.to_pylist()
        else:
            rows = rv.revision_rows(self.warehouse, self.query, self.path, revision)
        groups: dict[int, list[dict]] = defaultdict(list)
        starts: dict[int, int | None] = {}
        for row in rows:
            window_end = micros_of(row["window_end"])
            if (start is not None and window_end < start) or (end is not None and window_end > end):
                continue
            groups[window_end].append(row)
            starts[window_end] = micros_of(row["window_start"])
        vars_ = self.variables() if self.kind == "bindings" and groups else ()
        for window_end in sorted(groups):
            yield starts[window_end], window_end, self.result(groups[window_end], vars_)

    def result(self, rows: list[dict], vars_: tuple[Variable, ...] = ()) -> QueryResult:
        """The results that stored rows of one window stand for (``vars_``: a SELECT's variables)."""
        if self.kind == "answers":
            return QueryResult("ask", boolean=any(r["answer"] for r in rows))
        if self.kind == "triples":
            triples = [tuple(parse_ntriples_term(r[c]) for c in ("subject", "predicate", "object")) for r in rows]
            return QueryResult("construct", triples=triples)
        names = column_names(vars_)
        result_rows = [tuple(parse_ntriples_term(r[f"{names[v]}_term"]) for v in vars_) for r in rows]
        return QueryResult("select", vars=vars_, rows=result_rows)

    def __repr__(self) -> str:
        return f"ResultTable({self.query!r}, {self.kind!r}, {str(self.path)!r})"


def result_table_path(warehouse: Warehouse, plan: alg.QueryPlan, name: str) -> Path:
    """Where the results of ``plan`` evaluated as ``name`` go (``ResultTable.of_plan``)."""
    return ResultTable.of_plan(warehouse, plan, name).path
