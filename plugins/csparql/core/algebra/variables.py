"""Which variables an operator binds: in scope (SPARQL 1.1 §18.2.1) and certainly bound.

``in_scope`` lists, in order of first appearance, the variables a solution of the operator may bind.
``certain`` is the subset bound in every solution: a FILTER that mentions only certain variables of a
sub-pattern means the same there as above it, which is what filter push-down relies on.
"""

from __future__ import annotations

from rdflib import Variable

from csparql.core.algebra import operators as alg


def _ordered(*groups) -> tuple[Variable, ...]:
    seen: dict[Variable, None] = {}
    for group in groups:
        for var in group:
            seen.setdefault(var, None)
    return tuple(seen)


def pattern_variables(pattern: alg.TriplePattern | alg.PathPattern) -> tuple[Variable, ...]:
    """The variables of a triple or path pattern, subject first."""
    if isinstance(pattern, alg.PathPattern):
        terms = (pattern.subject, pattern.object)
    else:
        terms = (pattern.subject, pattern.predicate, pattern.object)
    return _ordered([t for t in terms if isinstance(t, Variable)])


def in_scope(op: alg.Operator) -> tuple[Variable, ...]:
    """The in-scope variables of an operator, §18.2.1, in order of first appearance."""
    match op:
        case alg.BGP(triples):
            return _ordered(*(pattern_variables(t) for t in triples))
        case alg.PathPattern():
            return pattern_variables(op)
        case alg.Join(left, right) | alg.LeftJoin(left, right, _) | alg.Union(left, right):
            return _ordered(in_scope(left), in_scope(right))
        case alg.Minus(left, _) | alg.Filter(_, left) | alg.OrderBy(left, _) | alg.Distinct(left) | alg.Reduced(left) | alg.Slice(left, _, _):
            return in_scope(left)
        case alg.Graph(name, inner):
            return _ordered([name] if isinstance(name, Variable) else [], in_scope(inner))
        case alg.Extend(inner, var, _):
            return _ordered(in_scope(inner), [var])
        case alg.Table(vars_, _) | alg.PaneRows(vars_):
            return vars_
        case alg.Group(_, keys, aggregates):
            return _ordered([k.var for k in keys if k.var is not None], [v for v, _ in aggregates])
        case alg.StreamAggregate(inner, clauses):
            return _ordered(in_scope(inner), [c.var for c in clauses])
        case alg.Project(_, vars_):
            return vars_
    raise TypeError(f"in_scope: unknown operator {type(op).__name__}")


def certain(op: alg.Operator) -> frozenset[Variable]:
    """The variables bound in every solution of the operator."""
    match op:
        case alg.BGP(triples):
            return frozenset(v for t in triples for v in pattern_variables(t))
        case alg.PathPattern():
            return frozenset(pattern_variables(op))
        case alg.Join(left, right):
            return certain(left) | certain(right)
        case alg.LeftJoin(left, _, _) | alg.Minus(left, _) | alg.Filter(_, left) | alg.OrderBy(left, _) | alg.Distinct(left) | alg.Reduced(left) | alg.Slice(left, _, _):
            return certain(left)
        case alg.Union(left, right):
            return certain(left) & certain(right)
        case alg.Graph(name, inner):
            return certain(inner) | (frozenset([name]) if isinstance(name, Variable) else frozenset())
        case alg.Extend(inner, _, _):
            return certain(inner)
        case alg.Table(vars_, rows):
            return frozenset(v for i, v in enumerate(vars_) if rows and all(r[i] is not None for r in rows))
        case alg.PaneRows():
            return frozenset()
        case alg.Group(inner, keys, aggregates):
            bound = certain(inner)
            keys_bound = frozenset(k.var for k in keys if k.var is not None and k.expression == k.var and k.var in bound)
            counts = frozenset(v for v, a in aggregates if a.name == "COUNT")
            return keys_bound | counts
        case alg.StreamAggregate(inner, clauses):
            return certain(inner) | frozenset(c.var for c in clauses if c.function == "COUNT")
        case alg.Project(inner, vars_):
            return certain(inner) & frozenset(vars_)
    raise TypeError(f"certain: unknown operator {type(op).__name__}")


def visible(op: alg.Operator) -> tuple[Variable, ...]:
    """The in-scope variables a ``SELECT *`` projects: hidden ones left out."""
    return tuple(v for v in in_scope(op) if not alg.is_hidden(v))

