"""The plan that combines the stored rows of one window's panes (``alg.PaneRows``) into the window's result
(``pane_combination_plan``): the query's own operators over the union of its panes' rows."""

from __future__ import annotations

import dataclasses

from rdflib import Literal, Variable

from csparql.core.algebra import operators as alg
from csparql.core.algebra.walk import transform
from csparql.core.language import expressions as ex
from csparql.core.panes.decide import AGGREGATE, DISTINCT, PanePlan, the_group
from csparql.core.panes.partials import COUNT_VAR, PartialPlan


def pane_combination_plan(plan: alg.QueryPlan, panes: PanePlan, partial: PartialPlan) -> alg.QueryPlan:
    """The plan combining the stored rows of one window's panes (``alg.PaneRows`` of ``partial.vars``) into the
    window's result: the query's own operators over the union of its panes' rows, each row once."""
    rows: alg.Operator = alg.Distinct(alg.PaneRows(partial.vars))
    if panes.combination == AGGREGATE:
        group = the_group(plan.pattern)
        if panes.keyed:
            replacement = _weighted_group(group, rows)
        else:
            replacement = dataclasses.replace(group, input=rows)
        pattern = _replace(plan.pattern, group, replacement)
    elif panes.combination == DISTINCT:
        pattern = _replace_chain_input(plan.pattern, rows)
    else:
        pattern = rows
    return dataclasses.replace(plan, pattern=pattern, registration=plan.registration)


def _replace_chain_input(op: alg.Operator, replacement: alg.Operator) -> alg.Operator:
    if isinstance(op, (alg.Slice, alg.OrderBy, alg.Project, alg.Distinct, alg.Reduced)):
        return dataclasses.replace(op, input=_replace_chain_input(op.input, replacement))
    return replacement


def _replace(op: alg.Operator, old: alg.Operator, new: alg.Operator) -> alg.Operator:
    return transform(op, lambda node: new if node is old else node)


def _weighted_group(group: alg.Group, rows: alg.Operator) -> alg.Operator:
    """The query's GROUP over keyed rows: COUNT, SUM and AVG without DISTINCT weigh each row by ``COUNT_VAR``
    (MIN, MAX and DISTINCT aggregates read the rows as the window's set of solutions)."""
    aggregates: list[tuple[Variable, ex.AggregateCall]] = []
    finals: list[tuple[Variable, ex.Expr]] = []
    for index, (var, call) in enumerate(group.aggregates):
        if call.distinct or call.name not in ("COUNT", "SUM", "AVG"):
            aggregates.append((var, call))
            continue
        if call.name == "COUNT":
            aggregates.append((var, ex.AggregateCall("SUM", _weight_if_evaluates(call.argument))))
            continue
        total, count = Variable(f".sum{index}"), Variable(f".count{index}")
        aggregates.append((total if call.name == "AVG" else var, ex.AggregateCall("SUM", _weighted(call.argument))))
        if call.name == "AVG":
            aggregates.append((count, ex.AggregateCall("SUM", _weight_if_evaluates(call.argument))))
            # AVG of no value is 0 (SPARQL 1.1 §18.5.1.4); an error in a value leaves SUM unbound, and AVG too
            average = ex.BuiltinCall("IF", (ex.Compare("=", count, Literal(0)), Literal(0),
                                            ex.Arithmetic("/", total, count)))
            finals.append((var, ex.BuiltinCall("IF", (ex.BuiltinCall("BOUND", (total,)), average, Variable(".undefined")))))
    result: alg.Operator = alg.Group(rows, group.keys, tuple(aggregates))
    for var, expression in finals:
        result = alg.Extend(result, var, expression)
    return result


def _weighted(argument: ex.Expr) -> ex.Expr:
    """``argument`` × ``COUNT_VAR``; a variable left unbound leaves the values (adds 0), as SUM does."""
    product = ex.Arithmetic("*", argument, COUNT_VAR)
    if isinstance(argument, Variable):
        return ex.BuiltinCall("IF", (ex.BuiltinCall("BOUND", (argument,)), product, Literal(0)))
    return product


def _weight_if_evaluates(argument: ex.Expr | None) -> ex.Expr:
    """``COUNT_VAR`` for a row whose ``argument`` evaluates (COUNT counts those), else 0."""
    if argument is None:
        return COUNT_VAR
    if isinstance(argument, Variable):
        return ex.BuiltinCall("IF", (ex.BuiltinCall("BOUND", (argument,)), COUNT_VAR, Literal(0)))
    evaluates = ex.BuiltinCall("SAMETERM", (argument, argument))
    return ex.BuiltinCall("COALESCE", (ex.BuiltinCall("IF", (evaluates, COUNT_VAR, Literal(0))), Literal(0)))
