"""Expression nodes, shared by the syntax tree and the algebra.

Each node is a small frozen dataclass; leaves are RDF terms (``csparql.core.terms.Term``). The operators follow
SPARQL 1.1 §17 (https://www.w3.org/TR/sparql11-query/#expressions); ``Timestamp`` and ``TripleTimestamp`` are
the C-SPARQL timestamp functions (the C-SPARQL article, §3.5 and §4.3; docs/semantics.md,
*The timestamp function*). In the syntax tree ``Exists.pattern`` holds a group graph pattern; in the algebra it
holds an operator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rdflib import URIRef, Variable

from csparql.core.language.errors import Span
from csparql.core.terms import Term


class Expression:
    """Base class of every non-term expression node."""


Expr = Expression | Term


@dataclass(frozen=True)
class Or(Expression):
    """Logical-or, §17.4.1.5 (with the error semantics of §17.2)."""

    left: Expr
    right: Expr


@dataclass(frozen=True)
class And(Expression):
    """Logical-and, §17.4.1.6."""

    left: Expr
    right: Expr


@dataclass(frozen=True)
class Not(Expression):
    """Logical negation ``!e``: fn:not of the effective boolean value, §17.3."""

    operand: Expr


@dataclass(frozen=True)
class Compare(Expression):
    """A comparison ``= != < > <= >=``, §17.3 operator mapping."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class In(Expression):
    """``e IN (…)`` and ``e NOT IN (…)``, §17.4.1.9 and §17.4.1.10."""

    operand: Expr
    options: tuple[Expr, ...]
    negated: bool = False


@dataclass(frozen=True)
class Arithmetic(Expression):
    """A binary numeric operator ``+ - * /``, §17.3."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Unary(Expression):
    """Unary ``+e`` or ``-e`` (op ``+`` or ``-``), §17.3."""

    op: str
    operand: Expr


@dataclass(frozen=True)
class BuiltinCall(Expression):
    """A SPARQL built-in function, named by its canonical upper-case name (``STR``, ``REGEX``, ``ISIRI``…), §17.4."""

    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class FunctionCall(Expression):
    """A call of a function named by an IRI (casts such as ``xsd:integer(?x)`` included), §17.6."""

    iri: URIRef
    args: tuple[Expr, ...]
    distinct: bool = False


@dataclass(frozen=True)
class Exists(Expression):
    """``EXISTS { … }`` / ``NOT EXISTS { … }``, §17.4.1.4."""

    pattern: Any
    negated: bool = False


@dataclass(frozen=True)
class AggregateCall(Expression):
    """A SPARQL 1.1 set function (§18.5) in SELECT, HAVING or ORDER BY; ``argument`` None means ``*``."""

    name: str
    argument: Expr | None
    distinct: bool = False
    separator: str | None = None


@dataclass(frozen=True)
class Timestamp(Expression):
    """C-SPARQL ``timestamp(?v [, stream])`` (the C-SPARQL article, §3.5 and §4.3; docs/semantics.md,
    *The timestamp function*).

    The greatest timestamp among the stream triples that bound ``var`` in the solution; with ``stream``, only
    triples of that stream count. An error (unbound) when no stream triple bound ``var``.
    """

    var: Variable
    stream: URIRef | Variable | None = None
    stream_span: Span | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TripleTimestamp(Expression):
    """The reference engine's ``f:timestamp(?s, ?p, ?o)`` (docs/semantics.md, *The timestamp function*): the
    timestamp of that triple in the window."""

    subject: Expr
    predicate: Expr
    object: Expr


# Canonical names of the built-ins, with the spelling used when printing them.
BUILTIN_SPELLING = {
    name.upper(): name
    for name in (
        "STR LANG LANGMATCHES DATATYPE BOUND IRI URI BNODE RAND ABS CEIL FLOOR ROUND CONCAT SUBSTR STRLEN "
        "REPLACE UCASE LCASE ENCODE_FOR_URI CONTAINS STRSTARTS STRENDS STRBEFORE STRAFTER YEAR MONTH DAY "
        "HOURS MINUTES SECONDS TIMEZONE TZ NOW UUID STRUUID MD5 SHA1 SHA256 SHA384 SHA512 COALESCE IF "
        "STRLANG STRDT sameTerm isIRI isURI isBLANK isLITERAL isNUMERIC REGEX"
    ).split()
}

AGGREGATE_NAMES = ("COUNT", "SUM", "AVG", "MIN", "MAX", "SAMPLE", "GROUP_CONCAT")


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of an expression (EXISTS patterns are not expressions and are left out)."""
    match expr:
        case Or(l, r) | And(l, r) | Compare(_, l, r) | Arithmetic(_, l, r):
            return (l, r)
        case Not(o) | Unary(_, o):
            return (o,)
        case In(o, options, _):
            return (o, *options)
        case BuiltinCall(_, args) | FunctionCall(_, args, _):
            return args
        case AggregateCall(_, arg, _, _):
            return () if arg is None else (arg,)
        case TripleTimestamp(s, p, o):
            return (s, p, o)
        case Timestamp(var, stream, _):
            return (var,) if stream is None else (var, stream)
    return ()


def variables(expr: Expr) -> set[Variable]:
    """Every variable mentioned in the expression, outside EXISTS patterns."""
    if isinstance(expr, Variable):
        return {expr}
    found: set[Variable] = set()
    for child in children(expr):
        found |= variables(child)
    return found


def walk(expr: Expr):
    """Every node of the expression, the expression itself first (EXISTS patterns not entered)."""
    yield expr
    for child in children(expr):
        yield from walk(child)


def contains_aggregate(expr: Expr) -> bool:
    """Whether a SPARQL 1.1 aggregate occurs in the expression."""
    return any(isinstance(node, AggregateCall) for node in walk(expr))
