"""Plans read back from the S-expressions ``csparql.core.algebra.sexpr`` prints: its inverse.

``read_plan(text)`` reads what ``format_plan`` printed and ``read_operator(text, prefixes)`` what
``format_operator`` printed, so that a test can start from a plan written by hand (an optimizer rule's
fixture takes the plan its rule gets, not a query that every earlier rule must first turn into it).
``read_plan(format_plan(plan))`` equals ``plan`` except for the query's BASE, which the printed form leaves
out (it only resolves ``IRI("relative")``, already resolved in the plan's terms).

Text that is not such an S-expression raises ``SexprError``, whose message says what was expected and where
(line and column).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rdflib import BNode, URIRef, Variable

from csparql.core.algebra import operators as alg
from csparql.core.language import expressions as ex
from csparql.core.language import syntax as sx
from csparql.core.language.escapes import EscapeError, unescape
from csparql.core.terms import XSD_BOOLEAN, XSD_DECIMAL, XSD_DOUBLE, XSD_INTEGER, literal
from csparql.core.windows import LogicalWindow, PhysicalWindow, parse_duration


class SexprError(ValueError):
    """Text that is not a plan, pattern or expression as ``csparql.core.algebra.sexpr`` prints them."""


@dataclass(frozen=True)
class Atom:
    """One token that is not a bracket: ``text`` as written, ``kind`` ``iri`` (``<…>``, ``^<…>``), ``literal``
    (a quoted string with its language tag or datatype) or ``word`` (everything else), and where it starts."""

    text: str
    kind: str
    line: int
    column: int

    def where(self) -> str:
        return f"line {self.line}, column {self.column}"


@dataclass(frozen=True)
class Node:
    """A bracketed list and where it starts."""

    items: tuple
    line: int
    column: int

    @property
    def head(self) -> str | None:
        return self.items[0].text if self.items and isinstance(self.items[0], Atom) else None

    def where(self) -> str:
        return f"line {self.line}, column {self.column}"


_IRI = re.compile(r"\^?<(?:[^<>\"{}|^`\\\x00-\x20]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*>")
_WORD = re.compile(r"[^\s()]+")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_LANGUAGE = re.compile(r"@[A-Za-z]+(?:-[A-Za-z0-9]+)*")
_NUMBERS = (
    (XSD_INTEGER, re.compile(r"[+-]?[0-9]+")),
    (XSD_DECIMAL, re.compile(r"[+-]?[0-9]*\.[0-9]+")),
    (XSD_DOUBLE, re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)[eE][+-]?[0-9]+")),
)
COMPARISONS = ("=", "!=", "<", ">", "<=", ">=")
AGGREGATES = {name.lower(): name for name in ex.AGGREGATE_NAMES}


def read_plan(text: str) -> alg.QueryPlan:
    """The plan ``format_plan`` printed as ``text``; ``SexprError`` saying where it is not one."""
    return _Reader({}).plan(_only(_parse(text)))


def read_operator(text: str, prefixes: dict[str, str] | None = None) -> alg.Operator:
    """The pattern ``format_operator`` printed as ``text`` (prefixed names expanded with ``prefixes``)."""
    return _Reader(dict(prefixes or {})).operator(_only(_parse(text)))


def read_expression(text: str, prefixes: dict[str, str] | None = None) -> ex.Expr:
    """An expression as the S-expressions print it, e.g. ``(> ?b 1)``."""
    return _Reader(dict(prefixes or {})).expression(_only(_parse(text)))


# --- text to nested lists ------------------------------------------------------------------------------


def _parse(text: str) -> list:
    """The top-level items of ``text``: atoms and bracketed lists."""
    stack: list[tuple[list, int, int]] = [([], 1, 1)]
    position, line, line_start = 0, 1, 0
    while position < len(text):
        char = text[position]
        column = position - line_start + 1
        if char == "\n":
            line, line_start = line + 1, position + 1
            position += 1
        elif char.isspace():
            position += 1
        elif char == "(":
            stack.append(([], line, column))
            position += 1
        elif char == ")":
            if len(stack) == 1:
                raise SexprError(f"line {line}, column {column}: ')' closes nothing")
            items, opened_line, opened_column = stack.pop()
            stack[-1][0].append(Node(tuple(items), opened_line, opened_column))
            position += 1
        else:
            atom, position = _atom(text, position, line, column)
            stack[-1][0].append(atom)
    if len(stack) > 1:
        _, opened_line, opened_column = stack[-1]
        raise SexprError(f"line {opened_line}, column {opened_column}: '(' is never closed")
    return stack[0][0]


def _atom(text: str, position: int, line: int, column: int) -> tuple[Atom, int]:
    if text[position] == '"':
        string = _STRING.match(text, position)
        if string is None:
            raise SexprError(f"line {line}, column {column}: a string that is never closed")
        end = string.end()
        if text.startswith("@", end):
            tag = _LANGUAGE.match(text, end)
            end = tag.end() if tag else end
        elif text.startswith("^^", end):
            datatype = _IRI.match(text, end + 2) or _WORD.match(text, end + 2)
            if datatype is None:
                raise SexprError(f"line {line}, column {column}: '^^' without a datatype")
            end = datatype.end()
        return Atom(text[position:end], "literal", line, column), end
    iri = _IRI.match(text, position)
    if iri is not None:
        return Atom(iri.group(), "iri", line, column), iri.end()
    word = _WORD.match(text, position)
    return Atom(word.group(), "word", line, column), word.end()


def _only(items: list):
    if len(items) != 1:
        where = items[1].where() if len(items) > 1 else "line 1, column 1"
        raise SexprError(f"{where}: expected one S-expression, found {len(items)}")
    return items[0]


def _where(item) -> str:
    return item.where()


# --- nested lists to the algebra -----------------------------------------------------------------------


class _Reader:
    def __init__(self, prefixes: dict[str, str]):
        self.prefixes = prefixes

    # terms

    def term(self, item) -> URIRef | BNode | Variable:
        if not isinstance(item, Atom):
            raise SexprError(f"{_where(item)}: expected a term, found a list")
        text = item.text
        if item.kind == "iri" and not text.startswith("^"):
            try:
                return URIRef(unescape(text[1:-1], iri=True))
            except EscapeError as error:
                raise SexprError(f"{item.where()}: {error}") from None
        if item.kind == "literal":
            return self.literal(item)
        if text.startswith("?") and len(text) > 1:
            return Variable(text[1:])
        if text.startswith("_:") and len(text) > 2:
            return BNode(text[2:])
        if text in ("true", "false"):
            return literal(text, XSD_BOOLEAN)
        for datatype, pattern in _NUMBERS:
            if pattern.fullmatch(text):
                return literal(text, datatype)
        prefix, colon, local = text.partition(":")
        if colon and prefix in self.prefixes:
            return URIRef(self.prefixes[prefix] + local)
        if colon:
            raise SexprError(f"{item.where()}: the prefix {prefix!r} of {text} is not declared")
        raise SexprError(f"{item.where()}: expected a term, found {text!r}")

    def literal(self, item: Atom):
        text = item.text
        string = _STRING.match(text)
        try:
            lexical = unescape(string.group()[1:-1])
        except EscapeError as error:
            raise SexprError(f"{item.where()}: {error}") from None
        rest = text[string.end():]
        if rest.startswith("@"):
            return literal(lexical, language=rest[1:])
        if rest.startswith("^^"):
            datatype = self.term(Atom(rest[2:], "iri" if rest[2:].startswith("<") else "word", item.line, item.column))
            if not isinstance(datatype, URIRef):
                raise SexprError(f"{item.where()}: the datatype of {text} is not an IRI")
            return literal(lexical, str(datatype))
        return literal(lexical)

    def iri(self, item) -> URIRef:
        term = self.term(item)
        if not isinstance(term, URIRef):
            raise SexprError(f"{_where(item)}: expected an IRI, found {item.text!r}")
        return term

    def variable(self, item) -> Variable:
        term = self.term(item)
        if not isinstance(term, Variable):
            raise SexprError(f"{_where(item)}: expected a variable, found {getattr(item, 'text', 'a list')!r}")
        return term

    def word(self, item) -> str:
        if not isinstance(item, Atom) or item.kind != "word":
            raise SexprError(f"{_where(item)}: expected a word")
        return item.text

    # shapes

    def node(self, item, head: str | None = None, at_least: int = 0) -> Node:
        """``item`` as a list (with ``head`` first, when given, and at least ``at_least`` items after it)."""
        if not isinstance(item, Node):
            raise SexprError(f"{_where(item)}: expected ({head or '…'} …), found {item.text!r}")
        if head is not None and item.head != head:
            raise SexprError(f"{item.where()}: expected ({head} …), found ({item.head or '…'} …)")
        if len(item.items) - (1 if head else 0) < at_least:
            raise SexprError(f"{item.where()}: ({item.head} …) needs {at_least} items")
        return item

    def exactly(self, node: Node, count: int) -> tuple:
        rest = node.items[1:]
        if len(rest) != count:
            raise SexprError(f"{node.where()}: ({node.head} …) takes {count} items, found {len(rest)}")
        return rest

    # the plan

    def plan(self, item) -> alg.QueryPlan:
        node = self.node(item)
        prefixes: tuple[tuple[str, str], ...] = ()
        if node.head == "prefix":
            declarations, query = self.exactly(node, 2)
            pairs = []
            for declaration in self.node(declarations).items:
                items = self.node(declaration).items
                if len(items) != 2 or not isinstance(items[0], Atom) or not items[0].text.endswith(":"):
                    raise SexprError(f"{_where(declaration)}: expected (name: <namespace>)")
                pairs.append((items[0].text[:-1], str(self.iri(items[1]))))
            prefixes = tuple(pairs)
            self.prefixes = dict(prefixes)
            node = self.node(query, "query")
        else:
            node = self.node(item, "query")
        items = list(node.items[1:])
        form = self.form(items, node)
        stream_operator = alg.RSTREAM
        if items and isinstance(items[0], Atom) and items[0].text in ("istream", "dstream"):
            stream_operator = items.pop(0).text.upper()
        registration = None
        if items and isinstance(items[0], Node) and items[0].head == "register":
            registration = self.registration(items.pop(0))
        if len(items) != 2:
            raise SexprError(f"{node.where()}: expected (dataset …) and a pattern after the result form")
        dataset = self.dataset(items[0])
        return alg.QueryPlan(form, self.operator(items[1]), dataset, registration, prefixes,
                             stream_operator=stream_operator)

    def form(self, items: list, query: Node) -> alg.ResultForm:
        if not items:
            raise SexprError(f"{query.where()}: (query …) needs a result form")
        kind = self.word(items.pop(0))
        if kind == "ask":
            return alg.AskResult()
        if not items:
            raise SexprError(f"{query.where()}: {kind} needs its list")
        listed = self.node(items.pop(0)).items
        if kind == "select":
            return alg.SelectResult(tuple(self.variable(v) for v in listed))
        if kind == "construct":
            return alg.ConstructResult(tuple(self.triple(t) for t in listed))
        if kind == "describe":
            return alg.DescribeResult(tuple(self.term(t) for t in listed))
        raise SexprError(f"{query.where()}: unknown result form {kind!r}")

    def registration(self, node: Node) -> alg.Registration:
        items = list(self.node(node, "register", 2).items[1:])
        kind, name = self.word(items.pop(0)).upper(), self.word(items.pop(0))
        every, entailment = None, ()
        for option in items:
            option = self.node(option)
            if option.head == "every":
                every = self.duration(self.exactly(option, 1)[0])
            elif option.head == "entailment":
                entailment = tuple(self.word(n).upper() for n in option.items[1:])
            else:
                raise SexprError(f"{option.where()}: expected (every …) or (entailment …)")
        return alg.Registration(kind, name, every, entailment)

    def duration(self, item) -> int:
        try:
            return parse_duration(self.word(item))
        except ValueError as error:
            raise SexprError(f"{_where(item)}: {error}") from None

    def dataset(self, item) -> alg.Dataset:
        default, named = self.exactly(self.node(item, "dataset"), 2)
        return alg.Dataset(tuple(self.source(s) for s in self.node(default, "default").items[1:]),
                           tuple(self.source(s) for s in self.node(named, "named").items[1:]))

    def source(self, item) -> alg.Source:
        node = self.node(item)
        if node.head == "graph":
            (name,) = self.exactly(node, 1)
            if isinstance(name, Atom) and name.text == "default":
                return alg.DEFAULT_GRAPH
            if isinstance(name, Atom) and name.text == "all-named":
                return alg.ALL_NAMED_GRAPHS
            return alg.StaticGraph(self.iri(name))
        if node.head == "window":
            iri, *spec = self.node(node, "window", 2).items[1:]
            specs = {self.node(s).head: self.exactly(self.node(s), 1)[0] for s in spec}
            graph = self.iri(specs.pop("graph")) if "graph" in specs else None
            try:
                if set(specs) == {"range", "step"}:
                    window = LogicalWindow(self.duration(specs["range"]), self.duration(specs["step"]))
                elif set(specs) == {"triples"}:
                    window = PhysicalWindow(int(self.word(specs["triples"])))
                else:
                    raise SexprError(f"{node.where()}: expected (range …) (step …) or (triples …), then an optional (graph …)")
            except ValueError as error:
                raise SexprError(f"{node.where()}: {error}") from None
            return alg.StreamWindow(self.iri(iri), window, graph)
        raise SexprError(f"{node.where()}: expected (graph …) or (window …)")

    def sources(self, item) -> tuple[alg.Source, ...]:
        return tuple(self.source(s) for s in self.node(item, "from").items[1:])

    def triple(self, item) -> alg.TriplePattern:
        s, p, o = self.exactly(self.node(item, "triple"), 3)
        return alg.TriplePattern(self.term(s), self.term(p), self.term(o))

    # patterns

    def operator(self, item) -> alg.Operator:
        node = self.node(item)
        head, rest = node.head, node.items[1:]
        match head:
            case "bgp":
                sources = None
                if rest and isinstance(rest[0], Node) and rest[0].head == "from":
                    sources, rest = self.sources(rest[0]), rest[1:]
                return alg.BGP(tuple(self.triple(t) for t in rest), sources)
            case "path":
                sources = None
                if rest and isinstance(rest[0], Node) and rest[0].head == "from":
                    sources, rest = self.sources(rest[0]), rest[1:]
                if len(rest) != 3:
                    raise SexprError(f"{node.where()}: (path …) takes a subject, a path and an object")
                return alg.PathPattern(self.term(rest[0]), self.path(rest[1]), self.term(rest[2]), sources)
            case "join" | "union" | "minus":
                left, right = self.exactly(node, 2)
                kind = {"join": alg.Join, "union": alg.Union, "minus": alg.Minus}[head]
                return kind(self.operator(left), self.operator(right))
            case "leftjoin":
                if len(rest) not in (2, 3):
                    raise SexprError(f"{node.where()}: (leftjoin …) takes two patterns and an optional expression")
                expression = self.expression(rest[2]) if len(rest) == 3 else None
                return alg.LeftJoin(self.operator(rest[0]), self.operator(rest[1]), expression)
            case "filter":
                expression, inner = self.exactly(node, 2)
                return alg.Filter(self.expression(expression), self.operator(inner))
            case "graph":
                name, inner = self.exactly(node, 2)
                return alg.Graph(self.term(name), self.operator(inner))
            case "extend":
                binding, inner = self.exactly(node, 2)
                pairs = self.node(binding).items
                if len(pairs) != 1:
                    raise SexprError(f"{_where(binding)}: expected ((?variable expression))")
                var, expression = self.exactly_pair(pairs[0])
                return alg.Extend(self.operator(inner), self.variable(var), self.expression(expression))
            case "table":
                return self.table(node)
            case "group":
                keys, aggregates, inner = self.exactly(node, 3)
                return alg.Group(self.operator(inner), tuple(self.group_key(k) for k in self.node(keys).items),
                                 tuple(self.aggregate_binding(a) for a in self.node(aggregates).items))
            case "aggregate":
                clauses, inner = self.exactly(node, 2)
                clauses = tuple(self.clause(c) for c in self.node(clauses).items)
                return alg.StreamAggregate(self.operator(inner), clauses)
            case "order":
                conditions, inner = self.exactly(node, 2)
                return alg.OrderBy(self.operator(inner), tuple(self.condition(c) for c in self.node(conditions).items))
            case "project":
                variables, inner = self.exactly(node, 2)
                return alg.Project(self.operator(inner), tuple(self.variable(v) for v in self.node(variables).items))
            case "distinct" | "reduced":
                (inner,) = self.exactly(node, 1)
                return (alg.Distinct if head == "distinct" else alg.Reduced)(self.operator(inner))
            case "slice":
                start, length, inner = self.exactly(node, 3)
                try:
                    end = None if self.word(length) == "_" else int(self.word(length))
                    return alg.Slice(self.operator(inner), int(self.word(start)), end)
                except ValueError:
                    raise SexprError(f"{node.where()}: (slice start length …) takes numbers "
                                     "('_': no limit)") from None
        raise SexprError(f"{node.where()}: unknown operator ({head or '…'} …)")

    def exactly_pair(self, item) -> tuple:
        node = self.node(item)
        if len(node.items) != 2:
            raise SexprError(f"{node.where()}: expected (?variable expression)")
        return node.items

    def table(self, node: Node) -> alg.Table:
        header, *rows = node.items[1:]
        variables = tuple(self.variable(v) for v in self.node(header, "vars").items[1:])
        table_rows = []
        for row in rows:
            cells = {}
            for cell in self.node(row, "row").items[1:]:
                var, value = self.exactly_pair(cell)
                cells[self.variable(var)] = self.term(value)
            table_rows.append(tuple(cells.get(v) for v in variables))
        return alg.Table(variables, tuple(table_rows))

    def group_key(self, item) -> alg.GroupKey:
        first = item.items[0] if isinstance(item, Node) and item.items else None
        if isinstance(first, Atom) and first.text.startswith("?"):
            var, expression = self.exactly_pair(item)
            return alg.GroupKey(self.expression(expression), self.variable(var))
        expression = self.expression(item)
        return alg.GroupKey(expression, expression if isinstance(expression, Variable) else None)

    def aggregate_binding(self, item) -> tuple[Variable, ex.AggregateCall]:
        var, call = self.exactly_pair(item)
        aggregate = self.expression(call)
        if not isinstance(aggregate, ex.AggregateCall):
            raise SexprError(f"{_where(call)}: expected an aggregate such as (count ?x)")
        return self.variable(var), aggregate

    def clause(self, item) -> alg.AggregateSpec:
        node = self.node(item, at_least=3)
        var, function, groups, *rest = node.items
        words = list(self.node(function).items)
        name = self.word(words.pop(0)).upper()
        distinct = bool(words) and isinstance(words[0], Atom) and words[0].text == "distinct"
        if distinct:
            words.pop(0)
        argument = self.variable(words[0]) if words else None
        condition = None
        if rest:
            (condition,) = self.exactly(self.node(rest[0], "filter"), 1)
            condition = self.expression(condition)
        return alg.AggregateSpec(self.variable(var), name, argument, distinct,
                                 tuple(self.variable(g) for g in self.node(groups).items), condition)

    def condition(self, item) -> tuple[ex.Expr, bool]:
        if isinstance(item, Node) and item.head == "desc":
            (expression,) = self.exactly(item, 1)
            return self.expression(expression), True
        return self.expression(item), False

    def path(self, item) -> sx.PathExpr:
        if isinstance(item, Atom):
            return self.iri(item)
        head, rest = item.head, item.items[1:]
        match head:
            case "seq":
                return sx.SequencePath(tuple(self.path(p) for p in rest))
            case "alt":
                return sx.AlternativePath(tuple(self.path(p) for p in rest))
            case "reverse":
                (inner,) = self.exactly(item, 1)
                return sx.InversePath(self.path(inner))
            case "path+" | "path*" | "path?":
                (inner,) = self.exactly(item, 1)
                return sx.ModifiedPath(self.path(inner), head[-1])
            case "notoneof":
                members = []
                for member in rest:
                    inverse = isinstance(member, Atom) and member.text.startswith("^")
                    if inverse:
                        text = member.text[1:]
                        member = Atom(text, "iri" if text.startswith("<") else "word", member.line, member.column + 1)
                    members.append((self.iri(member), inverse))
                return sx.NegatedPropertySet(tuple(members))
        raise SexprError(f"{item.where()}: unknown path ({head or '…'} …)")

    # expressions

    def expression(self, item) -> ex.Expr:
        if isinstance(item, Atom):
            return self.term(item)
        head = item.head
        if head is None:
            raise SexprError(f"{item.where()}: expected an expression such as (= ?a ?b)")
        rest = item.items[1:]
        if head in ("||", "&&") or head in COMPARISONS or head in ("*", "/"):
            left, right = self.exactly(item, 2)
            left, right = self.expression(left), self.expression(right)
            if head == "||":
                return ex.Or(left, right)
            if head == "&&":
                return ex.And(left, right)
            return ex.Compare(head, left, right) if head in COMPARISONS else ex.Arithmetic(head, left, right)
        if head in ("+", "-"):
            if len(rest) == 1:
                return ex.Unary(head, self.expression(rest[0]))
            left, right = self.exactly(item, 2)
            return ex.Arithmetic(head, self.expression(left), self.expression(right))
        if head == "!":
            (operand,) = self.exactly(item, 1)
            return ex.Not(self.expression(operand))
        if head in ("in", "notin"):
            if not rest:
                raise SexprError(f"{item.where()}: ({head} …) needs an operand")
            return ex.In(self.expression(rest[0]), tuple(self.expression(o) for o in rest[1:]), head == "notin")
        if head == "call":
            if not rest:
                raise SexprError(f"{item.where()}: (call …) needs a function IRI")
            iri, arguments = self.iri(rest[0]), list(rest[1:])
            distinct = bool(arguments) and isinstance(arguments[0], Atom) and arguments[0].text == "distinct"
            return ex.FunctionCall(iri, tuple(self.expression(a) for a in arguments[distinct:]), distinct)
        if head in ("exists", "notexists"):
            (pattern,) = self.exactly(item, 1)
            return ex.Exists(self.operator(pattern), head == "notexists")
        if head in AGGREGATES:
            return self.aggregate(item)
        if head == "timestamp":
            if len(rest) not in (1, 2):
                raise SexprError(f"{item.where()}: (timestamp ?v [stream]) takes one or two items")
            return ex.Timestamp(self.variable(rest[0]), self.term(rest[1]) if len(rest) == 2 else None)
        if head == "triple-timestamp":
            s, p, o = self.exactly(item, 3)
            return ex.TripleTimestamp(self.expression(s), self.expression(p), self.expression(o))
        if head.upper() in ex.BUILTIN_SPELLING:
            return ex.BuiltinCall(head.upper(), tuple(self.expression(a) for a in rest))
        raise SexprError(f"{item.where()}: unknown function or operator {head!r}")

    def aggregate(self, node: Node) -> ex.AggregateCall:
        rest = list(node.items[1:])
        distinct = bool(rest) and isinstance(rest[0], Atom) and rest[0].text == "distinct"
        if distinct:
            rest.pop(0)
        separator = None
        if rest and isinstance(rest[-1], Node) and rest[-1].head == "separator":
            (value,) = self.exactly(rest.pop(), 1)
            separator = str(self.term(value))
        if len(rest) > 1:
            raise SexprError(f"{node.where()}: ({node.head} …) takes at most one argument")
        argument = self.expression(rest[0]) if rest else None
        return ex.AggregateCall(AGGREGATES[node.head], argument, distinct, separator)


__all__ = ["SexprError", "read_expression", "read_operator", "read_plan"]
