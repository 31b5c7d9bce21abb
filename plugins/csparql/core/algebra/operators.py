"""The algebra: SPARQL 1.1 operators plus the C-SPARQL ones, one frozen dataclass per operator.

SPARQL operators follow https://www.w3.org/TR/sparql11-query/#sparqlAlgebra (§18.2, §18.4, §18.5). The
C-SPARQL additions follow the C-SPARQL article (§4) and the LarKC engine design (§3.4, §4):

- the dataset of an evaluation: stream windows and static graphs (``StreamWindow``, ``StaticGraph``);
- ``StreamAggregate``, the non-reducing AGGREGATE clause (the C-SPARQL article, §4.1; docs/semantics.md,
  *The AGGREGATE clause*);
- the timestamp functions, which are expressions (``csparql.core.language.expressions.Timestamp``).

Basic graph patterns and path patterns carry ``sources``: None while they read the active graph of the query
(the default graph, or the named graph of an enclosing GRAPH), and, once the optimizer has split them (the
D-Graph of the LarKC engine design, §4), the exact stream windows and static graphs they read.

Variables whose name starts with ``_:`` (blank nodes of the query) or ``.`` (made by the translation: path
steps, aggregate results) are hidden: they are never projected by ``SELECT *``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rdflib import URIRef, Variable

from csparql.core.language.expressions import AggregateCall, Expr
from csparql.core.language.syntax import PathExpr
from csparql.core.terms import Term
from csparql.core.windows import Window


def is_hidden(var: Variable) -> bool:
    """Whether the variable was made by the translation or stands for a blank node of the query."""
    return var.startswith("_:") or var.startswith(".")


# --- the dataset -----------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class StreamWindow:
    """The window of one stream in one evaluation (the C-SPARQL article, §4.2): the stream's triples with τ in
    the window.

    As a named graph it is named by the stream's IRI; ``graph``, when given, names it instead: an RSP-QL query
    that reads one stream through several different windows makes each window a graph named by the window.
    """

    iri: URIRef
    window: Window
    graph: URIRef | None = None

    @property
    def graph_name(self) -> URIRef:
        """The IRI that names the window as a graph of the dataset (what ``GRAPH ?g`` binds)."""
        return self.graph if self.graph is not None else self.iri

    def __str__(self) -> str:
        return f"<{self.iri}> [{self.window}]" + (f" as <{self.graph}>" if self.graph is not None else "")


@dataclass(frozen=True, order=True)
class StaticGraph:
    """A static graph. ``iri`` None is the default static graph (the "RDF repository" of the examples);
    ``ALL_NAMED`` stands for every named static graph of the catalog (a query that names no FROM NAMED)."""

    iri: URIRef | None

    @property
    def graph_name(self) -> URIRef | None:
        """The IRI that names the graph in the dataset (what ``GRAPH ?g`` binds); None for the default graph."""
        return self.iri

    def __str__(self) -> str:
        if self.iri is None:
            return "default"
        if self.iri == ALL_NAMED_IRI:
            return "all-named"
        return f"<{self.iri}>"


ALL_NAMED_IRI = URIRef("urn:csparql:all-named-graphs")
DEFAULT_GRAPH = StaticGraph(None)
ALL_NAMED_GRAPHS = StaticGraph(ALL_NAMED_IRI)

Source = StreamWindow | StaticGraph


@dataclass(frozen=True)
class Dataset:
    """The RDF dataset of an evaluation (docs/semantics.md, *The dataset of an evaluation*): the sources of the
    default graph and the named graphs."""

    default: tuple[Source, ...]
    named: tuple[Source, ...]

    @property
    def streams(self) -> tuple[StreamWindow, ...]:
        """Every stream window of the dataset, once each, in order (several for a stream the query reads
        through several windows)."""
        return tuple(dict.fromkeys(s for s in (*self.default, *self.named) if isinstance(s, StreamWindow)))

    def named_source(self, iri: URIRef) -> Source | None:
        """The named graph or stream window this IRI names (``graph_name``), if the dataset has one (when the
        dataset holds every named static graph of the store, any other IRI names a static graph, possibly
        empty)."""
        for source in self.named:
            if source.graph_name == iri:
                return source
        if ALL_NAMED_GRAPHS in self.named:
            return StaticGraph(iri)
        return None


# --- graph patterns ------------------------------------------------------------------------------------


class Operator:
    """Base class of the algebra operators."""


@dataclass(frozen=True)
class TriplePattern:
    """A triple pattern (s, p, o); each position is a term or a variable."""

    subject: Term
    predicate: Term
    object: Term


@dataclass(frozen=True)
class BGP(Operator):
    """A basic graph pattern ``BGP(triples)``, §18.3; empty, it is the identity of Join (one empty solution)."""

    triples: tuple[TriplePattern, ...] = ()
    sources: tuple[Source, ...] | None = None


@dataclass(frozen=True)
class PathPattern(Operator):
    """A property path pattern ``Path(X, path, Y)``, §18.4 (a path that does not reduce to triples, §18.2.2.4)."""

    subject: Term
    path: PathExpr
    object: Term
    sources: tuple[Source, ...] | None = None


@dataclass(frozen=True)
class Join(Operator):
    """``Join(Ω1, Ω2)``, §18.5."""

    left: Operator
    right: Operator


@dataclass(frozen=True)
class LeftJoin(Operator):
    """``LeftJoin(Ω1, Ω2, expr)`` (OPTIONAL with its filter), §18.5; ``expression`` None means true."""

    left: Operator
    right: Operator
    expression: Expr | None = None


@dataclass(frozen=True)
class Filter(Operator):
    """``Filter(expr, Ω)``, §18.5."""

    expression: Expr
    input: Operator


@dataclass(frozen=True)
class Union(Operator):
    """``Union(Ω1, Ω2)``, §18.5."""

    left: Operator
    right: Operator


@dataclass(frozen=True)
class Minus(Operator):
    """``Minus(Ω1, Ω2)``, §18.5."""

    left: Operator
    right: Operator


@dataclass(frozen=True)
class Graph(Operator):
    """``Graph(g, P)``, §18.6: P over the named graph g (a stream window is a named graph)."""

    name: URIRef | Variable
    input: Operator


@dataclass(frozen=True)
class Extend(Operator):
    """``Extend(Ω, var, expr)`` (BIND and SELECT expressions), §18.5."""

    input: Operator
    var: Variable
    expression: Expr


@dataclass(frozen=True)
class Table(Operator):
    """Inline data (VALUES) as a multiset of solutions, §10.2 and §18.2.2.6; None in a row is UNDEF."""

    vars: tuple[Variable, ...]
    rows: tuple[tuple[Term | None, ...], ...]


@dataclass(frozen=True)
class PaneRows(Operator):
    """The stored partial results of the panes of one window (``csparql.core.panes``): one
    solution per stored row, binding ``vars``. Which rows are the window's the evaluation's reader knows."""

    vars: tuple[Variable, ...]


@dataclass(frozen=True)
class GroupKey:
    """One GROUP BY condition: an expression, and the variable it binds after grouping (None if none)."""

    expression: Expr
    var: Variable | None = None


@dataclass(frozen=True)
class Group(Operator):
    """``Group`` followed by ``AggregateJoin``, §18.2.4.1 and §18.5.1: one solution per group, binding the key
    variables and one variable per aggregate."""

    input: Operator
    keys: tuple[GroupKey, ...]
    aggregates: tuple[tuple[Variable, AggregateCall], ...]


@dataclass(frozen=True)
class AggregateSpec:
    """One C-SPARQL AGGREGATE clause (the C-SPARQL article, §4.1): ``A(var, function, argument, groups)`` and
    its FILTER.

    ``argument`` None means COUNT of the group's bindings (COUNT written without argument or with ``*``).
    """

    var: Variable
    function: str
    argument: Variable | None
    distinct: bool
    groups: tuple[Variable, ...]
    filter: Expr | None = None


@dataclass(frozen=True)
class StreamAggregate(Operator):
    """The non-reducing AGGREGATE clauses, ``P AGG A1 … AGG An`` (the C-SPARQL article, §4.1;
    docs/semantics.md, *The AGGREGATE clause*).

    Every solution of ``input`` is kept and extended with each clause's aggregate over the group it belongs
    to. The aggregates are all computed over the solutions of ``input`` (the clauses are independent); the
    clauses' filters are then applied in order, each after its own clause.
    """

    input: Operator
    clauses: tuple[AggregateSpec, ...]


@dataclass(frozen=True)
class OrderBy(Operator):
    """``OrderBy(Ω, conditions)``, §18.5; each condition is (expression, descending)."""

    input: Operator
    conditions: tuple[tuple[Expr, bool], ...]


@dataclass(frozen=True)
class Project(Operator):
    """``Project(Ω, vars)``, §18.5."""

    input: Operator
    vars: tuple[Variable, ...]


@dataclass(frozen=True)
class Distinct(Operator):
    """``Distinct(Ω)``, §18.5."""

    input: Operator


@dataclass(frozen=True)
class Reduced(Operator):
    """``Reduced(Ω)``, §18.5 (evaluated as Distinct, which the definition allows)."""

    input: Operator


@dataclass(frozen=True)
class Slice(Operator):
    """``Slice(Ω, start, length)``, §18.5; ``length`` None means no limit."""

    input: Operator
    start: int
    length: int | None


# --- the query ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Registration:
    """How a query is registered (the C-SPARQL article, §3.3): QUERY or STREAM, its name, its period in
    microseconds, and the entailment regimes it switches on (a csparql extension; none by default, as in
    SPARQL)."""

    kind: str
    name: str
    computed_every: int | None = None
    entailment: tuple[str, ...] = ()


@dataclass(frozen=True)
class SelectResult:
    """A SELECT: the projected variables, in order."""

    vars: tuple[Variable, ...]


@dataclass(frozen=True)
class ConstructResult:
    """A CONSTRUCT: the template; its blank nodes are fresh for every solution."""

    template: tuple[TriplePattern, ...]


@dataclass(frozen=True)
class DescribeResult:
    """A DESCRIBE: the resources to describe (IRIs, and variables bound by the pattern)."""

    terms: tuple[URIRef | Variable, ...]


@dataclass(frozen=True)
class AskResult:
    """An ASK."""


ResultForm = SelectResult | ConstructResult | DescribeResult | AskResult

# Window-to-stream operators (a csparql extension, spelled as SPARQLStream does, SRBench Annex A): what each
# evaluation emits. RSTREAM: its whole result. ISTREAM: the solutions it has that the previous evaluation of the
# query's schedule did not have; DSTREAM: those the previous evaluation had and it has not (multiset differences).
RSTREAM, ISTREAM, DSTREAM = "RSTREAM", "ISTREAM", "DSTREAM"


@dataclass(frozen=True)
class QueryPlan:
    """A translated query: what it returns, the pattern that computes it, the dataset it reads, and how it is
    registered. ``base`` is the query's last BASE, against which ``IRI("relative")`` resolves; ``prefixes`` only
    serve printing."""

    form: ResultForm
    pattern: Operator
    dataset: Dataset
    registration: Registration | None = None
    prefixes: tuple[tuple[str, str], ...] = ()
    base: str | None = None
    stream_operator: str = RSTREAM

    @property
    def streams(self) -> tuple[StreamWindow, ...]:
        return self.dataset.streams

    @property
    def entailment(self) -> tuple[str, ...]:
        """The entailment regimes the query is evaluated under (empty: simple entailment, as in SPARQL)."""
        return self.registration.entailment if self.registration is not None else ()

    @property
    def is_continuous(self) -> bool:
        """Whether the query is registered or reads a stream (a one-shot SPARQL query otherwise)."""
        return self.registration is not None or bool(self.streams)

