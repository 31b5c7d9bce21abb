"""Merge basic graph patterns that are joined directly and read the same sources.

``Join(BGP(a), BGP(b))`` becomes ``BGP(a + b)``, through chains of joins, so that the later rules see each
group of triple patterns whole (MergeJoinedGPOs in the LarKC engine design, §5.1).
"""

from __future__ import annotations

import dataclasses

from csparql.core.algebra import operators as alg
from csparql.core.algebra.walk import transform
from csparql.core.optimizer.joins import build_join, join_operands
from csparql.core.optimizer.statistics import SourceStatistics


def merge_bgps(plan: alg.QueryPlan, statistics: SourceStatistics) -> alg.QueryPlan:
    """The plan with joined BGPs over the same sources merged into one."""
    return dataclasses.replace(plan, pattern=transform(plan.pattern, _merge))


def _merge(op: alg.Operator) -> alg.Operator:
    if not isinstance(op, alg.Join):
        return op
    merged: list[alg.Operator] = []
    for operand in join_operands(op):
        if isinstance(operand, alg.BGP):
            for index, earlier in enumerate(merged):
                if isinstance(earlier, alg.BGP) and earlier.sources == operand.sources:
                    merged[index] = alg.BGP(earlier.triples + operand.triples, earlier.sources)
                    break
            else:
                merged.append(operand)
        else:
            merged.append(operand)
    return build_join(merged)
