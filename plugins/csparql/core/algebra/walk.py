"""Generic traversal of the algebra: the one place that knows where an operator keeps its sub-operators.

Every rewrite is a function ``Operator -> Operator`` applied with ``transform`` (bottom-up) or
``transform_top_down``; analyses iterate with ``walk``. Sub-patterns inside EXISTS expressions are reached
by ``transform`` too, so a rewrite applies to them as well.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from csparql.core.algebra.operators import Operator
from csparql.core.language import expressions as ex


def children(op: Operator) -> tuple[Operator, ...]:
    """The direct sub-operators of an operator, in field order."""
    return tuple(
        value
        for field in dataclasses.fields(op)
        if isinstance(value := getattr(op, field.name), Operator)
    )


def with_children(op: Operator, new_children: tuple[Operator, ...] | list[Operator]) -> Operator:
    """The operator with its sub-operators replaced (same order as ``children``); the same object if unchanged."""
    new_children = list(new_children)
    changes = {}
    for field in dataclasses.fields(op):
        value = getattr(op, field.name)
        if isinstance(value, Operator):
            replacement = new_children.pop(0)
            if replacement is not value:
                changes[field.name] = replacement
    return dataclasses.replace(op, **changes) if changes else op


def walk(op: Operator) -> Iterator[Operator]:
    """Every operator of the tree, parents before children (EXISTS patterns included)."""
    yield op
    for expression in expressions_of(op):
        for node in ex.walk(expression):
            if isinstance(node, ex.Exists) and isinstance(node.pattern, Operator):
                yield from walk(node.pattern)
    for child in children(op):
        yield from walk(child)


def transform(op: Operator, rule: Callable[[Operator], Operator]) -> Operator:
    """Apply ``rule`` to every operator bottom-up: children first, then the rebuilt parent."""
    rebuilt = with_children(op, [transform(child, rule) for child in children(op)])
    rebuilt = map_expressions(rebuilt, lambda e: _transform_exists(e, rule))
    return rule(rebuilt)


def transform_top_down(op: Operator, rule: Callable[[Operator], Operator]) -> Operator:
    """Apply ``rule`` to an operator, then to the children of what it returned."""
    rewritten = rule(op)
    rewritten = map_expressions(rewritten, lambda e: _transform_exists(e, rule, top_down=True))
    return with_children(rewritten, [transform_top_down(child, rule) for child in children(rewritten)])


def _transform_exists(expression: ex.Expr, rule, top_down: bool = False) -> ex.Expr:
    def visit(node: ex.Expr) -> ex.Expr:
        if isinstance(node, ex.Exists) and isinstance(node.pattern, Operator):
            pattern = transform_top_down(node.pattern, rule) if top_down else transform(node.pattern, rule)
            return node if pattern is node.pattern else dataclasses.replace(node, pattern=pattern)
        return node

    return map_expression(expression, visit)


def expressions_of(op: Operator) -> tuple[ex.Expr, ...]:
    """The expressions an operator holds directly (filters, BIND, group keys, aggregates, order conditions)."""
    from csparql.core.algebra import operators as alg

    match op:
        case alg.Filter(expression, _) | alg.Extend(_, _, expression):
            return (expression,)
        case alg.LeftJoin(_, _, expression):
            return () if expression is None else (expression,)
        case alg.Group(_, keys, aggregates):
            return tuple(k.expression for k in keys) + tuple(a for _, a in aggregates)
        case alg.OrderBy(_, conditions):
            return tuple(c for c, _ in conditions)
        case alg.StreamAggregate(_, clauses):
            return tuple(c.filter for c in clauses if c.filter is not None)
    return ()


def map_expressions(op: Operator, fn: Callable[[ex.Expr], ex.Expr]) -> Operator:
    """The operator with ``fn`` applied to each expression it holds directly."""
    from csparql.core.algebra import operators as alg

    match op:
        case alg.Filter(expression, _):
            new = fn(expression)
            return op if new is expression else dataclasses.replace(op, expression=new)
        case alg.Extend(_, _, expression):
            new = fn(expression)
            return op if new is expression else dataclasses.replace(op, expression=new)
        case alg.LeftJoin(_, _, expression) if expression is not None:
            new = fn(expression)
            return op if new is expression else dataclasses.replace(op, expression=new)
        case alg.Group(_, keys, aggregates):
            new_keys = tuple(dataclasses.replace(k, expression=fn(k.expression)) for k in keys)
            new_aggregates = tuple((v, fn(a)) for v, a in aggregates)
            if new_keys == keys and all(n[1] is o[1] for n, o in zip(new_aggregates, aggregates)):
                return op
            return dataclasses.replace(op, keys=new_keys, aggregates=new_aggregates)
        case alg.OrderBy(_, conditions):
            new_conditions = tuple((fn(c), d) for c, d in conditions)
            if all(n[0] is o[0] for n, o in zip(new_conditions, conditions)):
                return op
            return dataclasses.replace(op, conditions=new_conditions)
        case alg.StreamAggregate(_, clauses):
            new_clauses = tuple(
                dataclasses.replace(c, filter=fn(c.filter)) if c.filter is not None else c for c in clauses
            )
            if all(n.filter is o.filter for n, o in zip(new_clauses, clauses)):
                return op
            return dataclasses.replace(op, clauses=new_clauses)
    return op


def map_expression(expression: ex.Expr, fn: Callable[[ex.Expr], ex.Expr]) -> ex.Expr:
    """Rebuild an expression bottom-up with ``fn`` applied to every node (terms included)."""
    if isinstance(expression, ex.Expression):
        changes = {}
        for field in dataclasses.fields(expression):
            value = getattr(expression, field.name)
            if field.name in ("pattern", "stream_span"):
                continue
            if isinstance(value, tuple) and value and all(_is_expr(v) for v in value):
                new = tuple(map_expression(v, fn) for v in value)
                if any(n is not o for n, o in zip(new, value)):
                    changes[field.name] = new
            elif _is_expr(value) and field.name not in ("name", "op"):
                new = map_expression(value, fn)
                if new is not value:
                    changes[field.name] = new
        if changes:
            expression = dataclasses.replace(expression, **changes)
    return fn(expression)


def _is_expr(value) -> bool:
    from rdflib.term import Identifier

    return isinstance(value, (ex.Expression, Identifier))
