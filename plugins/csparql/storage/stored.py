"""Reading stored results back, and SQL over the warehouse's tables.

Results are read from the live files of the result tables' current versions (delta-rs) that can hold the
windows asked for (``csparql.storage.results.ResultTable``), window by window, with terms rebuilt from their
lossless N-Triples columns, so they print exactly as the evaluation returned them.

SQL (DataFusion, with the tables registered through delta-rs) is read-only: :func:`read_only_sql` runs queries
over the warehouse's tables, and DataFusion itself refuses every statement that would write, read files outside
the warehouse, or change the session.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from csparql.storage import delta
from csparql.storage.results import ResultTable
from csparql.storage.tables import IRI_PROPERTY, SYSTEM_TABLES
from csparql.storage.warehouse import Warehouse, sql_table_name


class StoredResults(ResultTable):
    """The stored results of one query (SELECT bindings, ASK answers, or CONSTRUCT/DESCRIBE triples): its
    ``ResultTable``, read back window by window (``windows``)."""

    def __init__(self, warehouse: Warehouse, name: str):
        found = ResultTable.find(warehouse, name)
        if found is None:
            raise LookupError(f"no stored results for the query {name} in {warehouse.root}")
        super().__init__(warehouse, name, found.kind)


def sql_tables(warehouse: Warehouse) -> dict[str, Path]:
    """The name SQL knows each table by (DataFusion folds unquoted names to lower case, so tables are known by
    lower-case names only): the warehouse's own tables that SQL shows (runs, statistics, stale_windows:
    ``csparql.storage.tables.SYSTEM_TABLES``; always, read as empty tables of their schema before their first
    row), each query's results by its name (``sql_table_name``), streams and static graphs. Names are checked
    when a query is named (``reserved_name_problem``, ``name_collision``); a table whose name is taken all the same (results written before those checks) gets
    ``_`` appended, so none is hidden."""
    tables: dict[str, Path] = {}
    for system in SYSTEM_TABLES:
        if system.in_sql:
            tables[system.name] = warehouse.root / system.folder

    def add(name: str, folder: Path) -> None:
        while name in tables:
            name += "_"
        tables[name] = folder

    for folder in warehouse.result_folders():
        add(sql_table_name(folder.parent.name, folder.name), folder)
    for kind, folders in (("stream", warehouse.stream_folders()), ("static", warehouse.static_folders())):
        for folder in folders:
            iri = delta.properties(folder).get(IRI_PROPERTY, folder.name)
            readable = re.sub(r"[^A-Za-z0-9]+", "_", iri.split("://", 1)[-1]).strip("_").lower() or "default"
            add(f"{kind}_{readable}", folder)
    return tables


_SYSTEM_SCHEMAS = {system.name: system.schema for system in SYSTEM_TABLES if system.in_sql}


class SqlError(ValueError):
    """A SQL statement that did not run; the message is one line saying why."""


class SqlRefused(SqlError):
    """A statement the read-only SQL surface does not run: DDL, DML, COPY, external tables, session settings."""


# DataFusion's own refusal of a statement its SQLOptions disallow: the kind and DataFusion's name for it.
_REFUSAL = re.compile(r"Error during planning: (DDL|DML|Statement) not supported: (\S.*)")
# What a refused statement is, by DataFusion's name for it, in the words of the SQL that makes it, and what it
# would do. DML other than COPY is named by its operation ("Insert Into", "MergeInto", ...).
_REFUSED_STATEMENTS = {
    "COPY": "COPY writes files",
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
# What a statement of each kind does, for a name the table above does not know.
_WHAT_EACH_KIND_DOES = {"DDL": "changes the catalog", "DML": "changes a table", "Statement": "is not a query"}
_READ_ONLY = "the SQL surface is read-only: only queries (SELECT, WITH, VALUES, EXPLAIN, SHOW, DESCRIBE) run"


def read_only_sql(warehouse: Warehouse, statement: str) -> pa.Table:
    """The result of one read-only SQL statement over the warehouse's tables, by their :func:`sql_tables` names.

    Queries run: SELECT, WITH, VALUES, SHOW (TABLES, COLUMNS, settings), DESCRIBE, EXPLAIN and EXPLAIN
    ANALYZE of a query. Every other statement, EXPLAIN of one included, raises :class:`SqlRefused` before
    anything runs: COPY, INSERT, UPDATE, DELETE, MERGE, TRUNCATE, CREATE (tables, external tables, views,
    schemas, functions), DROP, SET, PREPARE, transactions. A statement DataFusion cannot plan or run (a syntax
    error, an unknown table, a statement it does not support, more than one statement) raises
    :class:`SqlError` with DataFusion's line. Only the registered tables, the information schema and in-memory
    table functions (``generate_series``, ``range``) can be read: DataFusion's file-path tables are off.

    The SQL engine is DataFusion (the ``datafusion`` package), reading the tables through delta-rs's table
    provider; DataFusion itself enforces read-only: its SQLOptions allow no DDL, DML or other statements, and
    it checks the whole logical plan against them before running any of it. A table's Delta log is read only
    when the statement names the table (or lists tables, as SHOW TABLES does).
    """
    from datafusion import SessionConfig, SessionContext, SQLOptions

    # information_schema makes SHOW TABLES, SHOW COLUMNS and SHOW <setting> work (read-only views)
    context = SessionContext(SessionConfig().with_information_schema(True))
    tables = _WarehouseSchema(sql_tables(warehouse))
    context.catalog().register_schema("public", tables)
    queries_only = SQLOptions().with_allow_ddl(False).with_allow_dml(False).with_allow_statements(False)
    try:
        return context.sql_with_options(statement, queries_only).to_arrow_table()
    except Exception as error:  # DataFusion reports SQL errors as exceptions of several types
        if tables.unreadable:
            raise tables.unreadable from None
        lost = tables.missing_files()
        if lost:
            raise lost from None
        message = _first_line(error)
        refused = _REFUSAL.fullmatch(message)
        if refused:
            raise SqlRefused(f"refused: {_what_is_refused(*refused.groups())}; {_READ_ONLY}") from None
        raise SqlError(message) from None


class _WarehouseSchema:
    """The warehouse's tables as DataFusion's ``public`` schema, by their :func:`sql_tables` names, each opened
    with delta-rs when a statement first names it. It has no way to add or drop a table.

    DataFusion calls these methods by name (datafusion 55 reads ``table_names`` as an attribute)."""

    def __init__(self, paths: dict[str, Path]) -> None:
        self._paths = paths
        self._opened: dict[str, object] = {}
        self._tables: dict[str, object] = {}  # the Delta tables opened, by name
        self.unreadable: SqlError | None = None  # the table that could not be opened, if one could not

    @property
    def table_names(self) -> list[str]:
        return sorted(self._paths)

    def owner_name(self) -> None:
        return None

    def table_exist(self, name: str) -> bool:
        return name in self._paths

    def missing_files(self) -> SqlError | None:
        """What the first table the statement opened that references data files no longer on disk lacks (the
        table, the files and the command that repairs it), None when every file is there."""
        for name, table in sorted(self._tables.items()):
            path = self._paths[name]
            lost = delta.missing_files(table, path)
            if lost:
                return SqlError(f"cannot read the table {name}: {delta.MissingFiles(path, lost)}")
        return None

    def table(self, name: str) -> object | None:
        """The DataFusion table ``name`` reads (delta-rs's provider of its current version; one of the
        warehouse's own tables not written yet is an empty table of its schema), or None if no table has that
        name."""
        if name not in self._paths:
            return None
        if name not in self._opened:
            from datafusion.catalog import Table
            from deltalake import DeltaTable

            from csparql.storage.location import is_remote

            path = self._paths[name]
            if name in _SYSTEM_SCHEMAS and not delta.exists(path):
                import pyarrow.dataset as ds

                self._opened[name] = Table(ds.dataset(_SYSTEM_SCHEMAS[name].empty_table()))
                return self._opened[name]
            try:
                with delta.named_failures(path, "reading"):  # a corrupt log entry: its version
                    opened = DeltaTable(str(path))  # a local path or an s3:// URI
                    self._tables[name] = opened
                    # delta-rs's table provider reads local files only through DataFusion's FFI; a table in
                    # S3 is read as the Arrow dataset of its current version's files (with their partitions)
                    self._opened[name] = Table(opened.to_pyarrow_dataset() if is_remote(path) else opened)
            except delta.StorageError as error:
                self.unreadable = SqlError(f"cannot read the table {name}: {error}")
                raise self.unreadable from None
            except Exception as error:  # delta-rs reports unreadable tables with exceptions of several types
                self.unreadable = SqlError(f"cannot read the table {name} ({path}): {_first_line(error)}")
                raise self.unreadable from None
        return self._opened[name]


def _what_is_refused(kind: str, name: str) -> str:
    """What the statement DataFusion refused as ``kind`` (DDL, DML, Statement) under ``name`` is and does."""
    if name in _REFUSED_STATEMENTS:
        return _REFUSED_STATEMENTS[name]
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).upper()
    return f"{words} {_WHAT_EACH_KIND_DOES[kind]}"


def _first_line(error: BaseException) -> str:
    """The first line of what went wrong; of a DataFusion error chain ("type_coercion", "caused by", ...) the
    cause's, which is the line that says it."""
    text = str(error).strip().rsplit("caused by\n", 1)[-1]
    return text.split("\n")[0] or type(error).__name__
