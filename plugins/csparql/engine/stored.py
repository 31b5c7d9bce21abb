"""Reading stored results back, and naming the warehouse's tables for SQL.

Results are read from the live files of the result tables' current versions (delta-rs), window by window,
with terms rebuilt from their lossless N-Triples columns, so they print exactly as the evaluation returned
them.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from rdflib import Variable

from csparql.engine.catalog import IRI_PROPERTY
from csparql.engine.evaluate import QueryResult
from csparql.engine.results import column_names, parse_ntriples_term
from csparql.storage import delta
from csparql.storage.statistics import read_table
from csparql.storage.warehouse import Warehouse, check_query_name, sql_table_name


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
    """The name SQL knows each table by (delta-rs's SQL engine knows tables by lower-case names only): runs,
    statistics, each query's results by its name (``sql_table_name``), streams and static graphs. Names are
    checked when a query is named (``reserved_name_problem``, ``name_collision``); a table whose name is
    taken all the same (results written before those checks) gets ``_`` appended, so none is hidden."""
    tables: dict[str, Path] = {}
    if delta.exists(warehouse.runs):
        tables["runs"] = warehouse.runs
    if delta.exists(warehouse.statistics):
        tables["statistics"] = warehouse.statistics

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
