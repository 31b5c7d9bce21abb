"""RSP-QL text to the syntax tree C-SPARQL queries have: ``parse_rspql(text)``.

RSP-QL is the query model of the W3C RDF Stream Processing community group, written as RSP4J and Yasper
write it (``FROM NAMED WINDOW <w> ON <s> [RANGE PT10M STEP PT1M]``, ISO 8601 durations) or as rsp-js and
rsp-rs do (``ON STREAM <s> [RANGE 600000 STEP 60000]``, milliseconds). Its grammar is ``rspql.lark`` on top
of the C-SPARQL one, and it is read into the same syntax tree, so that everything after the parser (checks,
algebra, optimizer, Spark compiler, engine, schedules) is the one C-SPARQL queries go through:

- ``REGISTER RSTREAM|ISTREAM|DSTREAM <output> AS`` is a registration named after the output IRI's last
  segment; RSTREAM of a CONSTRUCT or DESCRIBE is ``REGISTER STREAM`` (its output is a stream), of a SELECT or
  ASK ``REGISTER QUERY``; ISTREAM and DSTREAM are the SELECT's window-to-stream operator;
- ``FROM NAMED WINDOW <w> ON [STREAM] <s> [RANGE ρ STEP σ]`` is ``FROM NAMED STREAM <s> [RANGE ρ STEP σ]``
  and ``WINDOW <w> { … }`` is ``GRAPH <s> { … }``; ``[ROWS n]`` is ``[TRIPLES n]``;
- several different windows over one stream make each of that stream's windows a named graph of its own,
  named by the window: the clause's ``FromStream.graph`` and the ``GraphPattern`` of ``WINDOW <w> { … }``
  are ``<w>`` (C-SPARQL has no spelling for this; identical windows over one stream stay one graph ``<s>``);
- windows with the same name, ``WINDOW ?w``, static windows ``[FROM … TO …]``, durations in years or months,
  and the C-SPARQL-only forms are refused, each with a message that names the construct and its place.

How the query spelled what the tree says its own way (the output IRI, window names, ``ON STREAM``) is kept in
fields that take no part in equality (``syntax._spelling``), so ``csparql.core.language.rspql_printer`` prints
the query back as it was written and an RSP-QL query's tree equals its C-SPARQL equivalent's.
"""

from __future__ import annotations

import dataclasses
import re
from decimal import Decimal
from fractions import Fraction

from lark import Token, Tree
from rdflib import URIRef

from csparql.core.language import syntax as sx
from csparql.core.language.errors import Diagnostic, QuerySemanticError, Span, UnsupportedFeatureError, shorten
from csparql.core.language import parse_tree as pt
from csparql.core.language.builder import TreeBuilder
from csparql.core.language.parser import parse_with
from csparql.core.windows import MICROS_PER

QUERY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
# Words that cannot be C-SPARQL query names (its grammar reads them as the keywords after the name).
RESERVED_NAMES = ("AS", "COMPUTED", "EVERY", "ENTAILMENT", "SELECT", "CONSTRUCT", "ASK", "DESCRIBE", "PREFIX", "BASE")
_ISO_DURATION = re.compile(
    r"P(?:(?P<W>\d+(?:[.,]\d+)?)W)?(?:(?P<D>\d+(?:[.,]\d+)?)D)?"
    r"(?:T(?:(?P<H>\d+(?:[.,]\d+)?)H)?(?:(?P<M>\d+(?:[.,]\d+)?)M)?(?:(?P<S>\d+(?:[.,]\d+)?)S)?)?",
    re.IGNORECASE,
)
_ISO_MICROS = {"W": 7 * MICROS_PER["d"], "D": MICROS_PER["d"], "H": MICROS_PER["h"], "M": MICROS_PER["m"],
               "S": MICROS_PER["s"]}
# The units a normalised duration is written in, largest first (the C-SPARQL tree's canonical units).
_UNITS = (("d", MICROS_PER["d"]), ("h", MICROS_PER["h"]), ("m", MICROS_PER["m"]), ("s", MICROS_PER["s"]),
          ("ms", MICROS_PER["ms"]), ("us", 1))
_WINDOW_FORM = "FROM NAMED WINDOW <w> ON <stream> [RANGE PT10M STEP PT1M] and WINDOW <w> { … }"


def parse_rspql(text: str, source_name: str = "<query>") -> sx.Query:
    """Parse RSP-QL text into the syntax tree of the equivalent C-SPARQL query.

    Raises ``QueryError`` (with line, column and caret) as ``csparql.core.language.parser.parse`` does: a syntax
    error, an RSP-QL construct csparql cannot evaluate, or a C-SPARQL construct written in an RSP-QL query.
    """
    return parse_with(text, source_name, "rspql", RspqlTreeBuilder)


def query_name_of(output: URIRef) -> str | None:
    """The query name an RSP-QL output IRI gives: its last segment (after '/', '#' or ':'), when that is a
    C-SPARQL query name; None otherwise."""
    segment = re.split(r"[/#:]", str(output).rstrip("/"))[-1]
    if not QUERY_NAME.fullmatch(segment) or segment.upper() in RESERVED_NAMES:
        return None
    return segment


def duration_of_micros(micros: int, span: Span | None = None) -> sx.Duration:
    """The syntax-tree duration of a number of microseconds, in the largest unit that divides it (the unit a
    C-SPARQL query would normally write: 600,000,000 µs is ``10m``)."""
    if micros == 0:
        return sx.Duration(amount=Decimal(0), unit="s", micros=0, span=span)
    unit, size = next((u, s) for u, s in _UNITS if micros % s == 0)
    return sx.Duration(amount=Decimal(micros // size), unit=unit, micros=micros, span=span)


def iso_duration_micros(text: str) -> int:
    """The microseconds of an ISO 8601 duration of days, hours, minutes and seconds (weeks too), e.g.
    ``PT10M`` or ``P1DT2H30M``; ``ValueError`` saying what is wrong otherwise (years and months have no fixed
    length, an empty duration, a duration finer than a microsecond)."""
    match = _ISO_DURATION.fullmatch(text)
    if match is None:
        if re.fullmatch(r"P(?:[\d.,]+[YMWD])*(?:T(?:[\d.,]+[HMS])*)?", text, re.IGNORECASE) and re.search(
            r"[YM]", text.upper().split("T")[0][1:]
        ):
            raise ValueError(
                f"the duration {text} counts years or months, which have no fixed length; write it in days, "
                "hours, minutes or seconds (P30D, PT12H)"
            )
        raise ValueError(
            f"'{shorten(text)}' is not an ISO 8601 duration; write e.g. PT10M (10 minutes), PT30S, PT1H30M or P1D"
        )
    parts = {unit: amount for unit, amount in match.groupdict().items() if amount is not None}
    if not parts or text.upper().endswith("T"):
        raise ValueError(f"the duration {text} has no amount; write e.g. PT10M (10 minutes), PT30S or P1D")
    micros = sum(Fraction(amount.replace(",", ".")) * _ISO_MICROS[unit] for unit, amount in parts.items())
    if micros.denominator != 1:
        raise ValueError(f"the duration {text} is not a whole number of microseconds")
    return int(micros)


class RspqlTreeBuilder(TreeBuilder):
    """Builds the C-SPARQL syntax tree from the parse tree of an RSP-QL query: the C-SPARQL builder with the
    RSP-QL rules added (registration, named windows, ``WINDOW <w> { … }``) and the C-SPARQL-only ones refused."""

    UNION_OPERANDS = {**TreeBuilder.UNION_OPERANDS, "window_graph_pattern": "window_graph_pattern"}

    def __init__(self) -> None:
        super().__init__()
        # Each declared window by name: its clause (the stream it reads, its window) and where it was declared.
        self.windows: dict[URIRef, tuple[sx.FromStream, Span | None]] = {}

    def build(self, tree: Tree) -> sx.Query:
        leading = pt.child(tree, "leading_prologue")
        registration_tree = pt.child(tree, "registration", "rspql_registration")
        if registration_tree is not None and registration_tree.data == "registration":
            raise UnsupportedFeatureError(
                Diagnostic(
                    f"REGISTER {str(pt.first_token(pt.child(registration_tree, 'registration_kind'))).upper()} "
                    "<name> is C-SPARQL; an RSP-QL query registers with REGISTER RSTREAM <output-iri> AS (or "
                    "ISTREAM, DSTREAM)",
                    Span.of_meta(registration_tree.meta),
                )
            )
        built = self.query(pt.child(tree, "query"), leading=leading.children if leading is not None else ())
        if registration_tree is not None:
            built = self.registered(built, registration_tree)
        return built

    def registered(self, query: sx.Query, tree: Tree) -> sx.Query:
        """``query`` with the registration ``REGISTER RSTREAM|ISTREAM|DSTREAM <output> AS`` says."""
        operator_token = pt.first_token(pt.child(tree, "stream_operator"))
        operator = str(operator_token).upper()
        iri_tree = pt.child(tree, "iri")
        output = self.iri(iri_tree)
        name = query_name_of(output)
        if name is None:
            raise QuerySemanticError(
                Diagnostic(
                    f"the output IRI <{shorten(str(output), 60)}> must end with a name csparql can give the query, "
                    "its DAG and its result tables: letters, digits, '_' and '-', not starting with a digit, "
                    "e.g. <http://example.org/out>",
                    Span.of_meta(iri_tree.meta),
                )
            )
        form = query.form
        if isinstance(form, sx.SelectForm):
            kind = "QUERY"
            if operator != "RSTREAM":  # RSTREAM is what every evaluation emits anyway: the tree leaves it out
                form = dataclasses.replace(form, stream_operator=operator, stream_operator_span=Span.of_token(operator_token))
        elif operator != "RSTREAM":
            what = type(form).__name__.removesuffix("Form").upper()
            raise UnsupportedFeatureError(
                Diagnostic(
                    f"{operator} of a{'n' if what == 'ASK' else ''} {what} query is not supported: csparql's {operator} "
                    f"compares the rows of a SELECT's evaluations; register the {what} with REGISTER RSTREAM",
                    Span.of_token(operator_token),
                )
            )
        else:
            kind = "QUERY" if isinstance(form, sx.AskForm) else "STREAM"
        registration = sx.Registration(kind=kind, name=name, span=Span.of_meta(tree.meta), output=output)
        return dataclasses.replace(query, form=form, registration=registration)

    # C-SPARQL constructs have RSP-QL spellings, or none

    def select_clause(self, tree: Tree) -> sx.SelectForm:
        operator = pt.child(tree, "stream_operator")
        if operator is not None:
            word = str(pt.first_token(operator)).upper()
            raise UnsupportedFeatureError(
                Diagnostic(
                    f"SELECT {word} is the C-SPARQL spelling; in RSP-QL the operator goes in the registration: "
                    f"REGISTER {word} <output-iri> AS SELECT …",
                    Span.of_token(pt.first_token(operator)),
                )
            )
        return super().select_clause(tree)

    def aggregate_clause(self, tree: Tree) -> sx.AggregateClause:
        raise UnsupportedFeatureError(
            Diagnostic(
                "AGGREGATE clauses are C-SPARQL, not RSP-QL: use GROUP BY with aggregates in SELECT, or write the "
                "query in C-SPARQL",
                Span.of_token(pt.token(tree, "AGGREGATE")),
            )
        )

    def timestamp_call(self, tree: Tree):
        raise UnsupportedFeatureError(
            Diagnostic(
                "timestamp() is a C-SPARQL function that RSP-QL does not have: write the query in C-SPARQL "
                "to use it",
                Span.of_token(pt.token(tree, "TIMESTAMP")),
            )
        )

    # windows

    def dataset(self, tree: Tree) -> sx.DatasetClause:
        if tree.data in ("from_stream", "from_named_stream"):
            raise UnsupportedFeatureError(
                Diagnostic(f"FROM STREAM is C-SPARQL; in RSP-QL write {_WINDOW_FORM}", Span.of_meta(tree.meta))
            )
        if not tree.data.startswith("from_named_window"):
            return super().dataset(tree)
        name_tree, stream_tree = pt.children(tree, "iri")
        name, stream = self.iri(name_tree), self.iri(stream_tree)
        window = self.window(next(c for c in pt.subtrees(tree) if c.data.endswith("_window")))
        clause = sx.FromStream(
            stream, window, named=True, span=Span.of_meta(stream_tree.meta), window_name=name,
            on_stream=tree.data == "from_named_window_on_stream",
        )
        self.declare(clause, Span.of_meta(name_tree.meta))
        return clause

    def declare(self, clause: sx.FromStream, span: Span | None) -> None:
        """Remember a window by its name; refuses a name declared twice."""
        name = clause.window_name
        if name in self.windows:
            raise QuerySemanticError(
                Diagnostic(f"the window <{shorten(str(name), 60)}> is declared twice; give each window its own name", span)
            )
        self.windows[name] = (clause, span)

    def has_several_windows(self, stream: URIRef) -> bool:
        """Whether the query reads ``stream`` through several different windows, which makes each of its
        windows a named graph of its own, named by the window (else the window is the graph ``stream``)."""
        return len({_window_key(c.window) for c, _ in self.windows.values() if c.iri == stream}) > 1

    def query_form(self, tree: Tree) -> dict:
        built = super().query_form(tree)
        built["datasets"] = tuple(
            dataclasses.replace(clause, graph=clause.window_name)
            if isinstance(clause, sx.FromStream) and clause.window_name is not None
            and self.has_several_windows(clause.iri) else clause
            for clause in built["datasets"]
        )
        return built

    def window(self, tree: Tree) -> sx.WindowSpec:
        span = Span.of_meta(tree.meta)
        if tree.data == "static_window":
            raise UnsupportedFeatureError(
                Diagnostic(
                    "a static window [FROM … TO …] is not supported: csparql's windows end at each evaluation's "
                    "instant; write [RANGE … STEP …] and evaluate the instant you want with 'csparql run --at'",
                    span,
                )
            )
        if tree.data == "count_window":
            count_tree = pt.child(tree, "count_number")
            count = self.whole_number(count_tree, "ROWS", allow_negative=True)
            if count < 1:
                raise QuerySemanticError(
                    Diagnostic(f"a count window needs at least one triple: ROWS {count} is not allowed",
                               Span.of_token(pt.first_token(count_tree)))
                )
            return sx.PhysicalWindowSpec(count=count, span=Span.of_token(pt.first_token(count_tree)))
        if tree.data == "iso_logical_window":
            range_token, step_token = [c for c in tree.children if pt.is_token(c, "ISO_DURATION")]
            return sx.LogicalWindowSpec(self.iso_duration(range_token), self.iso_duration(step_token), span=span)
        range_tree, step_tree = pt.children(tree, "count_number")
        return sx.LogicalWindowSpec(
            self.milliseconds(range_tree, "RANGE"), self.milliseconds(step_tree, "STEP"), span=span
        )

    def iso_duration(self, token: Token) -> sx.Duration:
        span = Span.of_token(token)
        try:
            micros = iso_duration_micros(str(token))
        except ValueError as error:
            raise QuerySemanticError(Diagnostic(str(error), span)) from None
        return duration_of_micros(micros, span)

    def milliseconds(self, tree: Tree, clause: str) -> sx.Duration:
        """A duration written as a whole number of milliseconds (``ON STREAM`` windows)."""
        token = pt.first_token(tree)
        span = Span.of_token(token)
        if token.type not in ("INTEGER", "INTEGER_POSITIVE", "INTEGER_NEGATIVE"):
            raise QuerySemanticError(
                Diagnostic(
                    f"{clause} of an ON STREAM window takes a whole number of milliseconds, not "
                    f"{shorten(str(token))}", span
                )
            )
        digits = str(token).lstrip("+-").lstrip("0")
        if len(digits) > 16:  # more than 100 years: the window checks say so; int() needs no 4,300-digit text
            digits = "9" * 16
        milliseconds = int(digits or "0") * (-1 if str(token).startswith("-") else 1)
        return duration_of_micros(milliseconds * MICROS_PER["ms"], span)

    # WINDOW <w> { … }

    def graph_pattern(self, tree: Tree) -> sx.GraphPattern:
        pattern = super().graph_pattern(tree)
        if isinstance(pattern.name, URIRef) and self.has_several_windows(pattern.name):
            names = " or ".join(f"WINDOW <{shorten(str(n), 40)}>" for n, (c, _) in self.windows.items()
                                if c.iri == pattern.name)
            raise QuerySemanticError(
                Diagnostic(
                    f"GRAPH <{shorten(str(pattern.name), 60)}> names a stream the query reads through several "
                    f"different windows, each a graph of its own: say which, with {names} {{ … }}",
                    Span.of_meta(pt.subtrees(tree)[0].meta),
                )
            )
        return pattern

    def window_graph_pattern(self, tree: Tree) -> sx.GraphPattern:
        name_node, pattern_tree = pt.subtrees(tree)
        if name_node.data == "var":
            raise UnsupportedFeatureError(
                Diagnostic(
                    "WINDOW ?variable is not supported: csparql reads each window by its name; write "
                    "WINDOW <w> { … } for each window",
                    Span.of_meta(name_node.meta),
                )
            )
        name = self.iri(name_node)
        declared = self.windows.get(name)
        if declared is None:
            raise QuerySemanticError(
                Diagnostic(
                    f"the window <{shorten(str(name), 60)}> is not declared: add FROM NAMED WINDOW "
                    f"<{shorten(str(name), 60)}> ON <stream> [RANGE PT10M STEP PT1M] before WHERE",
                    Span.of_meta(name_node.meta),
                )
            )
        graph = name if self.has_several_windows(declared[0].iri) else declared[0].iri
        return sx.GraphPattern(graph, self.group_graph_pattern(pattern_tree), span=Span.of_meta(tree.meta), window=name)


def _window_key(window: sx.WindowSpec | None):
    if isinstance(window, sx.LogicalWindowSpec):
        return ("logical", window.range.micros, window.step.micros if window.step is not None else window.range.micros)
    if isinstance(window, sx.PhysicalWindowSpec):
        return ("physical", window.count)
    return None

