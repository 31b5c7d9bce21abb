"""Push every FILTER down to the pattern that binds its variables (the LarKC engine design, §5.1).

Each conjunct of a filter sinks as deep as it keeps its meaning: into the side of a join (or the left side of
an OPTIONAL or MINUS) whose solutions always bind all its variables, into both branches of a UNION, below a
BIND that does not define any of its variables, into a GRAPH that does not bind them, and into a sub-select
that projects them. It never crosses an aggregation, a slice or a VALUES table. Two conjuncts stay where
they are: those with EXISTS (their meaning depends on where they stand) and those whose ``timestamp(?v)``
depends on triple patterns outside the target (the timestamp is the greatest over all patterns binding ?v).
"""

from __future__ import annotations

import dataclasses

from rdflib import Variable

from csparql.core.algebra import operators as alg
from csparql.core.algebra.variables import certain, in_scope
from csparql.core.algebra.walk import transform_top_down
from csparql.core.language import expressions as ex
from csparql.core.optimizer.statistics import SourceStatistics


def pushdown_filters(plan: alg.QueryPlan, statistics: SourceStatistics) -> alg.QueryPlan:
    """The plan with each filter conjunct placed on the lowest operator that binds its variables."""
    return dataclasses.replace(plan, pattern=transform_top_down(plan.pattern, _push))


def conjuncts(expression: ex.Expr) -> list[ex.Expr]:
    """The conjuncts of an ``&&`` chain, left to right."""
    if isinstance(expression, ex.And):
        return conjuncts(expression.left) + conjuncts(expression.right)
    return [expression]


def _push(op: alg.Operator) -> alg.Operator:
    if not isinstance(op, alg.Filter):
        return op
    result = op.input
    for conjunct in conjuncts(op.expression):
        result = _add_filter(result, conjunct)
    return result


def _add_filter(op: alg.Operator, conjunct: ex.Expr) -> alg.Operator:
    """``Filter(conjunct, op)``, with the conjunct sunk into ``op`` as far as it keeps its meaning."""
    sunk = _sink(op, conjunct)
    if sunk is not None:
        return sunk
    if isinstance(op, alg.Filter):
        return alg.Filter(ex.And(op.expression, conjunct), op.input)
    return alg.Filter(conjunct, op)


def _timestamp_vars(conjunct: ex.Expr) -> set[Variable]:
    return {node.var for node in ex.walk(conjunct) if isinstance(node, ex.Timestamp)}


def _movable(conjunct: ex.Expr) -> bool:
    return not any(isinstance(node, ex.Exists) for node in ex.walk(conjunct))


def _sink(op: alg.Operator, conjunct: ex.Expr) -> alg.Operator | None:
    if not _movable(conjunct):
        return None
    needed = ex.variables(conjunct)
    stamped = _timestamp_vars(conjunct)

    def fits(target: alg.Operator, others: tuple[alg.Operator, ...]) -> bool:
        if not needed <= certain(target):
            return False
        return not any(stamped & set(in_scope(other)) for other in others)

    match op:
        case alg.Filter(expression, inner):
            sunk = _sink(inner, conjunct)
            if sunk is not None:
                return alg.Filter(expression, sunk)
        case alg.Join(left, right):
            if fits(left, (right,)):
                return alg.Join(_add_filter(left, conjunct), right)
            if fits(right, (left,)):
                return alg.Join(left, _add_filter(right, conjunct))
        case alg.LeftJoin(left, right, expression):
            if fits(left, (right,)):
                return alg.LeftJoin(_add_filter(left, conjunct), right, expression)
        case alg.Minus(left, right):
            if needed <= certain(left):
                return alg.Minus(_add_filter(left, conjunct), right)
        case alg.Union(left, right):
            return alg.Union(_add_filter(left, conjunct), _add_filter(right, conjunct))
        case alg.Extend(inner, var, expression):
            if var not in needed:
                return alg.Extend(_add_filter(inner, conjunct), var, expression)
        case alg.Graph(name, inner):
            if not (isinstance(name, Variable) and name in needed):
                return alg.Graph(name, _add_filter(inner, conjunct))
        case alg.Distinct(inner) | alg.Reduced(inner):
            return type(op)(_add_filter(inner, conjunct))
        case alg.OrderBy(inner, conditions):
            return alg.OrderBy(_add_filter(inner, conjunct), conditions)
        case alg.Project(inner, vars_):
            if needed <= set(vars_):
                return alg.Project(_add_filter(inner, conjunct), vars_)
    return None
