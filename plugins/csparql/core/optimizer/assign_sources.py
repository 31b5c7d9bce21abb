"""Give every basic graph pattern and path pattern the sources it reads.

The sources are those of the dataset of an evaluation (docs/semantics.md). A pattern in the default graph reads
the dataset's default sources (every FROM STREAM window and the FROM graphs, or the default static graph). Inside
``GRAPH <iri>`` it reads that named graph or stream window, and the GRAPH operator disappears; inside
``GRAPH ?g`` it reads the named sources and the GRAPH operator stays to bind ``?g``.
"""

from __future__ import annotations

import dataclasses

from rdflib import URIRef

from csparql.core.algebra import operators as alg
from csparql.core.algebra.walk import children, map_expressions, with_children
from csparql.core.language import expressions as ex
from csparql.core.algebra.walk import map_expression
from csparql.core.optimizer.statistics import SourceStatistics


def assign_sources(plan: alg.QueryPlan, statistics: SourceStatistics) -> alg.QueryPlan:
    """The plan with the sources of every BGP and path pattern made explicit."""
    return dataclasses.replace(plan, pattern=_assign(plan.pattern, plan.dataset.default, plan.dataset))


def _assign(op: alg.Operator, active: tuple[alg.Source, ...], dataset: alg.Dataset) -> alg.Operator:
    def in_expressions(node: alg.Operator) -> alg.Operator:
        def visit(expression):
            if isinstance(expression, ex.Exists) and isinstance(expression.pattern, alg.Operator):
                return dataclasses.replace(expression, pattern=_assign(expression.pattern, active, dataset))
            return expression

        return map_expressions(node, lambda e: map_expression(e, visit))

    match op:
        case alg.BGP(_, None) | alg.PathPattern(sources=None):
            return dataclasses.replace(op, sources=active)
        case alg.Graph(URIRef() as name, inner):
            source = dataset.named_source(name)
            return _assign(inner, (source,) if source is not None else (), dataset)
        case alg.Graph(name, inner):
            return alg.Graph(name, _assign(inner, dataset.named, dataset))
    rebuilt = with_children(op, [_assign(child, active, dataset) for child in children(op)])
    return in_expressions(rebuilt)
