"""The optimizer: an ordered list of pure rules, each ``rule(plan, statistics) -> plan``.

The order matters: sources are assigned before the D-Graph split can look at them; adjacent BGPs are merged
so the split sees whole groups; BGPs are split into their connected parts; filters are pushed down onto the
split parts; joins are ordered; AGGREGATE clauses whose extra solutions a DISTINCT projection drops become
GROUP BYs.
"""

from __future__ import annotations

from csparql.core.algebra.operators import QueryPlan
from csparql.core.optimizer.assign_sources import assign_sources
from csparql.core.optimizer.merge_bgps import merge_bgps
from csparql.core.optimizer.order_joins import order_joins
from csparql.core.optimizer.pushdown_filters import pushdown_filters
from csparql.core.optimizer.reduce_aggregates import reduce_aggregates
from csparql.core.optimizer.split_components import split_components
from csparql.core.optimizer.split_stream_static import split_stream_static
from csparql.core.optimizer.statistics import NO_STATISTICS, SourceStatistics

RULES = (
    assign_sources,
    merge_bgps,
    split_stream_static,
    split_components,
    pushdown_filters,
    order_joins,
    reduce_aggregates,
)


def optimize(plan: QueryPlan, statistics: SourceStatistics = NO_STATISTICS, rules=RULES) -> QueryPlan:
    """The plan after every rule, in order; the same query over the same data gives the same results."""
    for rule in rules:
        plan = rule(plan, statistics)
    return plan
