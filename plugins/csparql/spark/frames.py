"""The frames the compiler, the property path evaluator and entailment share.

``SourceFrames`` gives the triples of an evaluation's sources as one DataFrame per set of sources (what
``csparql.spark.compiler``, ``csparql.spark.paths`` and ``csparql.spark.entailment`` all read patterns from),
``Solutions`` is a compiled pattern, ``GRAPH_COLUMN`` the column of the graph inside ``GRAPH ?g``, and
``term_literal`` a stored term as a Spark literal. Nothing here depends on the compiler, so the path evaluator
and entailment need neither the compiler nor a compiler of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType, LongType, StringType
from rdflib import Variable

from csparql.core.algebra import operators as alg
from csparql.spark.sources import SourceReader, empty_triples

GRAPH_COLUMN = "__graph"
"""The column of a solution's graph (its source's IRI) inside ``GRAPH ?g``."""


class CompilationError(Exception):
    """The plan holds something the Spark compiler does not know; the message names it."""


@dataclass
class Solutions:
    """A compiled pattern: its DataFrame and what its columns mean."""

    df: DataFrame
    vars: tuple[Variable, ...]  # in-scope variables, in order
    stamps: dict[Variable, list[tuple[str, str | None]]] = field(default_factory=dict)
    graph: bool = False  # whether the graph column (inside GRAPH ?g) is present
    ordering: list[tuple[str, bool]] = field(default_factory=list)  # sort-key columns (name, descending)


def term_literal(term: tuple) -> Column:
    """A stored term row ``(kind, value, datatype, language)`` as a Spark literal of the term struct."""
    kind, value, datatype, language = term
    return F.struct(
        F.lit(kind).cast(ByteType()).alias("kind"),
        F.lit(value).alias("value"),
        F.lit(datatype).cast(StringType()).alias("datatype"),
        F.lit(language).cast(StringType()).alias("language"),
    )


class SourceFrames:
    """The triples of one evaluation's sources, read through its ``SourceReader``.

    ``compact``: every source is read into one partition (``csparql.spark.compiler.COMPACT_TRIPLES``).
    ``share_windows``: in a distributed evaluation each stream window is read as one set that every pattern
    over it shares (see ``shares_window``); entailment, which rewrites the stored triples per pattern, does
    not share them. ``pane`` (µs): every frame has a column ``pane``, the end of the pane of length ``pane``
    its triple's timestamp lies in (null for static triples), and a window is a set per pane."""

    def __init__(self, spark: SparkSession, reader: SourceReader, compact: bool = False, share_windows: bool = True,
                 pane: int | None = None):
        self.spark = spark
        self.reader = reader
        self.compact = compact
        self.share_windows = share_windows
        self.pane = pane
        self._window_sets: dict[alg.StreamWindow, DataFrame] = {}

    def expand(self, sources: tuple[alg.Source, ...]) -> list[alg.Source]:
        """The sources, with ``ALL_NAMED_GRAPHS`` replaced by the reader's named graphs, each once, in order."""
        expanded: list[alg.Source] = []
        for source in sources:
            if source == alg.ALL_NAMED_GRAPHS:
                expanded.extend(alg.StaticGraph(iri) for iri in self.reader.named_graphs())
            else:
                expanded.append(source)
        return list(dict.fromkeys(expanded))

    def triples(self, sources: tuple[alg.Source, ...]) -> DataFrame:
        """The triples of the sources, one frame: ``s``, ``p``, ``o``, ``ts``, ``arrival`` and ``src`` (the
        IRI that names the source as a graph, ``graph_name``; null for the default graph); not distinct across sources."""
        frames = []
        for source in self.expand(sources):
            frame = self._window_set(source) if self.shares_window(source) else self._with_pane(self.reader.read(source))
            label = str(source.graph_name) if source.graph_name is not None else None
            frames.append(frame.withColumn("src", F.lit(label).cast(StringType())))
        if not frames:
            return self._with_pane(empty_triples(self.spark)).withColumn("src", F.lit(None).cast(StringType()))
        union = reduce(lambda a, b: a.unionByName(b), frames)
        # One partition for the whole union: a union of one-partition frames has one partition per frame, and
        # every join or aggregate above it would shuffle.
        return union.coalesce(1) if self.compact else union

    def _with_pane(self, frame: DataFrame) -> DataFrame:
        """In pane mode, the frame with its ``pane`` column: the least multiple of ``pane`` at or after ``ts``
        (integer arithmetic on microseconds: a pane is (end − pane, end])."""
        if self.pane is None:
            return frame
        micros = F.unix_micros(F.col("ts"))
        return frame.withColumn("pane", micros + F.pmod(-micros, F.lit(self.pane).cast(LongType())))

    def shares_window(self, source: alg.Source) -> bool:
        """Whether patterns read a stream window as one set shared by all of them: in a distributed
        evaluation, where every pattern's own scan and shuffle would read the whole window again (a compact
        one reads its single partition once per pattern, filtered by the pattern first, which is cheaper)."""
        return isinstance(source, alg.StreamWindow) and not self.compact and self.share_windows

    def _window_set(self, source: alg.StreamWindow) -> DataFrame:
        """The window as a set — each triple once, with its latest timestamp — built once per evaluation, so
        that every pattern over the window shares one scan and one shuffle (Spark reuses the exchange of
        identical subplans)."""
        if source not in self._window_sets:
            frame = self._with_pane(self.reader.read(source))
            keys = ("s", "p", "o") if self.pane is None else ("s", "p", "o", "pane")
            self._window_sets[source] = frame.groupBy(*keys).agg(
                F.max("ts").alias("ts"), F.max("arrival").alias("arrival"))
        return self._window_sets[source]
