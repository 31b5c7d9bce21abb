"""Order joins so that selective and connected patterns come first.

Inside each BGP the triple patterns are ordered, and each chain of inner joins is reordered, greedily: start
with the most selective operand, then always take the most selective operand that shares a variable with
those already taken, so that no join is a cross product unless the query asks for one. Selectivity comes from
the source statistics when there are any, and otherwise from the shape of the pattern (each bound position
makes it more selective, subject most, then object, then predicate).
"""

from __future__ import annotations

import dataclasses
import heapq

from rdflib import Variable

from csparql.core.algebra import operators as alg
from csparql.core.algebra.variables import in_scope, pattern_variables
from csparql.core.algebra.walk import transform
from csparql.core.optimizer.joins import build_join, join_operands
from csparql.core.optimizer.statistics import UNKNOWN_CARDINALITY, SourceStatistics

# How much a bound position divides the expected number of matches of a triple pattern.
BOUND_SUBJECT, BOUND_OBJECT, BOUND_PREDICATE = 1000.0, 100.0, 10.0


def order_joins(plan: alg.QueryPlan, statistics: SourceStatistics) -> alg.QueryPlan:
    """The plan with the patterns of every BGP and the operands of every join chain in greedy order."""

    def reorder(op: alg.Operator) -> alg.Operator:
        if isinstance(op, alg.BGP) and len(op.triples) > 1:
            ordered = _greedy(
                list(op.triples),
                lambda t: _triple_cost(t, op.sources, statistics),
                lambda t: set(pattern_variables(t)),
            )
            return alg.BGP(tuple(ordered), op.sources)
        if isinstance(op, alg.Join):
            operands = _greedy(
                join_operands(op), lambda o: _operator_cost(o, statistics), lambda o: set(in_scope(o))
            )
            return build_join(operands)
        return op

    return dataclasses.replace(plan, pattern=transform(plan.pattern, reorder))


def _greedy(items: list, cost, variables) -> list:
    """Items ordered cheapest-first, preferring items connected to those already chosen (stable on ties).

    Each step takes the item of least (cost, position) among those sharing a variable with the items chosen so
    far, or among all remaining items when none does. Heaps keyed by (cost, position) and an index from each
    variable to its items make that O(n log n) rather than a scan of every remaining item at every step."""
    keys = [(cost(item), index) for index, item in enumerate(items)]
    item_variables = [variables(item) for item in items]
    by_variable: dict[Variable, list[int]] = {}
    for index, names in enumerate(item_variables):
        for name in names:
            by_variable.setdefault(name, []).append(index)
    everything = list(keys)
    heapq.heapify(everything)
    connected: list[tuple] = []
    taken = [False] * len(items)
    bound: set[Variable] = set()
    chosen: list = []
    while len(chosen) < len(items):
        while connected and taken[connected[0][1]]:
            heapq.heappop(connected)
        pool = connected if connected else everything
        while taken[pool[0][1]]:
            heapq.heappop(pool)
        _, index = heapq.heappop(pool)
        taken[index] = True
        chosen.append(items[index])
        for name in item_variables[index] - bound:
            bound.add(name)
            for other in by_variable[name]:
                if not taken[other]:
                    heapq.heappush(connected, keys[other])
    return chosen


def _triple_cost(triple: alg.TriplePattern, sources, statistics: SourceStatistics) -> float:
    cost = float(statistics.cardinality(sources, triple.predicate))
    if not isinstance(triple.subject, Variable):
        cost /= BOUND_SUBJECT
    if not isinstance(triple.object, Variable):
        cost /= BOUND_OBJECT
    if not isinstance(triple.predicate, Variable) and cost >= UNKNOWN_CARDINALITY:
        cost /= BOUND_PREDICATE
    return cost


def _operator_cost(op: alg.Operator, statistics: SourceStatistics) -> float:
    match op:
        case alg.BGP(triples, sources):
            if not triples:
                return 1.0
            return min(_triple_cost(t, sources, statistics) for t in triples)
        case alg.Filter(_, inner):
            return _operator_cost(inner, statistics) / 2
        case alg.Table(_, rows):
            return float(len(rows))
    return float(UNKNOWN_CARDINALITY)
