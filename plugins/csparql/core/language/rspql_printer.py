"""Syntax tree to RSP-QL text: ``format_rspql(query)``, and what of a query RSP-QL cannot say.

The RSP-QL printer is the C-SPARQL printer (``csparql.core.language.printer``) with RSP-QL's spellings of the
registration, the windows and the window patterns. A tree read from RSP-QL is printed as it was written
(its output IRI, window names, ``ON`` with ISO 8601 durations or ``ON STREAM`` with milliseconds), so that
parsing the printed text gives the same tree and printing that gives the same text. A tree read from C-SPARQL
(``csparql translate --to rspql``) is printed when ``untranslatable(query)`` is empty; its windows get the
names ``<w1>``, ``<w2>``, … and its registration the output IRI ``<name>``. The other way, what of an RSP-QL
query C-SPARQL cannot say is ``untranslatable_to_csparql(query)`` (several different windows over one stream).
"""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal

from rdflib import URIRef, Variable

from csparql.core.language import expressions as ex
from csparql.core.language import syntax as sx
from csparql.core.language.errors import Diagnostic, QuerySemanticError
from csparql.core.language.printer import _Printer
from csparql.core.windows import MICROS_PER

PHYSICAL_WINDOW_PERIOD = 60_000_000
"""How often a query over physical windows only is evaluated without COMPUTED EVERY (docs/semantics.md,
*When a query is evaluated*)."""


class NotExpressibleError(QuerySemanticError):
    """A query that the other dialect cannot say; each diagnostic names a construct and where it is."""


def format_rspql(query: sx.Query) -> str:
    """The query as RSP-QL text, ending with a newline; ``NotExpressibleError`` listing every construct RSP-QL
    cannot say (``untranslatable``) when there is one."""
    problems = untranslatable(query)
    if problems:
        raise NotExpressibleError(problems)
    return _RspqlPrinter(query).query(query) + "\n"


def iso_duration(micros: int) -> str:
    """A duration as ISO 8601 text in days, hours, minutes and seconds: ``PT10M``, ``P1DT2H``, ``PT0.5S``."""
    days, rest = divmod(micros, MICROS_PER["d"])
    hours, rest = divmod(rest, MICROS_PER["h"])
    minutes, rest = divmod(rest, MICROS_PER["m"])
    seconds = Decimal(rest) / Decimal(MICROS_PER["s"])
    time = "".join(
        f"{amount}{unit}" for amount, unit in ((hours, "H"), (minutes, "M")) if amount
    ) + (f"{format(seconds.normalize(), 'f')}S" if rest else "")
    text = "P" + (f"{days}D" if days else "") + (f"T{time}" if time else "")
    return text if text != "P" else "PT0S"


def format_rspql_window(clause: sx.FromStream) -> str:
    """A window as RSP-QL writes it: ``[RANGE PT10M STEP PT1M]`` after ``ON``, ``[RANGE 600000 STEP 60000]``
    after ``ON STREAM`` (see ``_in_milliseconds``), ``[ROWS n]`` for a count window."""
    window = clause.window
    if isinstance(window, sx.PhysicalWindowSpec):
        return f"[ROWS {window.count}]"
    step = window.step if window.step is not None else window.range  # TUMBLING: the step is the range
    if _in_milliseconds(clause):
        return f"[RANGE {window.range.micros // 1000} STEP {step.micros // 1000}]"
    return f"[RANGE {iso_duration(window.range.micros)} STEP {iso_duration(step.micros)}]"


def _in_milliseconds(clause: sx.FromStream) -> bool:
    """Whether a window is printed ``ON STREAM`` in milliseconds: as it was written, when its durations are
    whole milliseconds (a C-SPARQL ``1500us`` is not, and goes ``ON`` in ISO 8601)."""
    window = clause.window
    if not clause.on_stream:
        return False
    if isinstance(window, sx.LogicalWindowSpec):
        return all(d.micros % 1000 == 0 for d in (window.range, window.step) if d is not None)
    return True


def untranslatable(query: sx.Query) -> list[Diagnostic]:
    """What of a query RSP-QL cannot express, one diagnostic per construct (with its place when known);
    empty when ``format_rspql`` can print it."""
    problems: list[Diagnostic] = []
    registration = query.registration
    if registration is not None:
        every = registration.computed_every
        if every is not None and every.micros != _default_period(query):
            problems.append(Diagnostic(
                "COMPUTED EVERY cannot be expressed in RSP-QL, where a query is evaluated at every STEP of its "
                "windows (drop it, or make it the STEP)", every.span or registration.span))
        if registration.entailment:
            problems.append(Diagnostic("ENTAILMENT cannot be expressed in RSP-QL", registration.span))
        if registration.kind == "QUERY" and isinstance(query.form, (sx.ConstructForm, sx.DescribeForm)):
            problems.append(Diagnostic(
                "REGISTER QUERY of a CONSTRUCT or DESCRIBE (results kept in a table) cannot be expressed in RSP-QL, "
                "whose REGISTER RSTREAM of a CONSTRUCT makes a stream: write REGISTER STREAM to get one",
                registration.span))
    elif isinstance(query.form, sx.SelectForm) and query.form.stream_operator in ("ISTREAM", "DSTREAM"):
        problems.append(Diagnostic(
            f"{query.form.stream_operator} without REGISTER cannot be expressed in RSP-QL, where the operator is "
            f"written in the registration (REGISTER {query.form.stream_operator} <output> AS)",
            query.form.stream_operator_span))
    # Windows a C-SPARQL query named by their streams (an RSP-QL query's windows have names of their own, and
    # its GRAPH ?g is printed back as it was written).
    streams = {clause.iri for clause in query.streams if clause.window_name is None}
    for clause in query.streams:
        if not clause.named:
            problems.append(Diagnostic(
                f"FROM STREAM <{clause.iri}> puts the window in the default graph, which RSP-QL cannot express "
                "(its windows are named graphs only): write FROM NAMED STREAM and GRAPH <stream> { … }",
                clause.span))
    for node in _nodes(query):
        if isinstance(node, sx.AggregateClause):
            problems.append(Diagnostic(
                "AGGREGATE clauses cannot be expressed in RSP-QL (they keep every binding; GROUP BY reduces)",
                node.span))
        elif isinstance(node, ex.Timestamp):
            problems.append(Diagnostic("timestamp() cannot be expressed in RSP-QL", node.stream_span))
        elif isinstance(node, sx.GraphPattern) and isinstance(node.name, Variable) and streams:
            problems.append(Diagnostic(
                f"GRAPH {node.name.n3()} over a query's windows cannot be expressed in RSP-QL (WINDOW ?w is not "
                "supported): write one GRAPH <stream> { … } per stream", node.span))
    return problems


def untranslatable_to_csparql(query: sx.Query) -> list[Diagnostic]:
    """What of a query C-SPARQL cannot express, one diagnostic per construct; empty when
    ``csparql.core.language.printer.format_query`` prints it as it means. C-SPARQL names a stream's window by the
    stream (``FROM NAMED STREAM <s> [window]``, ``GRAPH <s>``), so it says one window per stream: an RSP-QL
    query reading one stream through several different windows (``FromStream.graph``) has no C-SPARQL form."""
    problems: list[Diagnostic] = []
    first: dict[URIRef, sx.FromStream] = {}
    for clause in query.streams:
        if clause.graph is None:
            continue
        earlier = first.setdefault(clause.iri, clause)
        if earlier is not clause:
            problems.append(Diagnostic(
                f"the windows <{earlier.window_name}> {format_rspql_window(earlier)} and <{clause.window_name}> "
                f"{format_rspql_window(clause)} both read the stream <{clause.iri}>: C-SPARQL names a stream's "
                "window by the stream (FROM NAMED STREAM <s> [window], GRAPH <s>), so it has one window per stream "
                "and query; register one C-SPARQL query per window", clause.span))
    return problems


def _nodes(root):
    """Every syntax node and expression inside ``root``, sub-selects and EXISTS patterns included."""
    stack = [root]
    while stack:
        current = stack.pop()
        if isinstance(current, (tuple, list)):
            stack.extend(current)
        elif dataclasses.is_dataclass(current) and not isinstance(current, type):
            yield current
            stack.extend(getattr(current, f.name) for f in dataclasses.fields(current))


def _default_period(query: sx.Query) -> int | None:
    """How often the query is evaluated without COMPUTED EVERY (docs/semantics.md, *When a query is evaluated*;
    ``csparql.core.schedule``): the greatest common divisor of its logical windows' steps and, for physical
    windows, a minute."""
    periods = []
    for clause in query.streams:
        window = clause.window
        if isinstance(window, sx.LogicalWindowSpec):
            periods.append((window.step or window.range).micros)
        elif isinstance(window, sx.PhysicalWindowSpec):
            periods.append(PHYSICAL_WINDOW_PERIOD)
    return math.gcd(*periods) if periods else None


class _RspqlPrinter(_Printer):
    def __init__(self, query: sx.Query):
        super().__init__(query.prologue.prefix_map)
        # Each stream's window name: as written, else <w1>, <w2>, … in the order of the FROM clauses.
        self.window_names: dict[URIRef, URIRef] = {}
        for index, clause in enumerate(query.streams, start=1):
            self.window_names.setdefault(clause.iri, clause.window_name or URIRef(f"w{index}"))

    def query(self, query: sx.Query, depth: int = 0) -> str:
        query = dataclasses.replace(query, datasets=_one_window_per_stream(query.datasets))
        registration = query.registration
        if registration is None:
            return super().query(query, depth)
        form = query.form
        operator = "RSTREAM"
        if isinstance(form, sx.SelectForm):
            operator = form.stream_operator or "RSTREAM"
            form = dataclasses.replace(form, stream_operator=None)
        text = super().query(dataclasses.replace(query, registration=None, form=form), depth)
        lines = text.split("\n")
        prologue = (query.prologue.base is not None) + len(query.prologue.prefixes)
        output = registration.output if registration.output is not None else URIRef(registration.name)
        lines.insert(prologue, f"REGISTER {operator} {self.term(output)} AS")
        return "\n".join(lines)

    def dataset(self, clause: sx.DatasetClause) -> str:
        if isinstance(clause, sx.FromGraph):
            return super().dataset(clause)
        name = clause.window_name or self.window_names[clause.iri]
        on = "ON STREAM" if _in_milliseconds(clause) else "ON"
        return f"FROM NAMED WINDOW {self.term(name)} {on} {self.term(clause.iri)} {format_rspql_window(clause)}"

    def union_operand(self, operand, depth: int) -> str:
        if isinstance(operand, sx.GraphPattern) and (operand.window is not None or operand.name in self.window_names):
            name = operand.window or self.window_names[operand.name]
            return f"WINDOW {self.term(name)} " + self.group(operand.group, depth)
        return super().union_operand(operand, depth)


def _one_window_per_stream(datasets: tuple[sx.DatasetClause, ...]) -> tuple[sx.DatasetClause, ...]:
    """The dataset clauses, a C-SPARQL stream named twice (with the same window: one stream) kept once, since
    its windows get one name; RSP-QL windows, which have names of their own, are all kept."""
    kept, seen = [], set()
    for clause in datasets:
        if isinstance(clause, sx.FromStream) and clause.window_name is None:
            if clause.iri in seen:
                continue
            seen.add(clause.iri)
        kept.append(clause)
    return tuple(kept)
