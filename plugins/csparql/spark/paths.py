"""SPARQL 1.1 property paths (§18.4) as DataFrame plans.

``evaluate_path(compiler, op, graph_mode)`` compiles one ``PathPattern``. A path is evaluated to a frame of
node pairs ``(a, b)`` (plus the graph ``g`` inside ``GRAPH ?g``, carried through every join, union, distinct
and closure so that each path is evaluated per graph):

- a link ``iri`` gives the pairs (s, o) of the distinct triples with that predicate; ``^p`` swaps them;
- ``p1/p2`` joins on the middle node and ``p1|p2`` is a union, both keeping multiplicities as the spec's
  evaluation does; ``p?``, ``p*`` and ``p+`` give distinct pairs;
- ``!(a|^b)`` is ``!a | ^!b``: the triples whose predicate is not a forward member, and the swapped triples
  whose predicate is not an inverse member;
- zero-length paths pair every node of the graph (subjects and objects of the sources) with itself, and a
  constant end with itself even when it is not in the graph.

``p*`` and ``p+`` are fixpoints computed semi-naively: each round extends only the pairs found in the round
before, and the loop stops when a round adds nothing. When an end of the pattern is a constant the walk
starts there (backwards, over the inverse path, for an object constant), so only what is reachable from it
is ever computed. Evaluation is *seeded*: ``_eval(path, seeds)`` gives the pairs whose start is one of the
seed nodes, which is how constants, sequences and closure rounds restrict what a sub-path computes.

Every round materialises its new pairs with a local checkpoint, which also cuts their lineage (a closure's
plan is a union of checkpointed pieces, never a tower of joins); link relations read inside a loop are
persisted for the duration of the evaluation and unpersisted at the end.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from rdflib import URIRef, Variable

from csparql.algebra import operators as alg
from csparql.language import syntax as sx
from csparql.spark.terms import constant

# Frontiers of at most this many pairs are broadcast to the join with the next step.
BROADCAST_FRONTIER = 200_000
# A closure's reached pairs are kept as a union of checkpointed pieces, compacted into one past this many.
MAX_PIECES = 8


def evaluate_path(compiler, op: alg.PathPattern, graph_mode: bool):
    """The solutions of a path pattern: one column per variable (plus the graph column in graph mode)."""
    from csparql.spark.compiler import GRAPH_COLUMN, CompilationError, Solutions

    if op.sources is None:
        raise CompilationError("the plan was not optimised: a path pattern has no sources (run csparql.optimizer.optimize)")
    evaluator = _PathEvaluator(compiler, op.sources, graph_mode)
    try:
        subject, obj = op.subject, op.object
        if not isinstance(subject, Variable):
            pairs = evaluator.eval(op.path, evaluator.constant_seeds(subject))
        elif not isinstance(obj, Variable):
            pairs = _swap(evaluator.eval(inverse(op.path), evaluator.constant_seeds(obj)))
        else:
            pairs = evaluator.eval(op.path, None)
            if subject == obj:
                pairs = pairs.where(F.col("a") == F.col("b"))
        columns = []
        vars_: list[Variable] = []
        if isinstance(subject, Variable):
            columns.append(F.col("a").alias(compiler.column(subject)))
            vars_.append(subject)
        if isinstance(obj, Variable) and obj != subject:
            columns.append(F.col("b").alias(compiler.column(obj)))
            vars_.append(obj)
        if not isinstance(subject, Variable) and not isinstance(obj, Variable):
            pairs = pairs.where(F.col("b") == constant(obj))
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


# --- evaluation ----------------------------------------------------------------------------------------------


class _PathEvaluator:
    """Evaluates the paths of one pattern over its sources; frames have columns a, b (and g in graph mode)."""

    def __init__(self, compiler, sources: tuple[alg.Source, ...], graph: bool):
        self.compiler = compiler
        self.spark = compiler.spark
        self.sources = sources
        self.graph = graph
        self.expanded = compiler._expand(sources)
        self._triples: DataFrame | None = None
        self._links: dict[tuple, DataFrame] = {}
        self._persisted: list[DataFrame] = []
        self._loop_depth = 0

    # frames

    @property
    def keys(self) -> list[str]:
        return ["g"] if self.graph else []

    def triples(self) -> DataFrame:
        """The triples the pattern reads: s, p, o (and g, the source, in graph mode); not yet distinct."""
        if self._triples is None:
            frame = self.compiler._source_frame(self.sources, self.graph)
            columns = [F.col("s"), F.col("p"), F.col("o")] + ([F.col("src").alias("g")] if self.graph else [])
            self._triples = frame.select(*columns)
        return self._triples

    def _set(self, frame: DataFrame) -> DataFrame:
        """Distinct pairs, unless the sources are a single static graph (already a set of triples)."""
        single_static = len(self.expanded) == 1 and isinstance(self.expanded[0], alg.StaticGraph)
        return frame if single_static else frame.distinct()

    def _pairs(self, frame: DataFrame, inverted: bool) -> DataFrame:
        a, b = ("o", "s") if inverted else ("s", "o")
        return frame.select(F.col(a).alias("a"), F.col(b).alias("b"), *[F.col(k) for k in self.keys])

    def link(self, iri: URIRef, inverted: bool) -> DataFrame:
        """The pairs of the triples with predicate ``iri`` (swapped when inverted); persisted inside loops."""
        key = ("link", iri, inverted)
        if key not in self._links:
            frame = self.triples().where(F.col("p") == constant(iri))
            self._links[key] = self._set(self._pairs(frame, inverted))
        return self._remember(key)

    def negated(self, iris: tuple[URIRef, ...], inverted: bool) -> DataFrame:
        """The pairs of the triples whose predicate is none of ``iris`` (swapped when inverted)."""
        key = ("negated", frozenset(iris), inverted)
        if key not in self._links:
            values = sorted({str(iri) for iri in iris})
            frame = self.triples().where(~F.col("p").getField("value").isin(values))
            self._links[key] = self._set(self._pairs(frame, inverted))
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
        nodes = subjects.unionByName(objects).distinct()
        return nodes.select("a", F.col("a").alias("b"), *self.keys)

    def constant_seeds(self, term) -> DataFrame:
        """A constant as the only start node (in every graph the pattern reads, in graph mode)."""
        frame = self.spark.range(1).select(constant(term).alias("a"))
        if self.graph:
            labels = [str(source.iri) for source in self.expanded]
            graphs = self.spark.createDataFrame([(label,) for label in labels], "g string")
            frame = frame.crossJoin(graphs)
        return F.broadcast(frame)

    # the operators

    def eval(self, path: sx.PathExpr, seeds: DataFrame | None) -> DataFrame:
        """The pairs of a path (a multiset), restricted to those starting at a seed node when seeds are given.

        ``seeds`` has the columns a (and g): distinct start nodes.
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

    def _seeded(self, pairs: DataFrame, seeds: DataFrame | None) -> DataFrame:
        if seeds is None:
            return pairs
        return pairs.join(seeds, on=["a", *self.keys], how="left_semi")

    def _zero(self, seeds: DataFrame | None) -> DataFrame:
        if seeds is None:
            return self.nodes()
        return seeds.select("a", F.col("a").alias("b"), *self.keys)

    def _sequence(self, path: sx.SequencePath, steps: tuple, seeds: DataFrame | None) -> DataFrame:
        if seeds is None and _wants_seeds(steps[0]) and not _wants_seeds(steps[-1]):
            # Walk from the cheap end: the closure then starts from the nodes the other steps reach.
            return _swap(self.eval(inverse(path), None))
        result = self.eval(steps[0], seeds)
        for step in steps[1:]:
            middle = self._middle(result, step)
            result = self._extend(result, middle)
        return result

    def _middle(self, left: DataFrame, step: sx.PathExpr) -> DataFrame:
        """The pairs of ``step`` that can follow ``left`` (seeded by its ends when the step is costly)."""
        if not _wants_seeds(step):
            return self.eval(step, None)
        ends = left.select(F.col("b").alias("a"), *self.keys).distinct()
        return self.eval(step, ends)

    def _extend(self, left: DataFrame, right: DataFrame) -> DataFrame:
        """``left ⋈ right`` on left.b = right.a (and the graph), keeping multiplicities."""
        left = left.withColumnRenamed("b", "__m")
        right = right.withColumnRenamed("a", "__m")
        return left.join(right, on=["__m", *self.keys], how="inner").select("a", "b", *self.keys)

    def _closure(self, inner: sx.PathExpr, seeds: DataFrame | None, zero: bool) -> DataFrame:
        """``inner*`` (zero) or ``inner+``: distinct pairs, by semi-naive iteration to the fixpoint."""
        columns = ["a", "b", *self.keys]
        simple = isinstance(inner, URIRef) or (isinstance(inner, sx.InversePath) and isinstance(inner.path, URIRef))
        self._loop_depth += 1
        try:
            first = self.eval(inner, seeds).select(*columns).distinct()
            frontier, size = self._materialise(first)
            pieces, total = [frontier], size
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
            result = reduce(DataFrame.unionByName, pieces)
            if zero:
                # The zero-length pairs not reached otherwise (a node reached from itself is there already).
                result = result.unionByName(self._zero(seeds).join(self._small(result, total), on=columns, how="left_anti"))
            return result
        finally:
            self._loop_depth -= 1

    @staticmethod
    def _small(frame: DataFrame, size: int) -> DataFrame:
        return F.broadcast(frame) if size <= BROADCAST_FRONTIER else frame

    def _materialise(self, frame: DataFrame) -> tuple[DataFrame, int]:
        """The frame computed once, its lineage cut (a local checkpoint), and its number of rows."""
        checkpointed = frame.localCheckpoint(eager=True)
        return checkpointed, checkpointed.count()

    def release(self) -> None:
        """Unpersist the link relations persisted for loops (what the result needs is checkpointed)."""
        for frame in self._persisted:
            frame.unpersist(blocking=False)
        self._persisted.clear()
