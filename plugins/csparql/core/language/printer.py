"""Syntax tree to normalised C-SPARQL text.

``format_query(query)`` prints keywords in upper case, one clause per line, group patterns indented by two
spaces, IRIs compacted with the query's own prefixes, durations in their short unit (``10 MIN`` → ``10m``)
and ``SELECT { ?a ?b }`` as ``SELECT ?a ?b``. Parsing the printed text gives back the same algebra; the
round-trip tests hold the printer to that.
"""

from __future__ import annotations

import re

from rdflib import BNode, Literal, URIRef, Variable

from csparql.core.language import expressions as ex
from csparql.core.language import syntax as sx
from csparql.core.terms import RDF_TYPE, XSD_BOOLEAN, XSD_DECIMAL, XSD_DOUBLE, XSD_INTEGER, format_term

INDENT = "  "

_SHORT_NUMBER = {
    XSD_INTEGER: re.compile(r"^[+-]?[0-9]+$"),
    XSD_DECIMAL: re.compile(r"^[+-]?[0-9]*\.[0-9]+$"),
    XSD_DOUBLE: re.compile(r"^[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)[eE][+-]?[0-9]+$"),
}

# Operator precedence, lowest first; a child printed at a lower level than its parent needs brackets.
_OR, _AND, _RELATIONAL, _ADDITIVE, _MULTIPLICATIVE, _UNARY, _PRIMARY = range(7)


def format_query(query: sx.Query) -> str:
    """The whole query as normalised C-SPARQL text, ending with a newline."""
    return _Printer(query.prologue.prefix_map).query(query) + "\n"


def format_duration(duration: sx.Duration) -> str:
    """A written duration in its short form, e.g. ``10m``."""
    amount = duration.amount.normalize()
    text = format(amount, "f")
    return f"{text}{duration.unit}"


def format_window(window: sx.WindowSpec) -> str:
    """A window clause, e.g. ``[RANGE 30m STEP 5m]``, ``[RANGE 5m TUMBLING]`` or ``[TRIPLES 1000]``."""
    if isinstance(window, sx.PhysicalWindowSpec):
        return f"[TRIPLES {window.count}]"
    overlap = "TUMBLING" if window.step is None else f"STEP {format_duration(window.step)}"
    return f"[RANGE {format_duration(window.range)} {overlap}]"


class _Printer:
    def __init__(self, prefixes: dict[str, str]):
        self.prefixes = prefixes

    # query

    def query(self, query: sx.Query, depth: int = 0) -> str:
        pad = INDENT * depth
        lines: list[str] = []
        if query.registration is not None:
            r = query.registration
            every = f" COMPUTED EVERY {format_duration(r.computed_every)}" if r.computed_every else ""
            entailment = f" ENTAILMENT {', '.join(r.entailment)}" if r.entailment else ""
            lines.append(f"REGISTER {r.kind} {r.name}{every}{entailment} AS")
        if query.prologue.base is not None:
            lines.append(f"BASE <{query.prologue.base}>")
        for prefix, namespace in query.prologue.prefixes:
            lines.append(f"PREFIX {prefix}: <{namespace}>")
        lines.append(pad + self.form(query.form, depth))
        for clause in query.datasets:
            lines.append(pad + self.dataset(clause))
        form = query.form
        if query.where is not None:
            if isinstance(form, sx.ConstructForm) and form.template is None:
                lines.append(pad + "WHERE " + self.group(query.where, depth, template=True))
            else:
                lines.append(pad + "WHERE " + self.group(query.where, depth))
        for clause in query.aggregates:
            lines.append(pad + self.aggregate_clause(clause, depth))
        if query.group_by:
            lines.append(pad + "GROUP BY " + " ".join(self.group_condition(c) for c in query.group_by))
        if query.having:
            lines.append(pad + "HAVING " + " ".join(f"({self.expr(e)})" for e in query.having))
        if query.order_by:
            lines.append(pad + "ORDER BY " + " ".join(self.order_condition(c) for c in query.order_by))
        if query.limit is not None:
            lines.append(pad + f"LIMIT {query.limit}")
        if query.offset is not None:
            lines.append(pad + f"OFFSET {query.offset}")
        if query.values is not None:
            lines.append(pad + "VALUES " + self.values(query.values))
        return "\n".join(lines)

    def form(self, form: sx.QueryForm, depth: int) -> str:
        if isinstance(form, sx.SelectForm):
            head = "SELECT" + (f" {form.stream_operator}" if form.stream_operator else "")
            head += f" {form.modifier}" if form.modifier else ""
            if form.items is None:
                return head + " *"
            return head + " " + " ".join(self.select_item(i) for i in form.items)
        if isinstance(form, sx.ConstructForm):
            if form.template is None:
                return "CONSTRUCT"
            return "CONSTRUCT " + self.triples_group(form.template, depth)
        if isinstance(form, sx.DescribeForm):
            if form.terms is None:
                return "DESCRIBE *"
            return "DESCRIBE " + " ".join(self.term(t) for t in form.terms)
        return "ASK"

    def select_item(self, item: sx.SelectItem) -> str:
        if item.expression is None:
            return self.term(item.var)
        return f"({self.expr(item.expression)} AS {self.term(item.var)})"

    def dataset(self, clause: sx.DatasetClause) -> str:
        named = "NAMED " if clause.named else ""
        if isinstance(clause, sx.FromGraph):
            return f"FROM {named}{self.term(clause.iri)}"
        window = f" {format_window(clause.window)}" if clause.window is not None else ""
        return f"FROM {named}STREAM {self.term(clause.iri)}{window}"

    def aggregate_clause(self, clause: sx.AggregateClause, depth: int) -> str:
        function = clause.function
        if clause.argument is not None:
            argument = "*" if clause.argument == "*" else self.term(clause.argument)
            function += f"({'DISTINCT ' if clause.distinct else ''}{argument})"
        groups = "{" + ", ".join(self.term(g) for g in clause.groups) + "}"
        body = f"({self.term(clause.var)}, {function}, {groups})"
        if clause.filter is not None:
            body += f" FILTER ({self.expr(clause.filter, depth)})"
        return "AGGREGATE { " + body + " }"

    def group_condition(self, condition: sx.GroupCondition) -> str:
        if condition.var is not None:
            return f"({self.expr(condition.expression)} AS {self.term(condition.var)})"
        if isinstance(condition.expression, (Variable, ex.BuiltinCall, ex.FunctionCall)):
            return self.expr(condition.expression)
        return f"({self.expr(condition.expression)})"

    def order_condition(self, condition: sx.OrderCondition) -> str:
        if condition.direction is not None:
            return f"{condition.direction}({self.expr(condition.expression)})"
        if isinstance(condition.expression, (Variable, ex.BuiltinCall, ex.FunctionCall)):
            return self.expr(condition.expression)
        return f"({self.expr(condition.expression)})"

    def values(self, block: sx.ValuesBlock) -> str:
        def value(v) -> str:
            return "UNDEF" if v is None else self.term(v)

        if block.one_var_form and len(block.vars) == 1 and all(len(r) == 1 for r in block.rows):
            return f"{self.term(block.vars[0])} {{ " + " ".join(value(r[0]) for r in block.rows) + " }"
        head = "(" + " ".join(self.term(v) for v in block.vars) + ")"
        rows = " ".join("(" + " ".join(value(v) for v in row) + ")" for row in block.rows)
        return f"{head} {{ {rows} }}" if rows else f"{head} {{ }}"

    # patterns

    def group(self, group: sx.GroupPattern, depth: int, template: bool = False) -> str:
        if not group.elements:
            return "{ }"
        if len(group.elements) == 1 and isinstance(group.elements[0], sx.SubSelect):
            return "{\n" + self.query(group.elements[0].query, depth + 1) + "\n" + INDENT * depth + "}"
        pad = INDENT * (depth + 1)
        lines = [self.element(e, depth + 1) for e in group.elements]
        return "{\n" + "\n".join(pad + line for line in lines) + "\n" + INDENT * depth + "}"

    def triples_group(self, triples: tuple[sx.TriplesSameSubject, ...], depth: int) -> str:
        if not triples:
            return "{ }"
        pad = INDENT * (depth + 1)
        return "{\n" + "\n".join(pad + self.triples(t, depth + 1) + " ." for t in triples) + "\n" + INDENT * depth + "}"

    def element(self, element: sx.GroupElement, depth: int) -> str:
        pad = INDENT * depth
        match element:
            case sx.TriplesBlock(triples):
                return ("\n" + pad).join(self.triples(t, depth) + " ." for t in triples)
            case sx.GroupPattern():
                return self.group(element, depth)
            case sx.UnionPattern(operands):
                return " UNION ".join(self.union_operand(o, depth) for o in operands)
            case sx.OptionalPattern(group):
                return "OPTIONAL " + self.group(group, depth)
            case sx.MinusPattern(group):
                return "MINUS " + self.group(group, depth)
            case sx.GraphPattern():
                return self.union_operand(element, depth)
            case sx.ServicePattern(endpoint, silent, group):
                return f"SERVICE {'SILENT ' if silent else ''}{self.term(endpoint)} " + self.group(group, depth)
            case sx.FilterPattern(expression):
                return f"FILTER ({self.expr(expression, depth)})"
            case sx.BindPattern(expression, var):
                return f"BIND ({self.expr(expression, depth)} AS {self.term(var)})"
            case sx.ValuesBlock():
                return "VALUES " + self.values(element)
        raise TypeError(f"cannot print group element {element!r}")

    def union_operand(self, operand, depth: int) -> str:
        if isinstance(operand, sx.GraphPattern):
            return f"GRAPH {self.term(operand.name)} " + self.group(operand.group, depth)
        return self.group(operand, depth)

    def triples(self, triples: sx.TriplesSameSubject, depth: int) -> str:
        subject = self.node(triples.subject, depth)
        if not triples.properties:
            return subject
        return subject + " " + self.property_list(triples.properties, depth)

    def property_list(self, properties: sx.PropertyList, depth: int) -> str:
        parts = []
        for verb, objects in properties:
            parts.append(self.verb(verb) + " " + ", ".join(self.node(o, depth) for o in objects))
        return " ; ".join(parts)

    def verb(self, verb: sx.Verb) -> str:
        if verb == RDF_TYPE:
            return "a"
        if isinstance(verb, (URIRef, Variable)):
            return self.term(verb)
        return self.path(verb)

    def node(self, node: sx.Node, depth: int) -> str:
        match node:
            case sx.Collection(items):
                return "(" + " ".join(self.node(i, depth) for i in items) + ")"
            case sx.BlankNodePropertyList(properties):
                return "[ " + self.property_list(properties, depth) + " ]"
            case sx.Anonymous():
                return "[]"
        return self.term(node)

    def path(self, path: sx.PathExpr, level: int = 0) -> str:
        """Print a path; level 0 = alternative, 1 = sequence, 2 = element (needs brackets if lower)."""
        match path:
            case URIRef():
                return "a" if path == RDF_TYPE else self.term(path)
            case sx.AlternativePath(options):
                text = " | ".join(self.path(o, 1) for o in options)
                return text if level <= 0 else f"({text})"
            case sx.SequencePath(steps):
                text = "/".join(self.path(s, 2) for s in steps)
                return text if level <= 1 else f"({text})"
            case sx.InversePath(inner):
                text = "^" + self.path(inner, 3)
                return text if level <= 2 else f"({text})"
            case sx.ModifiedPath(inner, modifier):
                text = self.path(inner, 4) + modifier
                return text if level <= 3 else f"({text})"
            case sx.NegatedPropertySet(members):
                items = ["^" + self.verb(iri) if inverse else self.verb(iri) for iri, inverse in members]
                if len(items) == 1:
                    return "!" + items[0]
                return "!(" + " | ".join(items) + ")"
        raise TypeError(f"cannot print path {path!r}")

    # terms and expressions

    def term(self, term) -> str:
        if isinstance(term, Literal) and term.language is None:
            lexical = str(term)
            if term.datatype in _SHORT_NUMBER and _SHORT_NUMBER[term.datatype].match(lexical):
                return lexical
            if term.datatype == XSD_BOOLEAN and lexical in ("true", "false"):
                return lexical
        if isinstance(term, BNode):
            return f"_:{term}"
        return format_term(term, self.prefixes)

    def expr(self, expr: ex.Expr, depth: int = 0, level: int = _OR) -> str:
        own, text = self._expr(expr, depth)
        return text if own >= level else f"({text})"

    def _expr(self, expr: ex.Expr, depth: int) -> tuple[int, str]:
        match expr:
            case ex.Or(left, right):
                return _OR, f"{self.expr(left, depth, _OR)} || {self.expr(right, depth, _AND)}"
            case ex.And(left, right):
                return _AND, f"{self.expr(left, depth, _AND)} && {self.expr(right, depth, _RELATIONAL)}"
            case ex.Compare(op, left, right):
                return _RELATIONAL, f"{self.expr(left, depth, _ADDITIVE)} {op} {self.expr(right, depth, _ADDITIVE)}"
            case ex.In(operand, options, negated):
                keyword = "NOT IN" if negated else "IN"
                listed = ", ".join(self.expr(o, depth) for o in options)
                return _RELATIONAL, f"{self.expr(operand, depth, _ADDITIVE)} {keyword} ({listed})"
            case ex.Arithmetic(op, left, right) if op in "+-":
                return _ADDITIVE, f"{self.expr(left, depth, _ADDITIVE)} {op} {self.expr(right, depth, _MULTIPLICATIVE)}"
            case ex.Arithmetic(op, left, right):
                return _MULTIPLICATIVE, f"{self.expr(left, depth, _MULTIPLICATIVE)} {op} {self.expr(right, depth, _UNARY)}"
            case ex.Not(operand):
                return _UNARY, "!" + self.expr(operand, depth, _PRIMARY)
            case ex.Unary(op, operand):
                inner = self.expr(operand, depth, _PRIMARY)
                # A sign glued to a number would be read back as a signed literal.
                return _UNARY, f"{op} {inner}" if inner[:1].isdigit() or inner[:1] in "+-." else op + inner
            case ex.BuiltinCall(name, args):
                spelled = ex.BUILTIN_SPELLING.get(name, name)
                if name == "BOUND":
                    return _PRIMARY, f"BOUND({self.term(args[0])})"
                return _PRIMARY, f"{spelled}(" + ", ".join(self.expr(a, depth) for a in args) + ")"
            case ex.FunctionCall(iri, args, distinct):
                inner = ", ".join(self.expr(a, depth) for a in args)
                return _PRIMARY, f"{self.term(iri)}({'DISTINCT ' if distinct else ''}{inner})"
            case ex.Exists(pattern, negated):
                keyword = "NOT EXISTS" if negated else "EXISTS"
                return _PRIMARY, f"{keyword} " + self.group(pattern, depth)
            case ex.AggregateCall(name, argument, distinct, separator):
                inner = "*" if argument is None else self.expr(argument, depth)
                if distinct:
                    inner = "DISTINCT " + inner
                if separator is not None:
                    inner += f" ; SEPARATOR={format_term(Literal(separator))}"
                return _PRIMARY, f"{name}({inner})"
            case ex.Timestamp(var, stream):
                inner = self.term(var) + ("" if stream is None else ", " + self.term(stream))
                return _PRIMARY, f"timestamp({inner})"
            case ex.TripleTimestamp():
                raise TypeError("f:timestamp is a function call in the syntax tree")
        return _PRIMARY, self.term(expr)


def format_expression(expr: ex.Expr, prefixes: dict[str, str] | None = None) -> str:
    """An expression in SPARQL syntax."""
    return _Printer(prefixes or {}).expr(expr)



def format_sparql_term(term, prefixes: dict[str, str] | None = None) -> str:
    """A term as the printer writes it: short numbers and booleans, IRIs compacted with the prefixes."""
    return _Printer(prefixes or {}).term(term)
