"""Optimised algebra to Spark DataFrame plans: one method per operator (an unknown operator is an error that
names it). Nothing here builds SQL text; every plan is made of DataFrame operations and Spark functions.

Solutions are DataFrames with one column per variable, holding the term struct (null = unbound). Alongside
travel provenance columns for ``timestamp()`` (only when the query uses it), the graph column inside
``GRAPH ?g``, and sort-key columns below an ``ORDER BY`` that a DISTINCT or LIMIT must respect.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Hashable
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType
from rdflib import Variable

from csparql.core.algebra import operators as alg
from csparql.core.algebra.variables import certain
from csparql.core.algebra.walk import walk
from csparql.core.language import expressions as ex
from csparql.core.panes import PANE_VAR
from csparql.core.optimizer.statistics import NO_STATISTICS, SourceStatistics
from csparql.spark import values as v
from csparql.spark.aggregates import aggregate_columns, window_aggregate
from csparql.spark.expressions import ExpressionCompiler, Scope
from csparql.spark.frames import GRAPH_COLUMN, CompilationError, Solutions, SourceFrames
from csparql.spark.paths import evaluate_path
from csparql.spark.sources import SourceReader, empty_triples
from csparql.spark.static_parts import STATIC_PARTS
from csparql.spark.terms import TERM_STRUCT, constant, make_term, null_term
from csparql.storage.terms import IRI, LITERAL
from csparql.storage.vocabulary import XSD_INTEGER

# Static parts up to this many triples are broadcast rather than shuffled against a window.
BROADCAST_TRIPLES = 2_000_000
# An evaluation whose windows' files hold at most this many triples runs in one partition, with no broadcast
# and no shuffle; its static parts are kept in one partition too.
COMPACT_TRIPLES = 200_000
# In a compact evaluation, a join whose right side has at most this many rows for certain builds a hash table of
# it rather than sorting both sides (a shuffled hash join, which cannot spill: the bound keeps it in memory).
HASH_BUILD_ROWS = 400_000


class SparkCompiler:
    """Compiles the pattern of an optimised ``QueryPlan`` over the sources a ``SourceReader`` provides."""

    def __init__(
        self,
        spark: SparkSession,
        reader: SourceReader,
        plan: alg.QueryPlan,
        now: int | None = None,
        statistics: SourceStatistics = NO_STATISTICS,
        entailment=None,
        compact: bool = False,
        pane: int | None = None,
    ):
        """``statistics`` are those the plan was optimised with (paths read only the sources that can hold
        their links); ``entailment`` (a ``csparql.spark.entailment.Entailment``) makes patterns match the
        entailed graph. ``compact``: the evaluation's data are small enough for one partition
        (``COMPACT_TRIPLES``): every source is read into one, and nothing is broadcast or shuffled. ``pane``
        (µs): pane mode (``csparql.core.panes``): a window is a set per pane, and every pattern over a
        stream binds ``PANE_VAR`` to the end of its triple's pane."""
        self.spark = spark
        self.reader = reader
        self.plan = plan
        self.now = now
        self.statistics = statistics
        self.entailment = entailment
        self.compact = compact
        if pane is not None and entailment is not None:
            raise CompilationError("panes are not computed under entailment")
        self.pane = pane
        self.frames = SourceFrames(spark, reader, compact=compact, share_windows=entailment is None, pane=pane)
        self.names: dict[Variable, str] = {}
        self.counter = itertools.count()
        self._solution_id = "__sid"
        self.uses_timestamps = any(
            isinstance(node, ex.Timestamp)
            for op in walk(plan.pattern)
            for expression in _expressions(op)
            for node in ex.walk(expression)
        )

    # naming

    def column(self, var: Variable) -> str:
        """The DataFrame column of a variable (the same everywhere in the plan)."""
        if var not in self.names:
            safe = re.sub(r"[^A-Za-z0-9_]", "_", str(var))
            self.names[var] = f"v_{safe}_{len(self.names)}"
        return self.names[var]

    def fresh(self, prefix: str = "t") -> str:
        return f"__{prefix}{next(self.counter)}"

    def scope(self, solutions: Solutions, extra: dict[int, str] | None = None, solution_id: str | None = None) -> Scope:
        return Scope(
            columns={var: self.column(var) for var in solutions.vars},
            stamps=dict(solutions.stamps),
            precomputed=dict(extra or {}),
            now=self.now,
            solution_id=solution_id,
            base=self.plan.base,
        )

    # entry point

    def compile(self, op: alg.Operator | None = None) -> Solutions:
        """The solutions of an operator (the plan's whole pattern by default)."""
        op = self.plan.pattern if op is None else op
        method = getattr(self, "_" + type(op).__name__, None)
        if method is None:
            raise CompilationError(f"the Spark compiler has no rule for the operator {type(op).__name__}")
        return method(op)

    # basic graph patterns

    def _pattern(self, triple: alg.TriplePattern, sources: tuple[alg.Source, ...], graph: bool) -> Solutions:
        """The distinct matches of one triple pattern (an RDF graph is a set), with provenance if needed."""
        frame = self.frames.triples(sources)
        if self.entailment is not None:
            frame = self.entailment.match(frame, triple)
        positions = {"s": triple.subject, "p": triple.predicate, "o": triple.object}
        bound: dict[Variable, str] = {}
        condition = F.lit(True)
        for position, term in positions.items():
            if isinstance(term, Variable):
                if term in bound:
                    condition = condition & (F.col(position) == F.col(bound[term]))
                else:
                    bound[term] = position
            else:
                condition = condition & (F.col(position) == constant(term))
        frame = frame.where(condition)
        keys = [F.col(position).alias(self.column(var)) for var, position in bound.items()]
        if graph:
            keys.append(F.col("src").alias(GRAPH_COLUMN))
        streams = [s for s in self.frames.expand(sources) if isinstance(s, alg.StreamWindow)]
        if self.pane is not None and streams:
            if self.uses_timestamps:
                raise CompilationError("panes are not computed for a query that uses timestamp()")
            keys.append(make_term(LITERAL, F.col("pane").cast(StringType()), XSD_INTEGER).alias(self.column(PANE_VAR)))
        stamps: dict[Variable, list[tuple[str, str | None]]] = {}
        # One static graph, or one window read as a set, holds each triple once; inferences may repeat one.
        expanded = self.frames.expand(sources)
        one_set = (len(expanded) == 1 and self.entailment is None
                   and (not streams or self.frames.shares_window(expanded[0])))
        if self.uses_timestamps and streams:
            aggregates = []
            stamp_columns = []
            for stream in streams:
                name = self.fresh("ts")
                aggregates.append(F.max(F.when(F.col("src") == str(stream.graph_name), F.col("ts"))).alias(name))
                stamp_columns.append((name, str(stream.iri)))
            frame = frame.groupBy(*keys).agg(*aggregates)
            for var in bound:
                stamps[var] = list(stamp_columns)
        else:
            frame = frame.select(*keys)
            if not one_set:
                frame = frame.distinct()
        vars_ = tuple(bound) + ((PANE_VAR,) if self.pane is not None and streams else ())
        return Solutions(frame, vars_, stamps, graph)

    def _BGP(self, op: alg.BGP) -> Solutions:
        if op.sources is None:
            raise CompilationError("the plan was not optimised: a BGP has no sources (run csparql.core.optimizer.optimize)")
        graph = self._graph_mode
        if not op.triples:
            return self._unit(graph)
        small = self._small(op.sources)
        versions = self._static_versions(op.sources) if small else None
        if versions is None:
            result = self._patterns(op, graph, broadcast=small and not self.compact)
        else:
            # A static part: the same solutions at every window while its graphs keep their versions.
            names = tuple((var, self.column(var)) for var in _bound_variables(op.triples))
            shape = (op, graph, names, self.compact, _session_key(self.spark))

            def build() -> DataFrame:
                frame = self._patterns(op, graph, broadcast=False).df
                return frame.coalesce(1) if self.compact else frame

            result = Solutions(STATIC_PARTS.get(shape, versions, build), tuple(var for var, _ in names), {}, graph)
        if small and not self.compact:
            # The (join of) small static parts is what meets the window: broadcast it, or adaptive execution
            # may broadcast the window instead (its shuffle compresses well), collecting it in the driver.
            result.df = F.broadcast(result.df)
        return result

    def _patterns(self, op: alg.BGP, graph: bool, broadcast: bool) -> Solutions:
        result: Solutions | None = None
        # each pattern's matches are some of these triples; only a compact evaluation uses the bound
        rows = self._triples_read_bound(op.sources) if self.compact else None
        for triple in op.triples:
            part = self._pattern(triple, op.sources, graph)
            if broadcast:
                part.df = F.broadcast(part.df)
            result = part if result is None else self._inner_join(result, part, right_rows=rows)
        return result

    def _triples_read_bound(self, sources: tuple[alg.Source, ...]) -> int | None:
        """At most how many triples a pattern over ``sources`` reads, when the reader can tell: what the
        windows' files hold plus each static graph's triples. None with entailment (inferences add triples)
        or when a count is unknown."""
        if self.entailment is not None:
            return None
        window_triples = getattr(self.reader, "window_triples", None)
        estimate = getattr(self.reader, "estimated_triples", None)
        expanded = self.frames.expand(sources)
        streams = [s for s in expanded if isinstance(s, alg.StreamWindow)]
        graphs = [s for s in expanded if not isinstance(s, alg.StreamWindow)]
        counts = [window_triples(streams) if window_triples is not None else None] if streams else []
        counts += [estimate(graph) if estimate is not None else None for graph in graphs]
        return None if any(count is None for count in counts) else sum(counts)

    def _static_versions(self, sources: tuple[alg.Source, ...]) -> tuple | None:
        """What identifies the triples of the static graphs a part reads — each table's Delta id and version —
        when the reader knows it and nothing but the stored triples is read (no entailment): the key of a
        cached static part (else None)."""
        identity = getattr(self.reader, "static_identity", None)
        if identity is None or self.entailment is not None:
            return None
        return tuple((source.iri, identity(source)) for source in self.frames.expand(sources))

    _graph_mode = False

    def _small(self, sources: tuple[alg.Source, ...]) -> bool:
        """Whether a part reads only static graphs small enough to broadcast to every executor."""
        if not sources or not all(isinstance(s, alg.StaticGraph) for s in sources):
            return False
        estimate = getattr(self.reader, "estimated_triples", None)
        if estimate is None:
            return False
        total = 0
        for source in self.frames.expand(sources):
            count = estimate(source)
            if count is None:
                return False
            total += count
        return total <= BROADCAST_TRIPLES

    def _unit(self, graph: bool) -> Solutions:
        """One empty solution (or, inside GRAPH ?g, one per named graph)."""
        if graph:
            names = [str(s.graph_name) for s in self.frames.expand(self.plan.dataset.named)]
            frame = self.spark.createDataFrame([(n,) for n in names], f"{GRAPH_COLUMN} string")
            return Solutions(frame, (), {}, True)
        return Solutions(self.spark.range(0, 1, 1, 1).select(), (), {}, False)

    def _PathPattern(self, op: alg.PathPattern) -> Solutions:
        return evaluate_path(op, self.frames, self.statistics, self.entailment, self.column, self._graph_mode)

    # joins

    def _joined(self, left: DataFrame, right: DataFrame, on, how: str, right_rows: int | None = None) -> DataFrame:
        """``left.join(right, on, how)``; in a compact evaluation a join that one partition needs no shuffle for
        (a broadcast would cost a Spark job of its own): a hash join building ``right`` when it has at most
        ``HASH_BUILD_ROWS`` rows for certain (``right_rows``, a bound), else a sort-merge join, whose sorts
        spill."""
        if self.compact:
            strategy = "shuffle_hash" if right_rows is not None and right_rows <= HASH_BUILD_ROWS else "merge"
            # One partition in, one out: a join's output is a collection of its sides' partitionings, which
            # Spark would shuffle again to join it with anything else.
            return left.join(right.hint(strategy), on, how).coalesce(1)
        return left.join(right, on, how)

    def _shared(self, left: Solutions, right: Solutions) -> list[Variable]:
        return [var for var in left.vars if var in right.vars]

    def _inner_join(self, left: Solutions, right: Solutions, left_op=None, right_op=None,
                    right_rows: int | None = None) -> Solutions:
        """The join of two solution sequences; ``right_rows`` a bound on ``right``'s rows when one is known."""
        shared = self._shared(left, right)
        certain_left = certain(left_op) if left_op is not None else set(left.vars)
        certain_right = certain(right_op) if right_op is not None else set(right.vars)
        equi = [var for var in shared if var in certain_left and var in certain_right]
        loose = [var for var in shared if var not in equi]
        keys = [self.column(var) for var in equi] + ([GRAPH_COLUMN] if left.graph and right.graph else [])
        if not loose:
            df = self._joined(left.df, right.df, keys, "inner", right_rows) if keys else left.df.crossJoin(right.df)
        else:
            df = self._compatible_join(left, right, keys, loose, "inner")
        return self._merged(left, right, df)

    def _compatible_join(self, left: Solutions, right: Solutions, keys: list[str], loose: list[Variable], how: str, extra=None) -> DataFrame:
        """A join where some shared variables may be unbound: compatible when equal or either is unbound."""
        renames = {self.column(var): self.fresh("r") for var in loose}
        right_df = right.df
        for old, new in renames.items():
            right_df = right_df.withColumnRenamed(old, new)
        condition = F.lit(True)
        for var in loose:
            a, b = F.col(self.column(var)), F.col(renames[self.column(var)])
            condition = condition & ((a == b) | a.isNull() | b.isNull())
        left_df = left.df
        key_renames = {key: self.fresh("k") for key in keys}
        for old, new in key_renames.items():
            right_df = right_df.withColumnRenamed(old, new)
        for key in keys:
            condition = condition & (F.col(key) == F.col(key_renames[key]))
        if extra is not None:
            condition = condition & extra(renames)
        df = self._joined(left_df, right_df, condition, how)
        for var in loose:
            name = self.column(var)
            df = df.withColumn(name, F.coalesce(F.col(name), F.col(renames[name]))).drop(renames[name])
        for key in keys:
            df = df.drop(key_renames[key])
        return df

    def _merged(self, left: Solutions, right: Solutions, df: DataFrame) -> Solutions:
        stamps = {var: list(cols) for var, cols in left.stamps.items()}
        for var, cols in right.stamps.items():
            stamps.setdefault(var, []).extend(cols)
        vars_ = tuple(dict.fromkeys(left.vars + right.vars))
        return Solutions(df, vars_, stamps, left.graph or right.graph)

    def _Join(self, op: alg.Join) -> Solutions:
        left, right = self.compile(op.left), self.compile(op.right)
        return self._inner_join(left, right, op.left, op.right)

    def _LeftJoin(self, op: alg.LeftJoin) -> Solutions:
        left, right = self.compile(op.left), self.compile(op.right)
        shared = self._shared(left, right)
        certain_left, certain_right = certain(op.left), certain(op.right)
        equi = [var for var in shared if var in certain_left and var in certain_right]
        loose = [var for var in shared if var not in equi]
        keys = [self.column(var) for var in equi] + ([GRAPH_COLUMN] if left.graph and right.graph else [])
        if op.expression is None and not loose:
            df = self._joined(left.df, right.df, keys, "left") if keys else left.df.join(right.df, F.lit(True), "left")
            return self._merged(left, right, df)
        if op.expression is None:
            return self._merged(left, right, self._compatible_join(left, right, keys, loose, "left"))
        return self._optional_with_filter(left, right, keys, loose, op.expression)

    def _optional_with_filter(self, left: Solutions, right: Solutions, keys: list[str], loose: list[Variable],
                              expression: ex.Expr) -> Solutions:
        """LeftJoin(Ω1, Ω2, expr) (SPARQL 1.1 §18.5): every merge of compatible μ1, μ2 for which expr is true,
        and every μ1 with no such μ2. The filter is evaluated on the merged solutions as any FILTER is — its
        sub-expressions computed as columns of their own — rather than inside the join condition, where each
        operator would copy its operands and a nested expression (``?a + ?b + …``) grow exponentially. The
        solutions of Ω1 that kept no merge are found again by value: equal solutions of Ω1 keep the same
        merges, so the multiset comes out right."""
        left_columns = left.df.columns
        originals = {column: self.fresh("l") for column in left_columns}
        tagged = left.df.select(*[F.col(c) for c in left_columns], *[F.col(c).alias(originals[c]) for c in left_columns])
        tagged_left = dataclasses.replace(left, df=tagged)
        if loose:
            joined = self._compatible_join(tagged_left, right, keys, loose, "inner")
        else:
            joined = self._joined(tagged, right.df, keys, "inner") if keys else tagged.crossJoin(right.df)
        merged = self._merged(tagged_left, right, joined)
        kept = self._filtered(merged, expression)
        matched = kept.df.select(*[F.col(originals[c]) for c in left_columns])
        same = reduce(lambda a, b: a & b, [F.col(c).eqNullSafe(F.col(originals[c])) for c in left_columns])
        unmatched = self._joined(left.df, matched, same, "left_anti")
        df = kept.df.drop(*originals.values()).unionByName(unmatched, allowMissingColumns=True)
        return dataclasses.replace(merged, df=df)

    def _Union(self, op: alg.Union) -> Solutions:
        left, right = self.compile(op.left), self.compile(op.right)
        df = left.df.unionByName(right.df, allowMissingColumns=True)
        if self.compact:
            df = df.coalesce(1)  # a union has a partition per side's
        stamps = {var: list(cols) for var, cols in left.stamps.items()}
        for var, cols in right.stamps.items():
            stamps.setdefault(var, []).extend(cols)
        return Solutions(df, tuple(dict.fromkeys(left.vars + right.vars)), stamps, left.graph or right.graph)

    def _Minus(self, op: alg.Minus) -> Solutions:
        left, right = self.compile(op.left), self.compile(op.right)
        shared = self._shared(left, right)
        if not shared:
            return left
        certain_left, certain_right = certain(op.left), certain(op.right)
        keys = [GRAPH_COLUMN] if left.graph and right.graph else []
        if all(var in certain_left and var in certain_right for var in shared):
            right_df = right.df.select(*[self.column(var) for var in shared], *keys).distinct()
            df = self._joined(left.df, right_df, [self.column(var) for var in shared] + keys, "left_anti")
            return dataclasses.replace(left, df=df)
        renames = {self.column(var): self.fresh("m") for var in shared}
        right_df = right.df.select(*[F.col(self.column(var)).alias(renames[self.column(var)]) for var in shared])
        compatible = F.lit(True)
        overlap = F.lit(False)
        for var in shared:
            a, b = F.col(self.column(var)), F.col(renames[self.column(var)])
            compatible = compatible & ((a == b) | a.isNull() | b.isNull())
            overlap = overlap | (a.isNotNull() & b.isNotNull())
        df = self._joined(left.df, right_df, compatible & overlap, "left_anti")
        return dataclasses.replace(left, df=df)

    # filters and expressions

    def _prepare(self, solutions: Solutions, expressions: list[ex.Expr]) -> tuple[Solutions, dict[int, str]]:
        """Compute EXISTS flags and f:timestamp lookups an expression needs, as columns."""
        extra: dict[int, str] = {}
        for expression in expressions:
            for node in ex.walk(expression):
                if isinstance(node, ex.Exists) and id(node) not in extra:
                    solutions, extra[id(node)] = self._exists(solutions, node)
                elif isinstance(node, ex.TripleTimestamp) and id(node) not in extra:
                    solutions, extra[id(node)] = self._triple_timestamp(solutions, node)
        return solutions, extra

    def _Filter(self, op: alg.Filter) -> Solutions:
        return self._filtered(self.compile(op.input), op.expression)

    def _filtered(self, solutions: Solutions, expression: ex.Expr) -> Solutions:
        """The solutions for which the expression's effective boolean value is true."""
        solutions, extra = self._prepare(solutions, [expression])
        compiler = ExpressionCompiler(self.scope(solutions, extra))
        condition = compiler.condition(expression)
        df = compiler.bind(solutions.df).where(condition).drop(*compiler.let_names, *extra.values())
        return dataclasses.replace(solutions, df=df)

    def _Extend(self, op: alg.Extend) -> Solutions:
        solutions = self.compile(op.input)
        solutions, extra = self._prepare(solutions, [op.expression])
        solution_id = None
        if any(isinstance(n, ex.BuiltinCall) and n.name == "BNODE" and n.args for n in ex.walk(op.expression)):
            # BNODE(s) is the same blank node for the same s within one solution: number the solutions once,
            # and every later BIND or SELECT expression over them sees the same numbers
            solution_id = self._solution_id
            if solution_id not in solutions.df.columns:
                solutions = dataclasses.replace(solutions, df=solutions.df.withColumn(solution_id, F.monotonically_increasing_id()))
        compiler = ExpressionCompiler(self.scope(solutions, extra, solution_id))
        term = compiler.term(op.expression)
        df = compiler.bind(solutions.df).withColumn(self.column(op.var), term).drop(*compiler.let_names, *extra.values())
        return dataclasses.replace(solutions, df=df, vars=tuple(dict.fromkeys(solutions.vars + (op.var,))))

    def _exists(self, solutions: Solutions, node: ex.Exists) -> tuple[Solutions, str]:
        """A boolean column: whether the EXISTS pattern has a solution compatible with each row."""
        row_id = self.fresh("rid")
        flag = self.fresh("ex")
        base = dataclasses.replace(solutions, df=solutions.df.withColumn(row_id, F.monotonically_increasing_id()).cache())
        pattern = node.pattern
        conditions: list[ex.Expr] = []
        while isinstance(pattern, alg.Filter):
            conditions.append(pattern.expression)
            pattern = pattern.input
        inner = self.compile(pattern)
        joined = self._inner_join(base, inner, None, pattern)
        if conditions:
            joined, extra = self._prepare(joined, conditions)
            compiler = ExpressionCompiler(self.scope(joined, extra))
            condition = reduce(lambda a, b: a & b, (compiler.condition(c) for c in conditions))
            joined = dataclasses.replace(joined, df=compiler.bind(joined.df).where(condition))
        matches = joined.df.select(row_id).distinct().withColumn(flag, F.lit(True))
        df = self._joined(base.df, matches, row_id, "left").withColumn(flag, F.coalesce(F.col(flag), F.lit(False)))
        if node.negated:
            df = df.withColumn(flag, ~F.col(flag))
        return dataclasses.replace(solutions, df=df.drop(row_id)), flag

    def _triple_timestamp(self, solutions: Solutions, node: ex.TripleTimestamp) -> tuple[Solutions, str]:
        """A timestamp column: the latest τ of the triple (s, p, o) in the query's stream windows."""
        name = self.fresh("tts")
        windows = self.frames.triples(tuple(self.plan.streams))
        lookup = windows.groupBy("s", "p", "o").agg(F.max("ts").alias(name))
        scope = self.scope(solutions)
        compiler = ExpressionCompiler(scope)
        keys = {"s": compiler.term(node.subject), "p": compiler.term(node.predicate), "o": compiler.term(node.object)}
        renamed = {position: self.fresh("tk") for position in keys}
        df = compiler.bind(solutions.df)
        df = df.withColumns({renamed[position]: column for position, column in keys.items()}).drop(*compiler.let_names)
        lookup = lookup.select(*[F.col(p).alias(renamed[p]) for p in keys], name)
        df = self._joined(df, lookup, list(renamed.values()), "left")
        for column in renamed.values():
            df = df.drop(column)
        return dataclasses.replace(solutions, df=df), name

    # VALUES

    def _PaneRows(self, op: alg.PaneRows) -> Solutions:
        """The stored rows of the evaluation's panes (the reader's ``pane_rows``: column ``c<i>`` for the i-th
        variable)."""
        rows = getattr(self.reader, "pane_rows", None)
        if rows is None:
            raise CompilationError("this evaluation reads no stored panes")
        df = rows(op.vars)
        if self.compact:
            df = df.coalesce(1)
        return Solutions(df.select(*[F.col(f"c{i}").alias(self.column(var)) for i, var in enumerate(op.vars)]),
                         tuple(op.vars))

    def _Table(self, op: alg.Table) -> Solutions:
        from csparql.storage.terms import term_dict

        columns = [self.column(var) for var in op.vars]
        schema = ", ".join(f"`{c}` {TERM_STRUCT.simpleString()}" for c in columns) or None
        if not op.vars:
            df = self.spark.range(len(op.rows)).select()
        else:
            rows = [tuple(None if t is None else term_dict(t) for t in row) for row in op.rows]
            df = self.spark.createDataFrame(rows, schema)
        if self.compact:
            df = df.coalesce(1)
        return Solutions(df, op.vars, {}, False)

    # aggregation

    def _Group(self, op: alg.Group) -> Solutions:
        solutions = self.compile(op.input)
        solutions, extra = self._prepare(solutions, [k.expression for k in op.keys])
        compiler = ExpressionCompiler(self.scope(solutions, extra))
        key_columns = []
        key_vars = []
        key_terms = {}
        for key in op.keys:
            name = self.column(key.var) if key.var is not None else self.fresh("g")
            key_terms[name] = compiler.term(key.expression)
            key_columns.append(name)
            if key.var is not None:
                key_vars.append(key.var)
        if solutions.graph:
            key_columns.append(GRAPH_COLUMN)
        partials, finals = [], []
        for var, call in op.aggregates:
            p, final = aggregate_columns(call, compiler, self, solutions)
            partials.extend(p)
            finals.append(final.alias(self.column(var)))
        df = compiler.bind(solutions.df)
        if key_terms:
            df = df.withColumns(key_terms)
        grouped = df.groupBy(*key_columns).agg(*partials) if partials else df.groupBy(*key_columns).agg(F.count(F.lit(1)).alias(self.fresh("n")))
        result = grouped.select(*[F.col(c) for c in key_columns], *finals)
        vars_ = tuple(key_vars) + tuple(var for var, _ in op.aggregates)
        return Solutions(result, vars_, {}, solutions.graph)

    def _StreamAggregate(self, op: alg.StreamAggregate) -> Solutions:
        solutions = self.compile(op.input)
        compiler = ExpressionCompiler(self.scope(solutions))
        aggregates = {}
        for clause in op.clauses:
            partition = [F.col(self.column(g)) for g in clause.groups]
            if solutions.graph:
                partition.append(F.col(GRAPH_COLUMN))
            window = Window.partitionBy(*partition)
            aggregates[self.column(clause.var)] = window_aggregate(clause, compiler, window)
        df = compiler.bind(solutions.df).withColumns(aggregates).drop(*compiler.let_names)
        vars_ = tuple(dict.fromkeys(solutions.vars + tuple(c.var for c in op.clauses)))
        result = dataclasses.replace(solutions, df=df, vars=vars_)
        for clause in op.clauses:
            if clause.filter is not None:
                result, extra = self._prepare(result, [clause.filter])
                compiler = ExpressionCompiler(self.scope(result, extra))
                condition = compiler.condition(clause.filter)
                df = compiler.bind(result.df).where(condition).drop(*compiler.let_names, *extra.values())
                result = dataclasses.replace(result, df=df)
        return result

    # solution modifiers

    def _OrderBy(self, op: alg.OrderBy) -> Solutions:
        solutions = self.compile(op.input)
        compiler = ExpressionCompiler(self.scope(solutions))
        ordering = []
        keys = {}
        for expression, descending in op.conditions:
            name = self.fresh("ord")
            keys[name] = v.order_key(compiler.shared(compiler.value(expression)))
            ordering.append((name, descending))
        df = compiler.bind(solutions.df).withColumns(keys).drop(*compiler.let_names)
        return dataclasses.replace(solutions, df=df, ordering=ordering + solutions.ordering)

    def _Project(self, op: alg.Project) -> Solutions:
        solutions = self.compile(op.input)
        stamps = {var: cols for var, cols in solutions.stamps.items() if var in op.vars}
        stamp_columns = [name for cols in stamps.values() for name, _ in cols]
        extra = ([GRAPH_COLUMN] if solutions.graph else []) + [name for name, _ in solutions.ordering]
        df = solutions.df
        for var in op.vars:
            if var not in solutions.vars:
                df = df.withColumn(self.column(var), null_term())
        columns = [self.column(var) for var in op.vars] + list(dict.fromkeys(stamp_columns)) + extra
        return Solutions(df.select(*[F.col(f"`{c}`") for c in columns]), op.vars, stamps, solutions.graph, solutions.ordering)

    def _Distinct(self, op: alg.Distinct | alg.Reduced) -> Solutions:
        solutions = self.compile(op.input)
        visible = [self.column(var) for var in solutions.vars] + ([GRAPH_COLUMN] if solutions.graph else [])
        if not solutions.ordering:
            df = solutions.df.select(*visible).distinct()
            return Solutions(df, solutions.vars, {}, solutions.graph)
        # Keep each distinct solution at the place of its first occurrence in the order.
        order_names = [name for name, _ in solutions.ordering]
        first = F.min(F.struct(*[F.col(n) for n in order_names])).alias("__first")
        df = solutions.df.groupBy(*visible).agg(first)
        df = df.select(*visible, *[F.col("__first").getField(n).alias(n) for n in order_names])
        return Solutions(df, solutions.vars, {}, solutions.graph, solutions.ordering)

    _Reduced = _Distinct

    def _Slice(self, op: alg.Slice) -> Solutions:
        solutions = self.compile(op.input)
        df = self.ordered(solutions)
        if op.start:
            df = df.offset(op.start)
        if op.length is not None:
            df = df.limit(op.length)
        return dataclasses.replace(solutions, df=df)

    def ordered(self, solutions: Solutions) -> DataFrame:
        """The DataFrame sorted by the solutions' ORDER BY, if any."""
        if not solutions.ordering:
            return solutions.df
        return solutions.df.orderBy(*[F.col(n).desc() if d else F.col(n).asc() for n, d in solutions.ordering])

    # GRAPH ?g

    def _Graph(self, op: alg.Graph) -> Solutions:
        if not isinstance(op.name, Variable):
            raise CompilationError("GRAPH <iri> should have been resolved by the optimizer (assign_sources)")
        previous = self._graph_mode
        self._graph_mode = True
        try:
            inner = self.compile(op.input)
        finally:
            self._graph_mode = previous
        if not inner.graph:
            names = self._unit(True)
            inner = Solutions(inner.df.crossJoin(names.df), inner.vars, inner.stamps, True, inner.ordering)
        var_column = self.column(op.name)
        graph_term = make_term(IRI, F.col(GRAPH_COLUMN))
        df = inner.df
        if op.name in inner.vars:
            df = df.where(F.col(var_column) == graph_term)
        else:
            df = df.withColumn(var_column, graph_term)
        if not previous:
            df = df.drop(GRAPH_COLUMN)
        return Solutions(df, tuple(dict.fromkeys((op.name,) + inner.vars)), inner.stamps, previous, inner.ordering)


def _expressions(op: alg.Operator):
    from csparql.core.algebra.walk import expressions_of

    return expressions_of(op)


# --- result forms -----------------------------------------------------------------------------------------------


def construct_triples(compiler: SparkCompiler, solutions: Solutions, template: tuple[alg.TriplePattern, ...]) -> DataFrame:
    """The graph a CONSTRUCT template builds from the solutions (§16.2): one instance of the template per
    solution, blank nodes fresh per solution, triples with an unbound or ill-placed term left out."""
    from rdflib import BNode

    if not template:
        return empty_triples(compiler.spark).select("s", "p", "o")
    row_id = compiler.fresh("row")
    df = solutions.df.withColumn(row_id, F.monotonically_increasing_id())

    def position(term) -> Column:
        if isinstance(term, Variable):
            return F.col(compiler.column(term)) if term in solutions.vars else null_term()
        if isinstance(term, BNode):
            return make_term(BLANK_KIND, F.concat(F.lit(f"{term}_"), F.col(row_id).cast(StringType())))
        return constant(term)

    instances = F.array(
        *[F.struct(position(t.subject).alias("s"), position(t.predicate).alias("p"), position(t.object).alias("o")) for t in template]
    )
    triples = df.select(F.explode(instances).alias("t")).select("t.s", "t.p", "t.o")
    valid = (
        F.col("s").isNotNull()
        & F.col("p").isNotNull()
        & F.col("o").isNotNull()
        & (F.col("s").getField("kind") != LITERAL)
        & (F.col("p").getField("kind") == IRI)
    )
    return triples.where(valid).distinct()


def describe_triples(compiler: SparkCompiler, solutions: Solutions, terms: tuple) -> DataFrame:
    """The concise bounded descriptions of the resources (IRIs given, and the values of the variables given):
    every triple whose subject is one of them, followed through blank-node objects."""
    frames = []
    for term in terms:
        if isinstance(term, Variable):
            if term in solutions.vars:
                frames.append(solutions.df.select(F.col(compiler.column(term)).alias("r")))
        else:
            frames.append(compiler.spark.range(1).select(constant(term).alias("r")))
    if not frames:
        return empty_triples(compiler.spark).select("s", "p", "o")
    resources = reduce(lambda a, b: a.unionByName(b), frames).where(F.col("r").isNotNull()).distinct()
    graph = compiler.frames.triples(compiler.plan.dataset.default).select("s", "p", "o").distinct().cache()
    found = graph.join(resources, graph["s"] == resources["r"], "left_semi").cache()
    seen = resources.cache()
    frontier = found.where(F.col("o").getField("kind") == BLANK_KIND).select(F.col("o").alias("r")).distinct()
    frontier = frontier.join(seen, "r", "left_anti").cache()
    while frontier.count() > 0:
        seen = seen.unionByName(frontier).distinct().cache()
        more = graph.join(frontier, graph["s"] == frontier["r"], "left_semi").cache()
        found = found.unionByName(more).distinct().cache()
        frontier = more.where(F.col("o").getField("kind") == BLANK_KIND).select(F.col("o").alias("r")).distinct()
        frontier = frontier.join(seen, "r", "left_anti").cache()
    return found


BLANK_KIND = 2


def _bound_variables(triples) -> list[Variable]:
    """The variables of triple patterns in the order the compiler first meets them (subject, predicate,
    object of each pattern in turn)."""
    found: dict[Variable, None] = {}
    for triple in triples:
        for term in (triple.subject, triple.predicate, triple.object):
            if isinstance(term, Variable):
                found.setdefault(term)
    return list(found)


def _session_key(spark: SparkSession) -> Hashable:
    """What tells one SparkSession from another (a cached DataFrame belongs to the session that built it)."""
    return getattr(spark, "session_id", None) or id(spark)
