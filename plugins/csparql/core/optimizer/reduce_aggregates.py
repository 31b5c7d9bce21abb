"""Reduce AGGREGATE clauses whose extra solutions a DISTINCT projection throws away.

An AGGREGATE clause (the C-SPARQL article, §4.1; docs/semantics.md, *The AGGREGATE clause*) keeps every solution
and extends it with its group's aggregate; ``SELECT DISTINCT`` of only the group variables and the aggregates
then keeps one row per group. So ``Distinct(Project(StreamAggregate(P, clauses), vars))`` is
``Distinct(Project(Group(P, groups, aggregates), vars))`` when every clause is a COUNT over the same non-empty
group variables without a FILTER, and ``vars`` are among the group variables and the clauses' variables: the same
rows, computed by a reducing GROUP BY (a partial aggregation per partition) instead of extending every solution
(a shuffle and sort of all of them). An unbound group value is a group of its own in both. Examples 04 and 15
have this shape.
"""

from __future__ import annotations

import dataclasses

from csparql.core.algebra import operators as alg
from csparql.core.algebra.walk import transform
from csparql.core.language import expressions as ex
from csparql.core.optimizer.statistics import SourceStatistics


def reduce_aggregates(plan: alg.QueryPlan, statistics: SourceStatistics) -> alg.QueryPlan:
    """The plan with each reducible AGGREGATE (see the module docstring) as a GROUP BY."""
    return dataclasses.replace(plan, pattern=transform(plan.pattern, _reduce))


def _reduce(op: alg.Operator) -> alg.Operator:
    if not (isinstance(op, alg.Distinct) and isinstance(op.input, alg.Project)
            and isinstance(op.input.input, alg.StreamAggregate)):
        return op
    project, aggregate = op.input, op.input.input
    groups = aggregate.clauses[0].groups
    if not groups or len(set(groups)) != len(groups):
        return op  # no group variables: one group even without solutions, unlike AGGREGATE
    for clause in aggregate.clauses:
        if clause.function != "COUNT" or clause.filter is not None or set(clause.groups) != set(groups):
            return op
    if not set(project.vars) <= set(groups) | {clause.var for clause in aggregate.clauses}:
        return op
    keys = tuple(alg.GroupKey(var, var) for var in groups)
    counts = tuple((c.var, ex.AggregateCall("COUNT", c.argument, c.distinct)) for c in aggregate.clauses)
    return alg.Distinct(alg.Project(alg.Group(aggregate.input, keys, counts), project.vars))
