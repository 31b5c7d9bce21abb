"""Reading stored results back, and SQL over the warehouse's tables.

Results are read from the live files of the result tables' current versions (delta-rs), window by window,
with terms rebuilt from their lossless N-Triples columns, so they print exactly as the evaluation returned
them.

SQL (delta-rs's DataFusion) is read-only: :func:`read_only_sql` runs queries over the warehouse's tables and
refuses every statement that would write, read files outside the warehouse, or change the session.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
from rdflib import Variable

from csparql.engine.catalog import IRI_PROPERTY
from csparql.engine.evaluate import QueryResult
from csparql.engine.results import column_names, parse_ntriples_term
from csparql.storage import delta
from csparql.storage.statistics import read_table
from csparql.storage.warehouse import Warehouse, check_query_name


def _micros(value: datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    delta_ = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta_.days * 86_400 + delta_.seconds) * 1_000_000 + delta_.microseconds


class StoredResults:
    """The stored results of one query (SELECT bindings, ASK answers, or CONSTRUCT/DESCRIBE triples)."""

    def __init__(self, warehouse: Warehouse, name: str):
        check_query_name(name)
        self.name = name
        for kind in ("bindings", "answers", "triples"):
            path = warehouse.results(name, kind)
            if delta.exists(path):
                self.kind, self.path = kind, path
                break
        else:
            raise LookupError(f"no stored results for the query {name} in {warehouse.root}")

    def windows(self, start: int | None = None, end: int | None = None) -> Iterator[tuple[int | None, int, QueryResult]]:
        """(window start, window end, results) for each stored window, in order of window end."""
        table = read_table(self.path)
        rows = table.to_pylist()
        groups: dict[int, list[dict]] = defaultdict(list)
        starts: dict[int, int | None] = {}
        for row in rows:
            window_end = _micros(row["window_end"])
            if (start is not None and window_end < start) or (end is not None and window_end > end):
                continue
            groups[window_end].append(row)
            starts[window_end] = _micros(row["window_start"])
        vars_ = self._variables(table.column_names)
        for window_end in sorted(groups):
            yield starts[window_end], window_end, self._result(groups[window_end], vars_)

    def _variables(self, columns: list[str]) -> tuple[Variable, ...]:
        """The query's variables, in order (recorded on the table; column names replace unsafe characters)."""
        recorded = delta.properties(self.path).get("csparql.variables")
        if recorded:
            return tuple(Variable(v) for v in json.loads(recorded))
        return tuple(Variable(c[: -len("_term")]) for c in columns if c.endswith("_term"))

    def _result(self, rows: list[dict], vars_: tuple[Variable, ...]) -> QueryResult:
        if self.kind == "answers":
            return QueryResult("ask", boolean=any(r["answer"] for r in rows))
        if self.kind == "triples":
            triples = [tuple(parse_ntriples_term(r[c]) for c in ("subject", "predicate", "object")) for r in rows]
            return QueryResult("construct", triples=triples)
        names = column_names(vars_)
        result_rows = [tuple(parse_ntriples_term(r[f"{names[v]}_term"]) for v in vars_) for r in rows]
        return QueryResult("select", vars=vars_, rows=result_rows)


def sql_tables(warehouse: Warehouse) -> dict[str, Path]:
    """The name SQL knows each table by: results by query name, runs, statistics, streams and static graphs."""
    tables: dict[str, Path] = {}
    for folder in warehouse.result_folders():
        query, kind = folder.parent.name, folder.name
        # delta-rs's SQL engine knows registered tables by lower-case names only.
        tables[(query if kind == "bindings" else f"{query}_{kind}").lower()] = folder
    if delta.exists(warehouse.runs):
        tables["runs"] = warehouse.runs
    if delta.exists(warehouse.statistics):
        tables["statistics"] = warehouse.statistics
    for kind, folders in (("stream", warehouse.stream_folders()), ("static", warehouse.static_folders())):
        for folder in folders:
            iri = delta.properties(folder).get(IRI_PROPERTY, folder.name)
            readable = re.sub(r"[^A-Za-z0-9]+", "_", iri.split("://", 1)[-1]).strip("_").lower() or "default"
            name = f"{kind}_{readable}"
            while name in tables:
                name += "_"
            tables[name] = folder
    return tables


class SqlError(ValueError):
    """A SQL statement that did not run; the message is one line saying why."""


class SqlRefused(SqlError):
    """A statement the read-only SQL surface does not run: DDL, DML, COPY, external tables, session settings."""


# The operators DataFusion's logical plans of queries start with (``<kind> Join`` aside); anything else at the
# top of a plan (CopyTo, Dml, CreateExternalTable, DropTable, SetVariable, Prepare, ...) is refused.
_QUERY_PLAN_TOPS = frozenset({
    "Projection", "Filter", "WindowAggr", "Aggregate", "Sort", "Limit", "Union", "Distinct", "DistinctOn",
    "SubqueryAlias", "Subquery", "TableScan", "EmptyRelation", "Values", "Unnest", "RecursiveQuery",
    "Repartition", "DescribeTable",
})
# What a refused plan's top operator is, in the words of the SQL that makes it, and what it would do.
_REFUSED_STATEMENTS = {
    "CopyTo": "COPY writes files",
    "CreateExternalTable": "CREATE EXTERNAL TABLE reads files outside the warehouse's tables",
    "CreateMemoryTable": "CREATE TABLE changes the catalog",
    "CreateView": "CREATE VIEW changes the catalog",
    "CreateCatalogSchema": "CREATE SCHEMA changes the catalog",
    "CreateCatalog": "CREATE DATABASE changes the catalog",
    "CreateIndex": "CREATE INDEX changes the catalog",
    "CreateFunction": "CREATE FUNCTION changes the catalog",
    "DropTable": "DROP TABLE changes the catalog",
    "DropView": "DROP VIEW changes the catalog",
    "DropCatalogSchema": "DROP SCHEMA changes the catalog",
    "DropFunction": "DROP FUNCTION changes the catalog",
    "SetVariable": "SET changes the session",
    "ResetVariable": "RESET changes the session",
    "Prepare": "PREPARE changes the session",
    "Execute": "EXECUTE runs a prepared statement",
    "Deallocate": "DEALLOCATE changes the session",
    "TransactionStart": "a transaction is not a query",
    "TransactionEnd": "COMMIT and ROLLBACK are not queries",
}
# The check plans the statement under this prefix. DataFusion reads ANALYZE (or an "(ANALYZE)" option list)
# only right after EXPLAIN, so no statement can turn the check into a run; the line of its own keeps the
# statement's columns in error messages.
_CHECK_PREFIX = "EXPLAIN VERBOSE\n"
# DataFusion's error when the statement under the check's prefix is itself a plain EXPLAIN (not ANALYZE).
_PLAIN_EXPLAIN = "Nested EXPLAINs are not supported"


def read_only_sql(warehouse: Warehouse, statement: str) -> pa.Table:
    """The result of one read-only SQL statement over the warehouse's tables, by their :func:`sql_tables` names.

    Queries run: SELECT, WITH, VALUES, SHOW (TABLES, COLUMNS, settings), DESCRIBE, EXPLAIN, and EXPLAIN
    ANALYZE of a query. Every other statement raises :class:`SqlRefused` before anything runs: COPY, INSERT,
    UPDATE, DELETE, MERGE, TRUNCATE, CREATE (tables, external tables, views, schemas), DROP, SET, PREPARE,
    transactions. A statement DataFusion cannot plan or run (a syntax error, an unknown table, more than one
    statement) raises :class:`SqlError` with DataFusion's first line. Only the registered tables, information
    schema and in-memory table functions (``generate_series``, ``range``) can be read: DataFusion's
    file-path tables are off.

    The statement is classified by DataFusion itself, not by matching its text: it is first planned under
    ``EXPLAIN VERBOSE`` (which plans and never runs it, and leaves no room for an ANALYZE), and it runs
    only if its logical plan is a query's. A plain EXPLAIN, which DataFusion refuses to nest, shows a plan
    without running anything, so it runs as given.
    """
    from deltalake import DeltaTable, QueryBuilder

    # information_schema makes SHOW TABLES, SHOW COLUMNS and SHOW <setting> work (read-only views)
    builder = QueryBuilder({"datafusion.catalog.information_schema": "true"})
    for name, path in sorted(sql_tables(warehouse).items()):
        try:
            builder = builder.register(name, DeltaTable(str(path)))
        except Exception as error:  # delta-rs reports unreadable tables with exceptions of several types
            raise SqlError(f"cannot read the table {name} ({path}): {_first_line(error)}") from None
    try:
        plans = pa.table(builder.execute(_CHECK_PREFIX + statement).read_all())
    except Exception as error:  # delta-rs reports SQL errors as exceptions of several types
        message = _first_line(error)
        if _PLAIN_EXPLAIN not in message:
            # the check's prefix is a line of its own: errors point at the user's lines once shifted back
            raise SqlError(re.sub(r"Line: (\d+)", lambda m: f"Line: {int(m.group(1)) - 1}", message)) from None
    else:
        initial = [row["plan"] for row in plans.to_pylist() if row["plan_type"] == "initial_logical_plan"]
        _refuse_unless_query(initial[0] if initial else "")
    try:
        return pa.table(builder.execute(statement).read_all())
    except Exception as error:  # as above
        raise SqlError(_first_line(error)) from None


def _refuse_unless_query(plan: str) -> None:
    """Raise :class:`SqlRefused` unless ``plan`` (DataFusion's indented logical plan) is a query's, or EXPLAIN
    ANALYZE of a query's (ANALYZE runs what it explains)."""
    lines = [line.strip() for line in plan.splitlines()]
    analyzed = bool(lines) and lines[0] == "Analyze"
    while lines and lines[0] == "Analyze":
        lines.pop(0)
    top = lines[0] if lines else ""
    operator = top.split(":", 1)[0]
    if operator in _QUERY_PLAN_TOPS or operator.endswith(" Join"):
        return
    if operator == "Dml":  # Dml: op=[Insert Into] table=[...], op=[MergeInto] ...
        op = re.search(r"op=\[([^\]]*)\]", top)
        words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", op.group(1)).upper() if op else "DML"
        what = f"{words} changes a table"
    else:
        what = _REFUSED_STATEMENTS.get(operator, f"{operator or 'this statement'} is not a query")
    prefix = "EXPLAIN ANALYZE runs its statement, and " if analyzed else ""
    raise SqlRefused(f"the warehouse is read-only to SQL: {prefix}{what}; only queries run (SELECT, WITH, "
                     "VALUES, SHOW, DESCRIBE, EXPLAIN)")


def _first_line(error: BaseException) -> str:
    """The first line of what went wrong; of a DataFusion error chain ("type_coercion", "caused by", ...) the
    cause's, which is the line that says it."""
    text = str(error).strip().rsplit("caused by\n", 1)[-1]
    return text.split("\n")[0] or type(error).__name__
