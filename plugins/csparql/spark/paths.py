"""SPARQL 1.1 property paths (§18.4) as DataFrame plans.

``evaluate_path(op, frames, …)`` compiles one ``PathPattern``. A path is evaluated to a frame of
node pairs ``(a, b)`` (plus the graph ``g`` inside ``GRAPH ?g``, carried through every join, union, distinct
and closure so that each path is evaluated per graph):

- a link ``iri`` gives the pairs (s, o) of the distinct triples with that predicate; ``^p`` swaps them;
- ``p1/p2`` joins on the middle node and ``p1|p2`` is a union, both keeping multiplicities as the spec's
  evaluation does; ``p?``, ``p*`` and ``p+`` give distinct pairs;
- ``!(a|^b)`` is ``!a | ^!b`` (a union, as the spec translates it): the distinct pairs of the triples whose
  predicate is not a forward member, and the swapped pairs of those whose predicate is not an inverse member;
- zero-length paths pair every node of the graph (subjects and objects of the sources) with itself, and a
  constant end with itself even when it is not in the graph.

Evaluation is *seeded*: ``eval(path, seeds)`` gives the pairs whose start is one of the seed nodes, which is
how constants, sequences and the rounds of a closure restrict what a sub-path computes. Seeds are a DataFrame
of start nodes, or ``_Nodes`` (start nodes known on the driver, matched by literals in the plan).

``p*`` and ``p+`` are fixpoints computed semi-naively: each round extends only the pairs found in the round
before, by one more ``p`` step from their ends, and the loop stops when a round adds nothing. When an end of
the pattern is a constant the walk starts there (backwards, over the inverse path, for an object constant), so
only what is reachable from it is computed (sequences with a closure first and a plain step last are walked
backwards for the same reason). While a closure stays small (``LOCAL_PAIRS``), each round is one Spark action
that fetches the steps from the frontier's ends, matched by literals, and the bookkeeping (which pairs are
new) happens on the driver: a walk from one node through a large graph costs one scan of the (persisted) link
relation per round and nothing else. Past that, the rounds are DataFrame joins (the frontier broadcast while
small), anti-joins against what was reached, and distincts, each round materialised with a local checkpoint
whose count is the emptiness test; checkpoints also cut the lineage, so a closure's plan is a union of
checkpointed pieces, never a tower of joins. Link relations read inside a loop are persisted for the
duration of the evaluation and unpersisted at its end (the result depends only on checkpoints or driver data).

Each link reads only the sources that can hold its predicate (the optimizer's statistics), so a closure over
links that only static graphs hold is a closure of static data: it is computed once per version of those
graphs and kept in the reader's ``ClosureStore`` (``csparql.spark.closures``), whole when its start nodes come
from the data (it is then restricted to them), or from the query's constants when they are its start. Under
entailment (``csparql.spark.entailment``) links read the entailed graph.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType
from rdflib import URIRef, Variable

from csparql.core.algebra import operators as alg
from csparql.core.algebra.sexpr import format_path
from csparql.core.language import syntax as sx
from csparql.core.optimizer.statistics import SourceStatistics
from csparql.spark.closures import ClosureKey
from csparql.spark.frames import GRAPH_COLUMN, CompilationError, Solutions, SourceFrames, term_literal
from csparql.spark.terms import TERM_STRUCT, constant
from csparql.storage.terms import term_row

# A closure whose pairs (and whose rounds' steps) stay within this many is tracked on the driver.
LOCAL_PAIRS = 10_000
# Start nodes known on the driver are matched with literals up to this many, with a broadcast join beyond.
NODE_LITERALS = 64
# Frontiers of at most this many pairs are broadcast to the join with the next step.
BROADCAST_FRONTIER = 200_000
# A closure's reached pairs are kept as a union of checkpointed pieces, compacted into one past this many.
MAX_PIECES = 32

Term = tuple  # (kind, value, datatype, language), as stored
Pair = tuple  # (a, b, graph label or None)


def evaluate_path(
    op: alg.PathPattern,
    frames: SourceFrames,
    statistics: SourceStatistics,
    entailment,
    column: Callable[[Variable], str],
    graph_mode: bool,
) -> Solutions:
    """The solutions of a path pattern: one column per variable, named by ``column`` (plus the graph column in
    graph mode). ``statistics`` are those the plan was optimised with; ``entailment`` (or None) as for
    ``PathEvaluator``."""
    if op.sources is None:
        raise CompilationError(
            "the plan was not optimised: a path pattern has no sources (run csparql.core.optimizer.optimize)"
        )
    evaluator = PathEvaluator(frames, statistics, op.sources, graph_mode, entailment)
    try:
        subject, obj = op.subject, op.object
        if not op.sources:
            # GRAPH <iri> for a graph the dataset does not have: no graph, so not even zero-length paths.
            pairs = evaluator.frame([])
        elif not isinstance(subject, Variable):
            pairs = evaluator.eval(op.path, evaluator.constant_seeds(subject))
            if not isinstance(obj, Variable):
                pairs = pairs.where(F.col("b") == constant(obj))
        elif not isinstance(obj, Variable):
            pairs = _swap(evaluator.eval(inverse(op.path), evaluator.constant_seeds(obj)))
        else:
            pairs = evaluator.eval(op.path, None)
            if subject == obj:
                pairs = pairs.where(F.col("a") == F.col("b"))
        columns = []
        vars_: list[Variable] = []
        if isinstance(subject, Variable):
            columns.append(F.col("a").alias(column(subject)))
            vars_.append(subject)
        if isinstance(obj, Variable) and obj != subject:
            columns.append(F.col("b").alias(column(obj)))
            vars_.append(obj)
        if graph_mode:
            columns.append(F.col("g").alias(GRAPH_COLUMN))
        return Solutions(pairs.select(*columns), tuple(vars_), {}, graph=graph_mode)
    finally:
        evaluator.release()


# --- path rewriting ------------------------------------------------------------------------------------------


def inverse(path: sx.PathExpr) -> sx.PathExpr:
    """``^path`` with the inversion pushed down to the links (and negated property sets)."""
    match path:
        case URIRef():
            return sx.InversePath(path)
        case sx.InversePath(inner):
            return inner
        case sx.SequencePath(steps):
            return sx.SequencePath(tuple(inverse(step) for step in reversed(steps)))
        case sx.AlternativePath(options):
            return sx.AlternativePath(tuple(inverse(option) for option in options))
        case sx.ModifiedPath(inner, modifier):
            return sx.ModifiedPath(inverse(inner), modifier)
        case sx.NegatedPropertySet(members):
            return sx.NegatedPropertySet(tuple((iri, not inverted) for iri, inverted in members))
    raise TypeError(f"not a property path: {path!r}")


def _wants_seeds(path: sx.PathExpr) -> bool:
    """Whether a path holds a closure or a zero-length part (costly unless its start nodes are known)."""
    match path:
        case sx.ModifiedPath():
            return True
        case sx.InversePath(inner):
            return _wants_seeds(inner)
        case sx.SequencePath(steps):
            return any(_wants_seeds(step) for step in steps)
        case sx.AlternativePath(options):
            return any(_wants_seeds(option) for option in options)
    return False


def _swap(pairs: DataFrame) -> DataFrame:
    return pairs.withColumnRenamed("a", "__swap").withColumnRenamed("b", "a").withColumnRenamed("__swap", "b")


class _Nodes:
    """Start nodes known on the driver: distinct (term, graph label or None) tuples; ``constant`` when they are
    the query's own constants (not found in the data)."""

    def __init__(self, nodes, constant: bool = False):
        self.nodes: list[tuple[Term, str | None]] = list(dict.fromkeys(nodes))
        self.constant = constant

    def __len__(self) -> int:
        return len(self.nodes)


# --- evaluation ----------------------------------------------------------------------------------------------


class PathEvaluator:
    """Evaluates the paths of one pattern over its sources; frames have columns a, b (and g in graph mode).

    ``frames`` gives the sources' triples; ``statistics`` (those the plan was optimised with) say which sources
    each link reads; ``entailment`` (a ``csparql.spark.entailment.Entailment``, or None) makes links match the
    entailed graph. Call ``release`` when done with the frames it returned."""

    def __init__(
        self,
        frames: SourceFrames,
        statistics: SourceStatistics,
        sources: tuple[alg.Source, ...],
        graph: bool,
        entailment=None,
    ):
        self.frames = frames
        self.statistics = statistics
        self.reader = frames.reader
        self.spark = frames.spark
        self.sources = sources
        self.graph = graph
        self.expanded = frames.expand(sources)
        self.entailment = entailment
        self.keys = ["g"] if graph else []
        self.columns = ["a", "b", *self.keys]
        fields = [StructField("a", TERM_STRUCT, False), StructField("b", TERM_STRUCT, False)]
        self.schema = StructType(fields + ([StructField("g", StringType(), True)] if graph else []))
        self._triples: DataFrame | None = None
        self._links: dict[tuple, DataFrame] = {}
        self._persisted: list[DataFrame] = []
        self._loop_depth = 0

    # frames

    def _frame(self, sources, predicate: URIRef | None = None) -> DataFrame:
        """The triples of some of the pattern's sources (entailed ones too, under entailment), with predicate
        ``predicate`` when given: s, p, o (and g, the source, in graph mode); not yet distinct."""
        frame = self.frames.triples(tuple(sources))
        if self.entailment is not None:
            frame = self.entailment.triples(frame, predicate=predicate)
        elif predicate is not None:
            frame = frame.where(F.col("p") == constant(predicate))
        columns = [F.col("s"), F.col("p"), F.col("o")] + ([F.col("src").alias("g")] if self.graph else [])
        return frame.select(*columns)

    def triples(self) -> DataFrame:
        """The triples the pattern reads: s, p, o (and g, the source, in graph mode); not yet distinct."""
        if self._triples is None:
            self._triples = self._frame(self.expanded)
        return self._triples

    def link_sources(self, iri: URIRef) -> list[alg.Source]:
        """The sources that can hold triples with predicate ``iri`` (by the optimizer's statistics, which
        count sub-properties under entailment)."""
        return [source for source in self.expanded if self.statistics.can_match(source, iri)]

    def _pairs(self, frame: DataFrame, inverted: bool) -> DataFrame:
        a, b = ("o", "s") if inverted else ("s", "o")
        return frame.select(F.col(a).alias("a"), F.col(b).alias("b"), *[F.col(k) for k in self.keys])

    def link(self, iri: URIRef, inverted: bool) -> DataFrame:
        """The pairs of the triples with predicate ``iri`` (swapped when inverted); persisted inside loops."""
        key = ("link", iri, inverted)
        if key not in self._links:
            sources = self.link_sources(iri)
            pairs = self._pairs(self._frame(sources, iri), inverted)
            single_static = len(sources) == 1 and isinstance(sources[0], alg.StaticGraph) and self.entailment is None
            # A single static graph is a set of triples already; several sources (or inferences) may share triples.
            self._links[key] = pairs if single_static else pairs.distinct()
        return self._remember(key)

    def negated(self, iris: tuple[URIRef, ...], inverted: bool) -> DataFrame:
        """The pairs of the triples whose predicate is none of ``iris`` (swapped when inverted)."""
        key = ("negated", frozenset(iris), inverted)
        if key not in self._links:
            values = sorted({str(iri) for iri in iris})
            frame = self.triples().where(~F.col("p").getField("value").isin(values))
            # Two triples that differ only in their predicate give one pair (the spec's NPS is a set).
            self._links[key] = self._pairs(frame, inverted).distinct()
        return self._remember(key)

    def _remember(self, key: tuple) -> DataFrame:
        frame = self._links[key]
        if self._loop_depth > 0 and not frame.is_cached:
            frame = frame.persist()
            self._links[key] = frame
            self._persisted.append(frame)
        return frame

    def nodes(self) -> DataFrame:
        """Every node of the graph (per graph in graph mode), as distinct zero-length pairs."""
        triples = self.triples()
        subjects = triples.select(F.col("s").alias("a"), *self.keys)
        objects = triples.select(F.col("o").alias("a"), *self.keys)
        return subjects.unionByName(objects).distinct().select("a", F.col("a").alias("b"), *self.keys)

    def constant_seeds(self, term) -> _Nodes:
        """A constant as the only start node (in every graph the pattern reads, in graph mode)."""
        labels = [str(source.graph_name) for source in self.expanded] if self.graph else [None]
        return _Nodes(((term_row(term), label) for label in labels), constant=True)

    def frame(self, pairs: list[Pair]) -> DataFrame:
        """A frame of pairs held on the driver."""
        rows = [pair if self.graph else pair[:2] for pair in pairs]
        return self.spark.createDataFrame(rows, self.schema)

    def node_frame(self, seeds: _Nodes) -> DataFrame:
        """Start nodes held on the driver as a frame (a and g)."""
        schema = StructType([field for field in self.schema.fields if field.name != "b"])
        return self.spark.createDataFrame([(n, g) if self.graph else (n,) for n, g in seeds.nodes], schema)

    # the operators

    def eval(self, path: sx.PathExpr, seeds: DataFrame | _Nodes | None) -> DataFrame:
        """The pairs of a path (a multiset), restricted to those starting at a seed node when seeds are given.

        ``seeds`` are distinct start nodes: a frame with the columns a (and g), or ``_Nodes``.
        """
        match path:
            case URIRef():
                return self._seeded(self.link(path, False), seeds)
            case sx.InversePath(URIRef() as iri):
                return self._seeded(self.link(iri, True), seeds)
            case sx.InversePath(inner):
                return self.eval(inverse(inner), seeds)
            case sx.NegatedPropertySet(members):
                forward = tuple(iri for iri, inverted in members if not inverted)
                backward = tuple(iri for iri, inverted in members if inverted)
                parts = []
                if forward:
                    parts.append(self._seeded(self.negated(forward, False), seeds))
                if backward:
                    parts.append(self._seeded(self.negated(backward, True), seeds))
                return reduce(DataFrame.unionByName, parts)
            case sx.AlternativePath(options):
                return reduce(DataFrame.unionByName, [self.eval(option, seeds) for option in options])
            case sx.SequencePath(steps):
                return self._sequence(path, steps, seeds)
            case sx.ModifiedPath(inner, "?"):
                return self._zero(seeds).unionByName(self.eval(inner, seeds)).distinct()
            case sx.ModifiedPath(inner, "*"):
                return self._closure(inner, seeds, zero=True)
            case sx.ModifiedPath(inner, "+"):
                return self._closure(inner, seeds, zero=False)
        raise TypeError(f"not a property path: {path!r}")

    def _seeded(self, pairs: DataFrame, seeds: DataFrame | _Nodes | None) -> DataFrame:
        if seeds is None:
            return pairs
        if isinstance(seeds, _Nodes):
            if len(seeds) > NODE_LITERALS:
                return pairs.join(F.broadcast(self.node_frame(seeds)), on=["a", *self.keys], how="left_semi")
            by_graph: dict[str | None, list[Term]] = defaultdict(list)
            for node, label in seeds.nodes:
                by_graph[label].append(node)
            conditions = []
            for label, nodes in by_graph.items():
                condition = F.col("a").isin([term_literal(node) for node in nodes])
                conditions.append(condition if label is None else (F.col("g") == F.lit(label)) & condition)
            return pairs.where(reduce(lambda x, y: x | y, conditions)) if conditions else pairs.limit(0)
        return pairs.join(seeds, on=["a", *self.keys], how="left_semi")

    def _zero(self, seeds: DataFrame | _Nodes | None) -> DataFrame:
        if seeds is None:
            return self.nodes()
        if isinstance(seeds, _Nodes):
            return self.frame([(node, node, label) for node, label in seeds.nodes])
        return seeds.select("a", F.col("a").alias("b"), *self.keys)

    def _sequence(self, path: sx.SequencePath, steps: tuple, seeds) -> DataFrame:
        if seeds is None and _wants_seeds(steps[0]) and not _wants_seeds(steps[-1]):
            # Walk from the cheap end: the closure then starts from the nodes the other steps reach.
            return _swap(self.eval(inverse(path), None))
        result = self.eval(steps[0], seeds)
        for step in steps[1:]:
            if _wants_seeds(step):
                following = self.eval(step, result.select(F.col("b").alias("a"), *self.keys).distinct())
            else:
                following = self.eval(step, None)
            result = self._extend(result, following)
        return result

    def _extend(self, left: DataFrame, right: DataFrame) -> DataFrame:
        """``left ⋈ right`` on left.b = right.a (and the graph), keeping multiplicities."""
        left = left.withColumnRenamed("b", "__m")
        right = right.withColumnRenamed("a", "__m")
        return left.join(right, on=["__m", *self.keys], how="inner").select("a", "b", *self.keys)

    # closures

    def _closure(self, inner: sx.PathExpr, seeds, zero: bool) -> DataFrame:
        """``inner*`` (zero) or ``inner+``: distinct pairs, by semi-naive iteration to the fixpoint, or from the
        closure store when ``inner+`` is a closure of static graphs."""
        self._loop_depth += 1
        try:
            constant_start = isinstance(seeds, _Nodes) and seeds.constant
            key = self.closure_key(inner, seeds if constant_start else None)
            if key is None:
                result = self._plus(inner, seeds)
            else:
                result = self._stored(key, lambda: self._plus(inner, seeds if constant_start else None))
                if not constant_start:
                    result = self._seeded(result, seeds)
            if zero:
                # The zero-length pairs not reached otherwise (a node reached from itself is there already).
                result = result.unionByName(self._zero(seeds).join(result, on=self.columns, how="left_anti"))
            return result
        finally:
            self._loop_depth -= 1

    def _plus(self, inner: sx.PathExpr, seeds) -> DataFrame:
        """``inner+`` from the seeds (every start when None): its distinct pairs."""
        first = self.eval(inner, seeds).select(*self.columns)
        rows = self._collect(first)
        if rows is not None:
            return self._local_closure(inner, rows)
        frontier, size = self._materialise(first.distinct())
        return self._spark_closure(inner, frontier, size, [frontier], size)

    # closures of static graphs

    def _read_sources(self, path: sx.PathExpr) -> set[alg.Source] | None:
        """The sources a path's links read (None: every source, for negated sets and zero-length parts)."""
        match path:
            case URIRef():
                return set(self.link_sources(path))
            case sx.InversePath(inner):
                return self._read_sources(inner)
            case sx.SequencePath(parts) | sx.AlternativePath(parts):
                found: set[alg.Source] = set()
                for part in parts:
                    sources = self._read_sources(part)
                    if sources is None:
                        return None
                    found |= sources
                return found
            case sx.ModifiedPath(inner, "+"):
                return self._read_sources(inner)
        return None

    def closure_key(self, inner: sx.PathExpr, seeds: _Nodes | None) -> ClosureKey | None:
        """The key of ``inner+`` (from constant seeds, if given) when it reads static graphs only and the reader
        keeps closures; None otherwise."""
        reader = self.reader
        if getattr(reader, "closures", None) is None or not hasattr(reader, "static_version"):
            return None
        sources = self._read_sources(inner)
        if not sources or not all(isinstance(source, alg.StaticGraph) for source in sources):
            return None
        graphs = set(sources)
        description = f"(closure (path+ {format_path(inner)})" + (" (per-graph)" if self.graph else "")
        if self.entailment is not None:
            description += " " + self.entailment.description
            graphs |= set(self.entailment.ontology)
        if seeds is not None:
            description += " (from " + " ".join(sorted(repr(node) for node in seeds.nodes)) + ")"
        versions = tuple(
            (_label(source), reader.static_version(source)) for source in sorted(graphs, key=_label)
        )
        return ClosureKey(description + ")", versions)

    def _stored(self, key: ClosureKey, compute) -> DataFrame:
        store = self.reader.closures
        pairs = store.fetch(key)
        if pairs is None:
            computed = compute()
            if not self.graph:
                computed = computed.withColumn("g", F.lit(None).cast(StringType()))
            pairs = store.store(key, computed.select("a", "b", "g"))
        return pairs.select(*self.columns)

    def _local_closure(self, inner: sx.PathExpr, first: list[Pair]) -> DataFrame:
        """The closure from its first step, with the reached pairs on the driver; each round is one Spark job
        (the steps from the frontier's ends)."""
        reached: dict[Pair, None] = dict.fromkeys(first)
        frontier = first
        while frontier:
            ends = _Nodes((b, label) for _, b, label in frontier)
            steps = self._collect(self.eval(inner, ends).select(*self.columns))
            if steps is None:  # too many steps to bring to the driver: go on with DataFrames
                return self._spark_from(inner, list(reached), frontier)
            following: dict[tuple, list[Term]] = defaultdict(list)
            for middle, b, label in steps:
                following[(middle, label)].append(b)
            new: list[Pair] = []
            for a, middle, label in frontier:
                for b in following.get((middle, label), ()):
                    pair = (a, b, label)
                    if pair not in reached:
                        reached[pair] = None
                        new.append(pair)
                if len(reached) > LOCAL_PAIRS:
                    # Every reached pair not yet extended is in the frontier: the one of this round (its
                    # candidates already reached drop out again) and the new pairs found so far.
                    return self._spark_from(inner, list(reached), frontier + new)
            frontier = new
        return self.frame(list(reached))

    def _spark_from(self, inner: sx.PathExpr, reached: list[Pair], frontier: list[Pair]) -> DataFrame:
        """Continue a closure with DataFrames from the state reached on the driver."""
        pieces = [self._materialise(self.frame(reached))[0]]
        start, size = self._materialise(self.frame(frontier))
        return self._spark_closure(inner, start, size, pieces, len(reached))

    def _spark_closure(self, inner, frontier: DataFrame, size: int, pieces: list[DataFrame], total: int) -> DataFrame:
        """The closure's rounds as DataFrames: ``pieces`` hold every pair reached (``total`` of them), of which
        ``frontier`` (``size`` pairs) are still to extend."""
        columns = self.columns
        simple = isinstance(inner, URIRef) or (isinstance(inner, sx.InversePath) and isinstance(inner.path, URIRef))
        while size > 0:
            if simple:
                step = self.eval(inner, None)
            else:
                step = self.eval(inner, frontier.select(F.col("b").alias("a"), *self.keys).distinct())
            candidates = self._extend(self._small(frontier, size), step)
            reached = self._small(reduce(DataFrame.unionByName, pieces), total)
            frontier, size = self._materialise(candidates.join(reached, on=columns, how="left_anti").distinct())
            if size == 0:
                break
            pieces.append(frontier)
            total += size
            if len(pieces) > MAX_PIECES:
                pieces = [self._materialise(reduce(DataFrame.unionByName, pieces))[0]]
        return reduce(DataFrame.unionByName, pieces)

    @staticmethod
    def _small(frame: DataFrame, size: int) -> DataFrame:
        return F.broadcast(frame) if size <= BROADCAST_FRONTIER else frame

    def _collect(self, frame: DataFrame) -> list[Pair] | None:
        """The distinct pairs of a frame on the driver, or None when it has more than ``LOCAL_PAIRS`` rows."""
        rows = frame.limit(LOCAL_PAIRS + 1).collect()
        if len(rows) > LOCAL_PAIRS:
            return None
        return list(dict.fromkeys((tuple(r["a"]), tuple(r["b"]), r["g"] if self.graph else None) for r in rows))

    def _materialise(self, frame: DataFrame) -> tuple[DataFrame, int]:
        """The frame computed once, its lineage cut (a local checkpoint), and its number of rows: the count is the
        action that computes and checkpoints it (a lazy checkpoint saves a job)."""
        checkpointed = frame.localCheckpoint(eager=False)
        return checkpointed, checkpointed.count()

    def release(self) -> None:
        """Unpersist the link relations persisted for loops (what the result needs is checkpointed or local)."""
        for frame in self._persisted:
            frame.unpersist(blocking=False)
        self._persisted.clear()


def _label(source: alg.StaticGraph) -> str:
    return "default" if source.iri is None else str(source.iri)
