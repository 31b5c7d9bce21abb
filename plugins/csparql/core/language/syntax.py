"""The syntax tree of a C-SPARQL query: what was written, with prefixes resolved.

The parser builds these nodes from the text; ``csparql.core.algebra.translate`` builds the algebra from them;
``csparql.core.language.printer`` prints them back as normalised C-SPARQL. The tree keeps the written structure
(property lists, collections, blank-node property lists, the order of group elements) so that printing and
parsing again gives the same tree. Spans are kept where semantic checks need to point at something; they
never take part in equality.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from rdflib import URIRef, Variable

from csparql.core.language.errors import Span
from csparql.core.language.expressions import Expr
from csparql.core.terms import Term


def _span() -> Span | None:
    return field(default=None, compare=False, repr=False)


def _spelling(default=None):
    """A field that records how an RSP-QL query spelled something the C-SPARQL tree says in its own way (the
    output IRI, window names, ``ON STREAM``): kept for printing RSP-QL back, and, like spans, no part of
    equality, so that an RSP-QL query and its C-SPARQL equivalent have equal trees."""
    return field(default=default, compare=False)


# --- C-SPARQL registration and windows -------------------------------------------------------------------


@dataclass(frozen=True)
class Duration:
    """A written duration such as ``10 MIN``: its amount, its unit as written, and its value in microseconds."""

    amount: Decimal
    unit: str
    micros: int
    span: Span | None = _span()


@dataclass(frozen=True)
class Registration:
    """``REGISTER QUERY|STREAM name [COMPUTED EVERY d] [ENTAILMENT r, …] AS`` (the C-SPARQL article, §3.3;
    ENTAILMENT is a csparql extension). ``entailment`` holds the regime names as written, upper-cased; they are
    checked by ``csparql.core.language.checks``."""

    kind: str  # "QUERY" or "STREAM"
    name: str
    computed_every: Duration | None = None
    entailment: tuple[str, ...] = ()
    span: Span | None = _span()
    entailment_spans: tuple[Span | None, ...] = _span()
    output: URIRef | None = _spelling()  # RSP-QL: the IRI of REGISTER RSTREAM <output> AS, whose name is ``name``


@dataclass(frozen=True)
class LogicalWindowSpec:
    """``[RANGE ρ STEP σ]`` or ``[RANGE ρ TUMBLING]`` (the C-SPARQL article, §3.2 and §4.2)."""

    range: Duration
    step: Duration | None  # None for TUMBLING
    span: Span | None = _span()


@dataclass(frozen=True)
class PhysicalWindowSpec:
    """``[TRIPLES n]`` (the C-SPARQL article, §3.2 and §4.2); ``with_range`` records the ``[RANGE TRIPLES n]``
    spelling the article also prints."""

    count: int
    with_range: bool = False
    span: Span | None = _span()


WindowSpec = LogicalWindowSpec | PhysicalWindowSpec


@dataclass(frozen=True)
class FromGraph:
    """``FROM <g>`` or ``FROM NAMED <g>``."""

    iri: URIRef
    named: bool = False
    span: Span | None = _span()


@dataclass(frozen=True)
class FromStream:
    """``FROM [NAMED] STREAM <s> [window]`` (the C-SPARQL article, §3.2); ``window`` is None when it was left
    out (an error)."""

    iri: URIRef
    window: WindowSpec | None
    named: bool = False
    span: Span | None = _span()
    window_name: URIRef | None = _spelling()  # RSP-QL: FROM NAMED WINDOW <window_name> ON <iri>
    on_stream: bool = _spelling(False)  # RSP-QL: written ON STREAM (durations in milliseconds), else ON (ISO 8601)
    # The named graph this window is when it is not the stream's IRI: an RSP-QL window's name, given when the
    # query reads its stream through several different windows (each is then a named graph of its own).
    graph: URIRef | None = None


DatasetClause = FromGraph | FromStream


@dataclass(frozen=True)
class AggregateClause:
    """``AGGREGATE { (?v, F[(?arg)], {?g…}) [FILTER(…)] }`` (the C-SPARQL article, §3.4 and §4.1;
    docs/semantics.md, *The AGGREGATE clause*).

    ``argument`` is a variable, ``"*"``, or None when the function was written without one.
    """

    var: Variable
    function: str
    argument: Variable | str | None
    distinct: bool
    groups: tuple[Variable, ...]
    filter: Expr | None = None
    braced_groups: bool = True
    span: Span | None = _span()
    var_span: Span | None = _span()
    function_span: Span | None = _span()
    argument_span: Span | None = _span()
    group_spans: tuple[Span | None, ...] = _span()


# --- property paths (§9) -------------------------------------------------------------------------------


class Path:
    """Base of the property-path nodes; a plain predicate in a path is a ``URIRef``."""


@dataclass(frozen=True)
class SequencePath(Path):
    """``p1 / p2 / …``"""

    steps: tuple[PathExpr, ...]


@dataclass(frozen=True)
class AlternativePath(Path):
    """``p1 | p2 | …``"""

    options: tuple[PathExpr, ...]


@dataclass(frozen=True)
class InversePath(Path):
    """``^p``"""

    path: PathExpr


@dataclass(frozen=True)
class ModifiedPath(Path):
    """``p?``, ``p*`` or ``p+``."""

    path: PathExpr
    modifier: str


@dataclass(frozen=True)
class NegatedPropertySet(Path):
    """``!(p1 | ^p2 | …)``: each member is (iri, inverse)."""

    members: tuple[tuple[URIRef, bool], ...]


PathExpr = Path | URIRef


# --- triples -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collection:
    """An RDF collection ``( a b c )`` in a triple pattern."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class BlankNodePropertyList:
    """``[ p o ; … ]`` in a triple pattern."""

    properties: PropertyList


@dataclass(frozen=True)
class Anonymous:
    """``[]``: a fresh blank node. Each occurrence is distinct, so it is a node of its own, not a term."""

    index: int


Node = Term | Collection | BlankNodePropertyList | Anonymous
Verb = PathExpr | Variable
PropertyList = tuple[tuple[Verb, tuple[Node, ...]], ...]


@dataclass(frozen=True)
class TriplesSameSubject:
    """A subject with its property list (possibly empty for a lone collection or ``[ … ]``)."""

    subject: Node
    properties: PropertyList
    span: Span | None = _span()


# --- graph patterns ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TriplesBlock:
    """Consecutive triple patterns of a group."""

    triples: tuple[TriplesSameSubject, ...]


@dataclass(frozen=True)
class GroupPattern:
    """``{ … }``: the elements of a group in written order."""

    elements: tuple[GroupElement, ...]
    span: Span | None = _span()


@dataclass(frozen=True)
class SubSelect:
    """A SELECT nested in a group pattern."""

    query: Query


@dataclass(frozen=True)
class UnionPattern:
    """``A UNION B UNION …``; each operand is a GroupPattern or a GraphPattern (as printed
    in the C-SPARQL article, §5.8)."""

    operands: tuple[GroupPattern | GraphPattern, ...]


@dataclass(frozen=True)
class OptionalPattern:
    group: GroupPattern


@dataclass(frozen=True)
class MinusPattern:
    group: GroupPattern


@dataclass(frozen=True)
class GraphPattern:
    """``GRAPH <g>|?g { … }``; for a stream IRI it reads that stream's window (docs/semantics.md,
    *The dataset of an evaluation*), for the ``graph`` of a stream's window (``FromStream.graph``) that window."""

    name: URIRef | Variable
    group: GroupPattern
    span: Span | None = _span()
    # RSP-QL: written WINDOW <window> { … } (``name`` is its stream, or the window itself when it is a graph)
    window: URIRef | None = _spelling()


@dataclass(frozen=True)
class ServicePattern:
    """``SERVICE [SILENT] <s> { … }``: parsed only to be refused with a clear message."""

    endpoint: URIRef | Variable
    silent: bool
    group: GroupPattern
    span: Span | None = _span()


@dataclass(frozen=True)
class FilterPattern:
    expression: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class BindPattern:
    expression: Expr
    var: Variable
    span: Span | None = _span()
    var_span: Span | None = _span()


@dataclass(frozen=True)
class ValuesBlock:
    """Inline data: variables and rows (None marks UNDEF)."""

    vars: tuple[Variable, ...]
    rows: tuple[tuple[Term | None, ...], ...]
    one_var_form: bool = False
    span: Span | None = _span()
    row_spans: tuple[Span | None, ...] = _span()


GroupElement = (
    TriplesBlock
    | GroupPattern
    | SubSelect
    | UnionPattern
    | OptionalPattern
    | MinusPattern
    | GraphPattern
    | ServicePattern
    | FilterPattern
    | BindPattern
    | ValuesBlock
)


# --- query forms and modifiers -------------------------------------------------------------------------


@dataclass(frozen=True)
class SelectItem:
    """A projected variable, or ``(expression AS ?var)``."""

    var: Variable
    expression: Expr | None = None
    span: Span | None = _span()
    expression_span: Span | None = _span()


@dataclass(frozen=True)
class SelectForm:
    """``SELECT [ISTREAM|DSTREAM|RSTREAM] [DISTINCT|REDUCED] items`` (items None for ``*``); ``braced`` records
    ``SELECT { ?a ?b }``; ``stream_operator`` is the window-to-stream operator as written (None when absent,
    which means RSTREAM)."""

    modifier: str | None
    items: tuple[SelectItem, ...] | None
    braced: bool = False
    stream_operator: str | None = None
    span: Span | None = _span()
    stream_operator_span: Span | None = _span()


@dataclass(frozen=True)
class ConstructForm:
    """``CONSTRUCT { template }``, or ``CONSTRUCT WHERE { triples }`` when ``template`` is None."""

    template: tuple[TriplesSameSubject, ...] | None
    span: Span | None = _span()


@dataclass(frozen=True)
class DescribeForm:
    """``DESCRIBE terms`` (None for ``*``)."""

    terms: tuple[URIRef | Variable, ...] | None
    span: Span | None = _span()


@dataclass(frozen=True)
class AskForm:
    span: Span | None = _span()


QueryForm = SelectForm | ConstructForm | DescribeForm | AskForm


@dataclass(frozen=True)
class GroupCondition:
    """A GROUP BY condition: an expression, optionally bound to a variable with AS."""

    expression: Expr
    var: Variable | None = None
    bracketed: bool = False


@dataclass(frozen=True)
class OrderCondition:
    """An ORDER BY condition; ``direction`` is None, ``"ASC"`` or ``"DESC"``."""

    expression: Expr
    direction: str | None = None


@dataclass(frozen=True)
class Prologue:
    """BASE and PREFIX declarations in written order."""

    base: str | None = None
    prefixes: tuple[tuple[str, str], ...] = ()

    @property
    def prefix_map(self) -> dict[str, str]:
        return dict(self.prefixes)


@dataclass(frozen=True)
class Query:
    """A whole C-SPARQL query (or a sub-select, which has no registration, prologue or dataset)."""

    form: QueryForm
    where: GroupPattern | None
    prologue: Prologue = Prologue()
    registration: Registration | None = None
    datasets: tuple[DatasetClause, ...] = ()
    aggregates: tuple[AggregateClause, ...] = ()
    group_by: tuple[GroupCondition, ...] = ()
    having: tuple[Expr, ...] = ()
    order_by: tuple[OrderCondition, ...] = ()
    limit: int | None = None
    offset: int | None = None
    values: ValuesBlock | None = None

    @property
    def streams(self) -> tuple[FromStream, ...]:
        return tuple(d for d in self.datasets if isinstance(d, FromStream))
