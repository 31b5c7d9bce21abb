"""Split every basic graph pattern into the parts that read stream windows and the parts that read static
graphs: the D-Graph of the LarKC engine design (§4), and §5.5 of the C-SPARQL article:
[[t1 AND t2]]_D = [[t1]]_R ⋈ [[t2]]_S.

A triple pattern keeps the sources that can hold its predicate (``SourceStatistics.can_match``); patterns with
the same sources form one BGP, and the parts are joined. A pattern no source can hold keeps an empty source
list, which makes its part (and the join) empty without reading anything.
"""

from __future__ import annotations

import dataclasses

from csparql.core.algebra import operators as alg
from csparql.core.algebra.walk import transform
from csparql.core.optimizer.joins import build_join
from csparql.core.optimizer.statistics import SourceStatistics


def split_stream_static(plan: alg.QueryPlan, statistics: SourceStatistics) -> alg.QueryPlan:
    """The plan with each BGP split by the sources its triple patterns can match."""

    def split(op: alg.Operator) -> alg.Operator:
        if not isinstance(op, alg.BGP) or op.sources is None or len(op.triples) == 0:
            return op
        parts: dict[tuple[alg.Source, ...], list[alg.TriplePattern]] = {}
        for triple in op.triples:
            sources = tuple(s for s in op.sources if statistics.can_match(s, triple.predicate))
            parts.setdefault(sources, []).append(triple)
        if list(parts) == [op.sources]:
            return op
        return build_join([alg.BGP(tuple(triples), sources) for sources, triples in parts.items()])

    return dataclasses.replace(plan, pattern=transform(plan.pattern, split))
