"""Helpers the join rules share: flatten a chain of inner joins, and build one back."""

from __future__ import annotations

from csparql.core.algebra import operators as alg


def join_operands(op: alg.Operator) -> list[alg.Operator]:
    """The operands of a chain of inner joins, left to right (a non-join is a chain of one)."""
    if isinstance(op, alg.Join):
        return join_operands(op.left) + join_operands(op.right)
    return [op]


def build_join(operands: list[alg.Operator]) -> alg.Operator:
    """A left-deep join of the operands, in the given order (the empty BGP for none)."""
    if not operands:
        return alg.BGP()
    result = operands[0]
    for operand in operands[1:]:
        result = alg.Join(result, operand)
    return result
