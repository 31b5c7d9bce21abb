"""The C-SPARQL rules a parsed query must keep, each with its own message (the C-SPARQL article, §3,
and docs/semantics.md).

``check(query, bound_in_where)`` returns every problem found, so a user sees them all at once:

- REGISTER STREAM only for CONSTRUCT and DESCRIBE (docs/semantics.md, *Registration*);
- every FROM STREAM has a window; durations are positive and at most ``MAX_DURATION`` (100 years, so that
  window arithmetic stays within the instants every layer represents); STEP is not longer than RANGE;
  TRIPLES n ≥ 1 (the parser refuses counts above ``MAX_COUNT``);
- a stream has one window per query (the same IRI with two different windows is refused; written twice
  with the same window it is one stream);
- AGGREGATE clauses (the C-SPARQL article, §3.4): the new variable occurs neither in WHERE nor in another
  clause; SUM, AVG, MIN and MAX take an argument; the argument and the group variables are bound by WHERE;
- csparql's extensions (docs/language.md): ``ENTAILMENT`` names known regimes, each once; a window-to-stream
  operator (``ISTREAM``, ``DSTREAM``, ``RSTREAM``) stands only in the top-level SELECT of a continuous query.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from rdflib import Variable

from csparql.core.language import syntax as sx
from csparql.core.language.errors import Diagnostic
from csparql.core.language.printer import format_window
from csparql.core.windows import MAX_DURATION, format_duration

AGGREGATE_CLAUSE_FUNCTIONS = ("COUNT", "SUM", "AVG", "MIN", "MAX")
# The entailment regimes a registration may switch on (docs/entailment.md), with what each infers.
ENTAILMENT_REGIMES = {
    "RDFS": "rdfs5, rdfs7, rdfs9 and rdfs11: the sub-property and sub-class hierarchies",
    "SAMEAS": "owl:sameAs: symmetry, transitivity and substitution in subject and object position",
}


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
    problems += _entailment(query)
    problems += _stream_operators(query)
    return problems


def _entailment(query: sx.Query) -> list[Diagnostic]:
    registration = query.registration
    if registration is None:
        return []
    problems = []
    known = " and ".join(f"{name} ({what})" for name, what in ENTAILMENT_REGIMES.items())
    spans = registration.entailment_spans or ()
    for index, name in enumerate(registration.entailment):
        span = spans[index] if index < len(spans) else registration.span
        if name not in ENTAILMENT_REGIMES:
            problems.append(Diagnostic(f"unknown entailment regime {name}; csparql knows {known}", span))
        elif name in registration.entailment[:index]:
            problems.append(Diagnostic(f"the entailment regime {name} is named twice", span))
    return problems


def _stream_operators(query: sx.Query) -> list[Diagnostic]:
    """ISTREAM/DSTREAM/RSTREAM only in the top-level SELECT, and ISTREAM/DSTREAM only where there is a
    previous evaluation to compare with (a registered query or one that reads a stream)."""
    problems = []
    form = query.form
    if isinstance(form, sx.SelectForm) and form.stream_operator in ("ISTREAM", "DSTREAM"):
        if query.registration is None and not query.streams:
            problems.append(
                Diagnostic(
                    f"{form.stream_operator} compares the results of each evaluation with those of the previous "
                    "one, but this query reads no stream and is not registered, so it is evaluated only once",
                    form.stream_operator_span,
                )
            )
    for sub in _sub_selects(query.where):
        if isinstance(sub.form, sx.SelectForm) and sub.form.stream_operator is not None:
            problems.append(
                Diagnostic(
                    f"{sub.form.stream_operator} turns the results of a whole query into a stream: it belongs in "
                    "the query's own SELECT, not in a sub-select",
                    sub.form.stream_operator_span,
                )
            )
    return problems


def _sub_selects(node) -> list[sx.Query]:
    """Every query nested in a syntax node (sub-selects, and sub-selects inside them)."""
    found: list[sx.Query] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, sx.SubSelect):
            found.append(current.query)
            stack.append(current.query.where)
        elif isinstance(current, (tuple, list)):
            stack.extend(current)
        elif dataclasses.is_dataclass(current) and not isinstance(current, type):
            stack.extend(getattr(current, f.name) for f in dataclasses.fields(current))
    return found


def _registration(query: sx.Query) -> list[Diagnostic]:
    registration = query.registration
    if registration is None:
        return []
    problems = []
    if registration.kind == "STREAM" and isinstance(query.form, (sx.SelectForm, sx.AskForm)):
        form = "SELECT" if isinstance(query.form, sx.SelectForm) else "ASK"
        problems.append(
            Diagnostic(
                f"only CONSTRUCT and DESCRIBE queries can be registered as STREAM; "
                f"this is a {form} query: write REGISTER QUERY {registration.name} instead of REGISTER STREAM "
                f"(the rule 'Registration' in docs/semantics.md)",
                query.form.span,
            )
        )
    every = registration.computed_every
    if every is not None and every.micros <= 0:
        problems.append(Diagnostic("COMPUTED EVERY must be a positive duration", every.span))
    elif every is not None and every.micros > MAX_DURATION:
        problems.append(_too_long("COMPUTED EVERY", every))
    return problems


def _too_long(what: str, duration: sx.Duration) -> Diagnostic:
    return Diagnostic(
        f"{what} is longer than {format_duration(MAX_DURATION)} (100 years), the longest duration csparql accepts",
        duration.span,
    )


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
            elif window.range.micros > MAX_DURATION:
                problems.append(_too_long("the window RANGE", window.range))
            if window.step is not None and window.step.micros <= 0:
                problems.append(Diagnostic("the window STEP must be a positive duration", window.step.span))
            elif window.step is not None and window.step.micros > MAX_DURATION:
                problems.append(_too_long("the window STEP", window.step))
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
        if clause.graph is not None:
            continue  # an RSP-QL window that is a named graph of its own: one of several windows over its stream
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
