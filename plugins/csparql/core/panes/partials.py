"""The plan that computes the partial results of a run of panes at once, each row tagged with its pane
(``pane_partial_plan``; what a pane keeps is point 5 of ``csparql.core.panes``)."""

from __future__ import annotations

from dataclasses import dataclass

from rdflib import Literal, Variable

from csparql.core.algebra import operators as alg
from csparql.core.algebra.variables import in_scope
from csparql.core.algebra.walk import expressions_of, transform
from csparql.core.language import expressions as ex
from csparql.core.panes.decide import AGGREGATE, CONSTRUCT, DISTINCT, PanePlan, reads_stream, the_group

PANE_VAR = Variable(".pane")
"""Bound, in a partial plan, to the end of the pane (µs, an xsd:integer) of the solution's stream triple;
unbound in a solution made of static triples only (it belongs to every window)."""
PATTERN_VAR = Variable(".pattern")
"""Bound, in a keyed partial plan, to the position of the stream triple pattern the solution matched."""
COUNT_VAR = Variable(".n")
"""How many times a keyed partial row occurs in its pane."""


@dataclass(frozen=True)
class PartialPlan:
    """What the engine evaluates over a run of panes: ``plan`` (a SELECT of ``vars`` and ``PANE_VAR``; its
    pattern binds ``PANE_VAR`` where it reads a stream, which the compiler does in pane mode), and the stored
    variables ``vars`` that ``pane_combination_plan`` reads back through ``alg.PaneRows``."""

    plan: alg.QueryPlan
    vars: tuple[Variable, ...]


def pane_partial_plan(plan: alg.QueryPlan, panes: PanePlan) -> PartialPlan:
    """The plan computing the partial results of panes (``csparql.core.panes``, point 5) for the optimized ``plan``
    whose ``pane_plan`` is ``panes``."""
    if panes.combination == AGGREGATE and panes.keyed:
        stored = _keyed_variables(panes.pattern)
        keys = tuple(alg.GroupKey(var, var) for var in (*stored, PANE_VAR))
        pattern = alg.Group(_with_pattern_positions(panes.pattern), keys, ((COUNT_VAR, ex.AggregateCall("COUNT", None)),))
        stored = (*stored, COUNT_VAR)
    else:
        base = _below_chain(panes.pattern) if panes.combination == DISTINCT else panes.pattern
        stored = _set_variables(plan, panes, base)
        pattern = alg.Distinct(alg.Project(base, (*stored, PANE_VAR)))
    partial = alg.QueryPlan(alg.SelectResult((*stored, PANE_VAR)), pattern, plan.dataset, None, plan.prefixes, plan.base)
    return PartialPlan(partial, stored)


def _below_chain(op: alg.Operator) -> alg.Operator:
    """Below the query's top chain (ORDER BY, projection, DISTINCT, LIMIT): what a pane evaluates."""
    while isinstance(op, (alg.Slice, alg.OrderBy, alg.Project, alg.Distinct, alg.Reduced)):
        op = op.input
    return op


def _set_variables(plan: alg.QueryPlan, panes: PanePlan, base: alg.Operator) -> tuple[Variable, ...]:
    """The variables of ``base`` (what a pane evaluates) that the operators above it read."""
    found: dict[Variable, None] = {}
    if panes.combination == AGGREGATE:
        group = the_group(plan.pattern)
        for expression in expressions_of(group):
            if isinstance(expression, ex.AggregateCall) and expression.argument is None and expression.distinct:
                found.update(dict.fromkeys(in_scope(group.input)))  # COUNT(DISTINCT *): whole solutions
            found.update(dict.fromkeys(sorted(ex.variables(expression), key=str)))
    elif panes.combination == DISTINCT:
        op = plan.pattern
        while isinstance(op, (alg.Slice, alg.OrderBy, alg.Project, alg.Distinct, alg.Reduced)):
            if isinstance(op, alg.Project):
                found.update(dict.fromkeys(op.vars))
            for expression in expressions_of(op):
                found.update(dict.fromkeys(sorted(ex.variables(expression), key=str)))
            op = op.input
    elif panes.combination == CONSTRUCT:
        for triple in plan.form.template:
            for term in (triple.subject, triple.predicate, triple.object):
                if isinstance(term, Variable):
                    found[term] = None
    scope = set(in_scope(base))
    return tuple(var for var in found if var in scope)


def _keyed_variables(pattern: alg.Operator) -> tuple[Variable, ...]:
    """Every in-scope variable of the pane pattern and the stream pattern's position: what identifies the
    stream solution a row comes from."""
    return (*(var for var in in_scope(pattern) if var != PANE_VAR), PATTERN_VAR)


def _with_pattern_positions(pattern: alg.Operator) -> alg.Operator:
    """The pattern with each stream BGP extended by ``PATTERN_VAR``, its position among them."""
    position = 0

    def rule(op: alg.Operator) -> alg.Operator:
        nonlocal position
        if isinstance(op, alg.BGP) and reads_stream(op):
            position += 1
            return alg.Extend(op, PATTERN_VAR, Literal(position))
        return op

    return transform(pattern, rule)
