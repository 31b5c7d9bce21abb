"""Split every basic graph pattern into its connected parts.

Triple patterns that share no variable, directly or through other patterns of the BGP, can only be combined
by a cross product. Kept in one BGP, that product is computed before anything else can narrow it: a FILTER on
one part applies to the whole BGP, and a join that would bind one part's variables comes after it (SRBench's
Q14 pairs every GeoNames feature code with every feature class that way). As separate operands of the join,
each part gets its own filters (``pushdown_filters``) and ``order_joins`` joins it where it connects to the
rest of the query.
"""

from __future__ import annotations

import dataclasses

from csparql.core.algebra import operators as alg
from csparql.core.algebra.variables import pattern_variables
from csparql.core.algebra.walk import transform
from csparql.core.optimizer.joins import build_join
from csparql.core.optimizer.statistics import SourceStatistics


def split_components(plan: alg.QueryPlan, statistics: SourceStatistics) -> alg.QueryPlan:
    """The plan with each BGP of several connected parts replaced by the join of its parts (in written order)."""

    def split(op: alg.Operator) -> alg.Operator:
        if not isinstance(op, alg.BGP) or len(op.triples) < 2:
            return op
        parts = components(op.triples)
        if len(parts) == 1:
            return op
        return build_join([alg.BGP(tuple(part), op.sources) for part in parts])

    return dataclasses.replace(plan, pattern=transform(plan.pattern, split))


def components(triples: tuple[alg.TriplePattern, ...]) -> list[list[alg.TriplePattern]]:
    """The triple patterns grouped by shared variables (a pattern without variables is a part of its own),
    each part in written order, parts in the order of their first pattern."""
    parent = list(range(len(triples)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    first_with: dict = {}
    for index, triple in enumerate(triples):
        for var in pattern_variables(triple):
            if var in first_with:
                parent[root(index)] = root(first_with[var])
            else:
                first_with[var] = index
    parts: dict[int, list[alg.TriplePattern]] = {}
    for index, triple in enumerate(triples):
        parts.setdefault(root(index), []).append(triple)
    return list(parts.values())
