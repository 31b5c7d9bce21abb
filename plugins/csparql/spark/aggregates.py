"""SPARQL's aggregates (§18.5) and C-SPARQL's AGGREGATE clause as Spark columns, for the compiler's GROUP BY and
stream aggregation: the partial columns an aggregate needs and the column of its final value, with SPARQL's
rules for errors, DISTINCT, numeric promotion and SAMPLE."""

from __future__ import annotations

from typing import Protocol

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import StringType
from rdflib import Variable

from csparql.core.algebra import operators as alg
from csparql.core.language import expressions as ex
from csparql.spark import values as v
from csparql.spark.expressions import ExpressionCompiler
from csparql.spark.frames import CompilationError, Solutions
from csparql.spark.terms import make_term, null_term
from csparql.storage.terms import LITERAL
from csparql.storage.vocabulary import XSD_INTEGER, XSD_STRING


class ColumnNames(Protocol):
    """What aggregates need of the compiler: a variable's column and fresh column names."""

    def column(self, var: Variable) -> str: ...

    def fresh(self, prefix: str = "t") -> str: ...


def _numeric_parts(value: v.Value) -> tuple[Column, Column, Column, Column]:
    """(rank, dec, dbl, is-bound-but-not-a-number) of a value, for SUM and AVG."""
    term = value.term()
    number = value.numeric()
    return number.rank, number.dec, number.dbl, term.isNotNull() & number.rank.isNull()


def aggregate_columns(call: ex.AggregateCall, expressions: ExpressionCompiler, compiler: ColumnNames,
                      solutions: Solutions) -> tuple[list[Column], Column]:
    """The partial aggregates of a SPARQL 1.1 set function (§18.5.1) and the column giving its term (the
    caller binds ``expressions``' sub-expression columns before aggregating)."""
    name = call.name
    if name == "COUNT":
        if call.argument is None:
            if call.distinct:
                row = F.struct(*[F.col(compiler.column(var)) for var in solutions.vars]) if solutions.vars else F.lit(1)
                partial = F.count_distinct(row)
            else:
                partial = F.count(F.lit(1))
        else:
            term = expressions.term(call.argument)
            partial = F.count_distinct(term) if call.distinct else F.count(term)
        alias = compiler.fresh("a")
        return [partial.alias(alias)], make_term(LITERAL, F.col(alias).cast(StringType()), XSD_INTEGER)
    value = expressions.shared(expressions.value(call.argument))
    term = value.term()
    # §18.5.1: an unbound variable leaves the multiset of values, but an error in evaluating an expression
    # makes the aggregate an error (so SUM(?x * 2) with a string ?x is unbound, SUM(?x) of an OPTIONAL is not)
    failed = None if isinstance(call.argument, Variable) else term.isNull()
    if name in ("SUM", "AVG"):
        names = [compiler.fresh("a") for _ in range(5)]
        if call.distinct:
            # DISTINCT keeps distinct terms ("1" and "1.0"^^xsd:decimal both count): sum the set of terms
            collected = compiler.fresh("a")
            terms = F.collect_set(term)
            partials = [terms.alias(collected)]
            bad_any = F.max(((term.isNotNull() & value.numeric().rank.isNull()) | (failed if failed is not None else F.lit(False))).cast("int"))
            partials.append(bad_any.alias(names[3]))
            items = F.col(collected)
            ranks = F.transform(items, lambda t: v.TermValue(t).numeric().rank)
            r = F.array_max(ranks)
            sdec = F.aggregate(F.transform(items, lambda t: F.coalesce(v.TermValue(t).numeric().dec, F.lit(0).cast(v.DECIMAL))), F.lit(0).cast(v.DECIMAL), lambda a, b: (a + b).cast(v.DECIMAL))
            sdbl = F.aggregate(F.transform(items, lambda t: F.coalesce(v.TermValue(t).numeric().dbl, F.lit(0.0))), F.lit(0.0), lambda a, b: a + b)
            count = F.size(items)
            anybad = F.col(names[3])
        else:
            rank, dec, dbl, bad = _numeric_parts(value)
            if failed is not None:
                bad = bad | failed
            partials = [F.max(rank), F.sum(dec), F.sum(dbl), F.max(bad.cast("int")), F.count(term)]
            partials = [p.alias(n) for p, n in zip(partials, names)]
            r, sdec, sdbl, anybad, count = (F.col(n) for n in names)
        if name == "SUM":
            number = v.Numeric(F.coalesce(r, F.lit(1)), F.coalesce(sdec, F.lit(0).cast(v.DECIMAL)), F.coalesce(sdbl, F.lit(0.0)))
        else:
            avg_rank = F.when(count == 0, F.lit(1)).otherwise(F.greatest(r, F.lit(2)))
            number = v.Numeric(
                avg_rank,
                F.when(count == 0, F.lit(0).cast(v.DECIMAL)).otherwise((sdec / count).cast(v.DECIMAL)),
                F.when(count == 0, F.lit(0.0)).otherwise(sdbl / count),
            )
        result = v.NumericValue(number).term()
        return partials, F.when(F.coalesce(anybad, F.lit(0)) == 0, result)
    error_partials: list[Column] = []
    ok = None
    if failed is not None:
        error_alias = compiler.fresh("a")
        error_partials = [F.max(failed.cast("int")).alias(error_alias)]
        ok = F.coalesce(F.col(error_alias), F.lit(0)) == 0
    if name in ("MIN", "MAX"):
        alias = compiler.fresh("a")
        key = v.order_key(v.TermValue(term))
        picked = F.min_by(term, key) if name == "MIN" else F.max_by(term, key)
        return [picked.alias(alias), *error_partials], F.col(alias) if ok is None else F.when(ok, F.col(alias))
    if name == "SAMPLE":
        alias = compiler.fresh("a")
        return [F.first(term, ignorenulls=True).alias(alias)], F.col(alias)
    if name == "GROUP_CONCAT":
        alias = compiler.fresh("a")
        lexical = F.when(term.getField("kind") == LITERAL, term.getField("value"))
        collected = F.collect_set(lexical) if call.distinct else F.collect_list(lexical)
        separator = call.separator if call.separator is not None else " "
        joined = make_term(LITERAL, F.array_join(F.col(alias), separator), XSD_STRING)
        return [collected.alias(alias), *error_partials], joined if ok is None else F.when(ok, joined)
    raise CompilationError(f"unknown aggregate {name}")


def window_aggregate(clause: alg.AggregateSpec, expressions: ExpressionCompiler, window) -> Column:
    """One C-SPARQL AGGREGATE clause over its group, without reducing (the C-SPARQL article, §4.1); the
    caller binds ``expressions``' columns first."""
    scope = expressions.scope
    if clause.function == "COUNT":
        if clause.argument is None:
            count = F.count(F.lit(1)).over(window)
        else:
            column = F.col(scope.columns[clause.argument]) if clause.argument in scope.columns else null_term()
            count = F.size(F.collect_set(column).over(window)) if clause.distinct else F.count(column).over(window)
        return make_term(LITERAL, count.cast(StringType()), XSD_INTEGER)
    value = expressions.value(clause.argument)
    term = value.term()
    if clause.function in ("SUM", "AVG"):
        rank, dec, dbl, bad = _numeric_parts(value)
        r = F.max(rank).over(window)
        sdec = F.sum(dec).over(window)
        sdbl = F.sum(dbl).over(window)
        anybad = F.max(bad.cast("int")).over(window)
        count = F.count(term).over(window)
        if clause.function == "SUM":
            number = v.Numeric(F.coalesce(r, F.lit(1)), F.coalesce(sdec, F.lit(0).cast(v.DECIMAL)), F.coalesce(sdbl, F.lit(0.0)))
        else:
            number = v.Numeric(
                F.when(count == 0, F.lit(1)).otherwise(F.greatest(r, F.lit(2))),
                F.when(count == 0, F.lit(0).cast(v.DECIMAL)).otherwise((sdec / count).cast(v.DECIMAL)),
                F.when(count == 0, F.lit(0.0)).otherwise(sdbl / count),
            )
        return F.when(F.coalesce(anybad, F.lit(0)) == 0, v.NumericValue(number).term())
    key = v.order_key(v.TermValue(term))
    picked = F.min_by(term, key) if clause.function == "MIN" else F.max_by(term, key)
    return picked.over(window)
