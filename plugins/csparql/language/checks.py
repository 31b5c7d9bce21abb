"""The C-SPARQL rules a parsed query must keep, each with its own message (spec 000 §3, spec/README.md).

``check(query, bound_in_where)`` returns every problem found, so a user sees them all at once:

- REGISTER STREAM only for CONSTRUCT and DESCRIBE (000 §3.3, decision 9);
- every FROM STREAM has a window; durations are positive; STEP is not longer than RANGE; TRIPLES n ≥ 1;
- a stream has one window per query (the same IRI with two different windows is refused; written twice
  with the same window it is one stream);
- AGGREGATE clauses (000 §3.4): the new variable occurs neither in WHERE nor in another clause; SUM, AVG,
  MIN and MAX take an argument; the argument and the group variables are bound by WHERE.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from rdflib import Variable

from csparql.language import syntax as sx
from csparql.language.errors import Diagnostic
from csparql.language.printer import format_window

AGGREGATE_CLAUSE_FUNCTIONS = ("COUNT", "SUM", "AVG", "MIN", "MAX")


def mentioned_variables(node) -> set[Variable]:
    """Every variable written anywhere inside a syntax node (patterns, filters, sub-selects)."""
    found: set[Variable] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Variable):
            found.add(current)
        elif isinstance(current, (tuple, list)):
            stack.extend(current)
        elif dataclasses.is_dataclass(current) and not isinstance(current, type):
            stack.extend(getattr(current, f.name) for f in dataclasses.fields(current))
    return found


def check(query: sx.Query, bound_in_where: Iterable[Variable]) -> list[Diagnostic]:
    """Every C-SPARQL rule the query breaks; empty when it keeps them all."""
    problems: list[Diagnostic] = []
    problems += _registration(query)
    problems += _windows(query)
    problems += _aggregate_clauses(query, set(bound_in_where))
    return problems


def _registration(query: sx.Query) -> list[Diagnostic]:
    registration = query.registration
    if registration is None:
        return []
    problems = []
    if registration.kind == "STREAM" and isinstance(query.form, (sx.SelectForm, sx.AskForm)):
        form = "SELECT" if isinstance(query.form, sx.SelectForm) else "ASK"
        problems.append(
            Diagnostic(
                f"only CONSTRUCT and DESCRIBE queries can be registered as STREAM (C-SPARQL 000 §3.3); "
                f"this is a {form} query: write REGISTER QUERY {registration.name} instead of REGISTER STREAM",
                query.form.span,
            )
        )
    every = registration.computed_every
    if every is not None and every.micros <= 0:
        problems.append(Diagnostic("COMPUTED EVERY must be a positive duration", every.span))
    return problems


def _windows(query: sx.Query) -> list[Diagnostic]:
    problems = []
    first_window: dict = {}
    for clause in query.streams:
        window = clause.window
        if window is None:
            problems.append(
                Diagnostic(
                    f"FROM STREAM <{clause.iri}> needs a window, e.g. [RANGE 10m STEP 1m], "
                    "[RANGE 5m TUMBLING] or [TRIPLES 1000]",
                    clause.span,
                )
            )
            continue
        if isinstance(window, sx.LogicalWindowSpec):
            if window.range.micros <= 0:
                problems.append(Diagnostic("the window RANGE must be a positive duration", window.range.span))
            if window.step is not None and window.step.micros <= 0:
                problems.append(Diagnostic("the window STEP must be a positive duration", window.step.span))
            elif window.step is not None and window.range.micros > 0 and window.step.micros > window.range.micros:
                problems.append(
                    Diagnostic(
                        "the window STEP is longer than its RANGE, so some triples would fall in no window; "
                        "use a STEP no longer than the RANGE (or TUMBLING for STEP = RANGE)",
                        window.step.span,
                    )
                )
        elif window.count < 1:
            problems.append(
                Diagnostic(f"a physical window needs at least one triple: TRIPLES {window.count} is not allowed", window.span)
            )
        if clause.iri in first_window:
            earlier = first_window[clause.iri]
            if _window_key(earlier) != _window_key(window):
                problems.append(
                    Diagnostic(
                        f"the stream <{clause.iri}> is given two different windows, {format_window(earlier)} and "
                        f"{format_window(window)}; a stream has one window per query (register one query per window)",
                        clause.span,
                    )
                )
        else:
            first_window[clause.iri] = window
    return problems


def _window_key(window: sx.WindowSpec):
    if isinstance(window, sx.PhysicalWindowSpec):
        return ("TRIPLES", window.count)
    step = window.step.micros if window.step is not None else window.range.micros
    return ("RANGE", window.range.micros, step)


def _aggregate_clauses(query: sx.Query, bound: set[Variable]) -> list[Diagnostic]:
    problems = []
    in_where = mentioned_variables(query.where) if query.where is not None else set()
    introduced: set[Variable] = set()
    for clause in query.aggregates:
        if clause.var in in_where:
            problems.append(
                Diagnostic(
                    f"?{clause.var} is already used in the WHERE clause: an AGGREGATE clause must introduce a new variable",
                    clause.var_span,
                )
            )
        elif clause.var in introduced:
            problems.append(
                Diagnostic(
                    f"?{clause.var} is already introduced by another AGGREGATE clause: each clause needs its own variable",
                    clause.var_span,
                )
            )
        introduced.add(clause.var)
        if clause.function not in AGGREGATE_CLAUSE_FUNCTIONS:
            problems.append(
                Diagnostic(
                    f"{clause.function} cannot be used in an AGGREGATE clause, which takes COUNT, SUM, AVG, MIN or MAX",
                    clause.function_span,
                )
            )
        elif clause.function != "COUNT" and clause.argument == "*":
            problems.append(
                Diagnostic(f"{clause.function}(*) is not allowed: only COUNT takes '*'", clause.function_span)
            )
        elif clause.function != "COUNT" and not isinstance(clause.argument, Variable):
            problems.append(
                Diagnostic(
                    f"{clause.function} needs an argument, e.g. {clause.function}(?amount); only COUNT may have none",
                    clause.function_span,
                )
            )
        if isinstance(clause.argument, Variable) and clause.argument not in bound:
            problems.append(
                Diagnostic(
                    f"the aggregated variable ?{clause.argument} is not bound by the WHERE clause",
                    clause.argument_span,
                )
            )
        if not clause.groups:
            problems.append(Diagnostic("an AGGREGATE clause needs at least one group variable", clause.span))
        spans = clause.group_spans or ()
        for index, var in enumerate(clause.groups):
            if var not in bound:
                problems.append(
                    Diagnostic(
                        f"the group variable ?{var} is not bound by the WHERE clause",
                        spans[index] if index < len(spans) else clause.span,
                    )
                )
    return problems
