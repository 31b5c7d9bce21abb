"""Evaluating one plan over one window: compile it for Spark, run it, and hand back its results.

``compile_plan`` is the single place where a plan meets Spark, and ``CompiledEvaluation.result`` the single
place where results leave it: the ``csparql run`` command, replays, the Airflow task, the demo and the
conformance harness all come through both, so what the tests check is what users get.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType
from rdflib import Variable

from csparql.core.algebra import operators as alg
from csparql.core.optimizer import NO_STATISTICS, SourceStatistics, optimize
from csparql.spark.compiler import COMPACT_TRIPLES, SparkCompiler, construct_triples, describe_triples
from csparql.spark.entailment import Entailment
from csparql.spark.frames import SourceFrames
from csparql.runtime.session import compact_execution
from csparql.spark.sources import SourceReader
from csparql.spark.terms import NULLABLE_TERM_STRUCT
from csparql.storage.results import QueryResult, terms_table


@dataclass
class CompiledEvaluation:
    """A plan compiled over its sources: the DataFrame of its results, and how to read it."""

    plan: alg.QueryPlan
    form: str
    df: DataFrame  # SELECT: one column per projected variable (term structs); graphs: s, p, o
    columns: dict[Variable, str]
    compact: bool = False  # compiled for one partition (``is_compact``)
    ordered: bool = False  # its rows come in the query's ORDER BY

    def result(self) -> QueryResult:
        """Run the plan (one Spark action) and collect its results to the driver through Arrow.

        This is the only way results leave Spark: ``csparql run``, replays, the Airflow task, the demo and the
        conformance harness all come through it, so what the harness checks is what gets written. The terms
        stay Arrow columns (``QueryResult.terms``), which the result tables are written from. A compact
        evaluation runs with ``csparql.runtime.session.COMPACT_SETTINGS`` (one Spark job)."""
        if not self.compact:
            return self._collect()
        with compact_execution(self.df.sparkSession):
            return self._collect()

    def _collect(self) -> QueryResult:
        if self.form == "ask":
            return QueryResult("ask", boolean=self.df.limit(1).count() > 0)
        if self.form == "select":
            vars_ = self.plan.form.vars
            names = [self.columns[var] for var in vars_]
            if not names:  # solutions without variables: Arrow has no column to count their rows by
                return QueryResult("select", vars=vars_, terms=terms_table([], [], self.df.count()))
            return QueryResult("select", vars=vars_, terms=_to_arrow(self.df, names))
        return QueryResult(self.form, terms=_to_arrow(self.df, ["s", "p", "o"]))


def combinable(compiled: CompiledEvaluation) -> bool:
    """Whether the evaluation's results can come out of one Spark job with other evaluations'
    (``results_together``): a SELECT, CONSTRUCT or DESCRIBE whose rows need no order."""
    return compiled.form in ("select", "construct", "describe") and not compiled.ordered


def results_together(evaluations: list[CompiledEvaluation]) -> list[QueryResult]:
    """The results of several compiled evaluations of one Spark session, each as its own ``result()`` gives
    it, from one Spark action: each evaluation's rows packed as ``(its position, the array of its term
    columns)``, the packed plans unioned and collected at once through Arrow, and unpacked on the driver. The
    packing keeps every term, unbound ones as nulls, and every row, also of solutions without variables. All
    must be ``combinable`` and of one session; they run with ``COMPACT_SETTINGS`` when all are compact."""
    if not evaluations:
        return []
    if not all(combinable(e) for e in evaluations):
        raise ValueError("only SELECT, CONSTRUCT and DESCRIBE results without ORDER BY are collected together")
    packed = None
    for position, evaluation in enumerate(evaluations):
        terms = F.array(*[F.col(name).cast(NULLABLE_TERM_STRUCT) for name in _term_columns(evaluation)])
        rows = evaluation.df.select(F.lit(position).alias(_POSITION), terms.cast(_PACKED_TERMS).alias(_TERMS))
        packed = rows if packed is None else packed.unionAll(rows)
    if all(e.compact for e in evaluations):
        with compact_execution(packed.sparkSession):
            table = arrow_table(packed)
    else:
        table = arrow_table(packed)
    return [_unpacked(evaluation, table.filter(pc.equal(table[_POSITION], position)))
            for position, evaluation in enumerate(evaluations)]


_POSITION, _TERMS = "csparql_position", "csparql_terms"
_PACKED_TERMS = ArrayType(NULLABLE_TERM_STRUCT, containsNull=True)


def _term_columns(evaluation: CompiledEvaluation) -> list[str]:
    if evaluation.form == "select":
        return [evaluation.columns[var] for var in evaluation.plan.form.vars]
    return ["s", "p", "o"]


def _unpacked(evaluation: CompiledEvaluation, rows: pa.Table) -> QueryResult:
    names = _term_columns(evaluation)
    if evaluation.form == "select" and not names:
        return QueryResult("select", vars=evaluation.plan.form.vars, terms=terms_table([], [], rows.num_rows))
    terms = pa.table({name: pc.list_element(rows[_TERMS], index) for index, name in enumerate(names)})
    if evaluation.form == "select":
        return QueryResult("select", vars=evaluation.plan.form.vars, terms=terms)
    return QueryResult(evaluation.form, terms=terms)


def _to_arrow(df: DataFrame, term_columns: list[str]) -> pa.Table:
    """The DataFrame's term columns as an Arrow table.

    A term column is typed as the stored struct, whose ``kind`` and ``value`` are never null inside a term;
    but a null term (unbound, or an expression's error) is a struct whose fields are null too, which Arrow
    refuses to view as non-nullable fields. The columns are read as structs whose fields may be null."""
    return arrow_table(df.select(*[F.col(name).cast(NULLABLE_TERM_STRUCT).alias(name) for name in term_columns]))


def arrow_table(df: DataFrame) -> pa.Table:
    """``df.toArrow()``, in one round trip over Spark Connect: its ``toArrow`` first asks the server for the
    plan's schema (an analysis of the whole plan) although the execution's response carries it too."""
    execute = getattr(df, "_to_table", None)  # a Spark Connect DataFrame's (what its toArrow runs)
    if execute is None:
        return df.toArrow()
    table, schema = execute()
    return table.cast(to_arrow_schema(schema if schema is not None else df.schema,
                                      error_on_duplicated_field_names_in_struct=True, timezone="UTC"))


def compile_plan(
    spark: SparkSession,
    plan: alg.QueryPlan,
    reader: SourceReader,
    at: int | None = None,
    statistics: SourceStatistics = NO_STATISTICS,
    optimized: bool = False,
    previous: tuple[SourceReader, int] | None = None,
    compact_triples: int = COMPACT_TRIPLES,
    pane: int | None = None,
) -> CompiledEvaluation:
    """The Spark plan of a query for one evaluation (``at`` is the window end t_f, which NOW() returns).

    Under entailment the optimizer sees statistics in which properties count their sub-properties' triples,
    and the compiler matches patterns against the entailed graph (``csparql.spark.entailment``).

    A query with ``ISTREAM`` or ``DSTREAM`` needs ``previous``: the reader of the previous evaluation's
    windows and its instant. Both evaluations are compiled into one plan and the result is their multiset
    difference, so a window's result never depends on what was evaluated before it, or in which order.

    An evaluation whose windows' files hold at most ``compact_triples`` triples is compiled compact (one
    partition, nothing broadcast or shuffled: ``is_compact``); the results are the same either way. ``pane``
    compiles a partial plan of panes (``csparql.core.panes.pane_partial_plan``) in pane mode."""
    if plan.stream_operator != alg.RSTREAM:
        if previous is None:
            raise ValueError(f"{plan.stream_operator} needs the previous evaluation's windows")
        current = compile_plan(spark, dataclasses.replace(plan, stream_operator=alg.RSTREAM), reader, at, statistics,
                               optimized, compact_triples=compact_triples)
        before = compile_plan(spark, dataclasses.replace(plan, stream_operator=alg.RSTREAM), previous[0], previous[1],
                              statistics, optimized, compact_triples=compact_triples)
        return window_to_stream(current, before, plan.stream_operator)
    entailment = None
    if plan.entailment:
        entailment = Entailment(SourceFrames(spark, reader), statistics, plan.dataset.default, plan.entailment)
        statistics = entailment.statistics(statistics)
    if not optimized:
        plan = optimize(plan, statistics)
    compact = is_compact(reader, plan, compact_triples)
    compiler = SparkCompiler(spark, reader, plan, now=at, statistics=statistics, entailment=entailment,
                             compact=compact, pane=pane)
    solutions = compiler.compile()
    form = plan.form
    if isinstance(form, alg.SelectResult):
        df = compiler.ordered(solutions)
        columns = {var: compiler.column(var) for var in form.vars}
        df = df.select(*[F.col(columns[var]) for var in form.vars])
        return CompiledEvaluation(plan, "select", df, columns, compact, bool(solutions.ordering))
    if isinstance(form, alg.AskResult):
        return CompiledEvaluation(plan, "ask", solutions.df, {}, compact)
    if isinstance(form, alg.ConstructResult):
        return CompiledEvaluation(plan, "construct", construct_triples(compiler, solutions, form.template), {}, compact)
    return CompiledEvaluation(plan, "describe", describe_triples(compiler, solutions, form.terms), {}, compact)


def is_compact(reader: SourceReader, plan: alg.QueryPlan, limit: int = COMPACT_TRIPLES) -> bool:
    """Whether the evaluation runs in one partition: the reader knows how many triples its windows' files
    hold, and they are at most ``limit`` (a reader that cannot tell runs distributed as usual)."""
    count = getattr(reader, "window_triples", None)
    if count is None:
        return False
    triples = count(list(plan.dataset.streams))
    return triples is not None and triples <= limit


def window_to_stream(current: CompiledEvaluation, previous: CompiledEvaluation, operator: str) -> CompiledEvaluation:
    """ISTREAM: the solutions of ``current`` that ``previous`` does not have; DSTREAM: those of ``previous``
    that ``current`` does not have. Multiset differences (a solution twice now and once before is emitted once
    by ISTREAM), over the projected variables; the result has no order."""
    if current.form != "select":
        raise ValueError(f"{operator} applies to SELECT queries, not to {current.form.upper()}")
    vars_ = current.plan.form.vars
    names = [current.columns[var] for var in vars_]
    now = current.df.select(*[F.col(current.columns[var]).alias(name) for var, name in zip(vars_, names)])
    before = previous.df.select(*[F.col(previous.columns[var]).alias(name) for var, name in zip(vars_, names)])
    df = now.exceptAll(before) if operator == alg.ISTREAM else before.exceptAll(now)
    return CompiledEvaluation(dataclasses.replace(current.plan, stream_operator=operator), "select", df, current.columns,
                              current.compact and previous.compact)


def evaluate_plan(
    spark: SparkSession,
    plan: alg.QueryPlan,
    reader: SourceReader,
    at: int | None = None,
    statistics: SourceStatistics = NO_STATISTICS,
    previous: tuple[SourceReader, int] | None = None,
) -> QueryResult:
    """Evaluate a plan once and collect its results (``previous`` as for ``compile_plan``)."""
    return compile_plan(spark, plan, reader, at, statistics, previous=previous).result()
