"""Where the compiler reads triples from: the ``SourceReader`` interface and an in-memory implementation.

A reader gives, for each source of a plan (a stream window or a static graph), a DataFrame of its triples with
columns ``s``, ``p``, ``o`` (term structs), ``ts`` (the triple's timestamp; null for static triples) and
``arrival`` (arrival order; null for static triples). The Delta-backed reader is in
``csparql.engine.catalog``; ``MemorySourceReader`` serves tests and one-shot evaluations of in-memory data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import pyarrow as pa

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rdflib import URIRef
from rdflib.term import Identifier

from csparql.core.algebra import operators as alg
from csparql.spark.schema import spark_schema
from csparql.storage import schema
from csparql.storage.terms import term_row
from csparql.core.windows import LogicalWindow, Window, WindowBounds, from_micros

TRIPLES_SCHEMA = spark_schema(schema.STREAM_FILE, nullable=("ts", "arrival"))
"""Triples as a source gives them to the compiler: a stream's files, or a static graph's triples (no ``ts``)."""
_TRIPLES_ARROW = pa.schema([field.with_nullable(True) if field.name in ("ts", "arrival") else field
                            for field in schema.STREAM_FILE])

Triple = tuple[Identifier, Identifier, Identifier]
TimedTriple = tuple[Identifier, Identifier, Identifier, int]  # (s, p, o, τ in microseconds)


class SourceReader(Protocol):
    """What the compiler needs from storage for one evaluation."""

    def read(self, source: alg.Source) -> DataFrame:
        """The triples of one source (for a stream: those of its window in this evaluation)."""

    def named_graphs(self) -> list[URIRef]:
        """The IRIs of every named static graph (what ``ALL_NAMED_GRAPHS`` stands for)."""


_EMPTY_TRIPLES: dict = {}


def empty_triples(spark: SparkSession) -> DataFrame:
    """No triples, as an empty local relation (built once per session): Spark's optimizer knows it is empty and
    drops it from unions and joins, where an empty frame of Python rows would be scanned as a data set of
    its own (and split a one-partition evaluation into several)."""
    cached = _EMPTY_TRIPLES.get(id(spark))
    if cached is None or cached[0] is not spark:
        cached = _EMPTY_TRIPLES[id(spark)] = (spark, spark.createDataFrame(_TRIPLES_ARROW.empty_table(), TRIPLES_SCHEMA))
    return cached[1]


def _row(term: Identifier) -> dict:
    kind, value, datatype, language = term_row(term)
    return {"kind": kind, "value": value, "datatype": datatype, "language": language}


def triples_frame(spark: SparkSession, triples: Iterable, timed: bool = False) -> DataFrame:
    """A DataFrame of (s, p, o[, τ]) tuples of rdflib terms; τ in microseconds; arrival is the list order."""
    rows = []
    for index, item in enumerate(triples):
        s, p, o = item[:3]
        ts = from_micros(item[3]).replace(tzinfo=None) if timed else None
        rows.append((_row(s), _row(p), _row(o), ts, index if timed else None))
    if not rows:
        return empty_triples(spark)
    return spark.createDataFrame(rows, TRIPLES_SCHEMA)


class MemorySourceReader:
    """Sources held in memory: streams as lists of timed triples, static graphs as lists of triples.

    Windows are applied here exactly as docs/semantics.md (*Logical windows*, *Physical windows*) says: a logical
    window ending at t_f holds the triples with t_f − ρ < τ ≤ t_f; a physical window the n latest by (τ, arrival
    order) with τ ≤ t_f. A window's bounds are ``bounds[(stream IRI, window)]`` when given, else those of the
    window closing at ``window_end``.
    """

    def __init__(
        self,
        spark: SparkSession,
        streams: Mapping[URIRef, list[TimedTriple]] | None = None,
        graphs: Mapping[URIRef | None, list[Triple]] | None = None,
        bounds: Mapping[tuple[URIRef, Window], WindowBounds] | None = None,
        window_end: int | None = None,
    ):
        self.spark = spark
        self.streams = dict(streams or {})
        self.graphs = dict(graphs or {})
        self.bounds = dict(bounds or {})
        self.window_end = window_end
        self._frames: dict = {}

    def named_graphs(self) -> list[URIRef]:
        return sorted(iri for iri in self.graphs if iri is not None)

    def read(self, source: alg.Source) -> DataFrame:
        if isinstance(source, alg.StaticGraph):
            key = ("graph", source.iri)
            if key not in self._frames:
                self._frames[key] = triples_frame(self.spark, self.graphs.get(source.iri, []))
            return self._frames[key]
        key = ("stream", source)
        if key not in self._frames:
            self._frames[key] = self._window(source)
        return self._frames[key]

    def _window(self, source: alg.StreamWindow) -> DataFrame:
        triples = self.streams.get(source.iri, [])
        frame = triples_frame(self.spark, triples, timed=True)
        bounds = self.bounds.get((source.iri, source.window))
        if bounds is None:
            if self.window_end is None:
                raise ValueError(f"no window bounds for the stream <{source.iri}>")
            from csparql.core.windows import window_at

            bounds = window_at(source.window, self.window_end)
        end = F.timestamp_micros(F.lit(bounds.end))
        if isinstance(source.window, LogicalWindow):
            start = F.timestamp_micros(F.lit(bounds.start))
            return frame.where((F.col("ts") > start) & (F.col("ts") <= end))
        latest = frame.where(F.col("ts") <= end).orderBy(F.col("ts").desc(), F.col("arrival").desc()).limit(source.window.count)
        return latest
