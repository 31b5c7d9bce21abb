"""Plans as S-expressions, in the style of Jena's SSE: one operator per line, children indented.

``format_plan(plan)`` prints a whole ``QueryPlan`` (registration, dataset, pattern); ``format_operator(op)``
prints a pattern. Triple patterns that the optimizer has assigned to sources show them first:
``(bgp (from (window <s> (range 10m) (step 1m))) (triple ?t t:registers ?car))``. Optimizer fixtures and
``csparql explain`` use this form, so a test reads like the plan it checks; ``csparql.core.algebra.sexpr_reader``
reads it back.
"""

from __future__ import annotations

from rdflib import URIRef, Variable

from csparql.core.algebra import operators as alg
from csparql.core.language import expressions as ex
from csparql.core.language import syntax as sx
from csparql.core.language.printer import format_sparql_term
from csparql.core.windows import LogicalWindow, format_duration

INDENT = "  "


def format_plan(plan: alg.QueryPlan) -> str:
    """The whole plan: prefixes, result form, registration, dataset and pattern."""
    prefixes = dict(plan.prefixes)
    printer = _SexprPrinter(prefixes)
    lines = []
    depth = 0
    if plan.prefixes:
        decls = " ".join(f"({p}: <{n}>)" for p, n in plan.prefixes)
        lines.append(f"(prefix ({decls})")
        depth = 1
    pad = INDENT * depth
    operator = f" {plan.stream_operator.lower()}" if plan.stream_operator != alg.RSTREAM else ""
    lines.append(pad + "(query " + printer.form(plan.form) + operator)
    if plan.registration is not None:
        r = plan.registration
        every = f" (every {format_duration(r.computed_every)})" if r.computed_every else ""
        entailment = f" (entailment {' '.join(n.lower() for n in r.entailment)})" if r.entailment else ""
        lines.append(pad + INDENT + f"(register {r.kind.lower()} {r.name}{every}{entailment})")
    lines.append(pad + INDENT + "(dataset")
    lines.append(pad + INDENT * 2 + "(default " + " ".join(printer.source(s) for s in plan.dataset.default) + ")")
    lines.append(pad + INDENT * 2 + "(named " + " ".join(printer.source(s) for s in plan.dataset.named) + "))")
    lines.extend(printer.operator(plan.pattern, depth + 1))
    closing = ")" * (1 + (1 if plan.prefixes else 0))
    lines[-1] += closing
    return "\n".join(lines) + "\n"


def format_operator(op: alg.Operator, prefixes: dict[str, str] | None = None) -> str:
    """A pattern as an indented S-expression."""
    return "\n".join(_SexprPrinter(prefixes or {}).operator(op, 0)) + "\n"


def format_path(path: sx.PathExpr, prefixes: dict[str, str] | None = None) -> str:
    """A property path, e.g. ``(path+ <http://www.geonames.org/ontology#parentFeature>)``."""
    return _SexprPrinter(prefixes or {}).path(path)


def format_expression(expression: ex.Expr, prefixes: dict[str, str] | None = None) -> str:
    """One expression, e.g. ``(count distinct ?car)`` or ``(> ?n 5)``."""
    return _SexprPrinter(prefixes or {}).expr(expression)


def format_source(source: alg.Source, prefixes: dict[str, str] | None = None) -> str:
    """A stream window or static graph, e.g. ``(window <s> (range 30m) (step 5m))`` or ``(graph default)``."""
    return _SexprPrinter(prefixes or {}).source(source)


class _SexprPrinter:
    def __init__(self, prefixes: dict[str, str]):
        self.prefixes = prefixes

    def term(self, term) -> str:
        return format_sparql_term(term, self.prefixes)

    def form(self, form: alg.ResultForm) -> str:
        match form:
            case alg.SelectResult(vars_):
                return "select (" + " ".join(self.term(v) for v in vars_) + ")"
            case alg.ConstructResult(template):
                return "construct (" + " ".join(self.triple(t) for t in template) + ")"
            case alg.DescribeResult(terms):
                return "describe (" + " ".join(self.term(t) for t in terms) + ")"
        return "ask"

    def source(self, source: alg.Source) -> str:
        if isinstance(source, alg.StreamWindow):
            window = source.window
            if isinstance(window, LogicalWindow):
                spec = f"(range {format_duration(window.range)}) (step {format_duration(window.step)})"
            else:
                spec = f"(triples {window.count})"
            graph = f" (graph {self.term(source.graph)})" if source.graph is not None else ""
            return f"(window {self.term(source.iri)} {spec}{graph})"
        return f"(graph {source})" if source.iri is None or source.iri == alg.ALL_NAMED_IRI else f"(graph {self.term(source.iri)})"

    def triple(self, t: alg.TriplePattern) -> str:
        return f"(triple {self.term(t.subject)} {self.term(t.predicate)} {self.term(t.object)})"

    def sources(self, sources) -> str:
        return "(" + " ".join(["from", *(self.source(s) for s in sources)]) + ")"

    def operator(self, op: alg.Operator, depth: int) -> list[str]:
        pad = INDENT * depth

        def nest(head: str, *kids: alg.Operator) -> list[str]:
            lines = [pad + "(" + head]
            for kid in kids:
                lines.extend(self.operator(kid, depth + 1))
            lines[-1] += ")"
            return lines

        match op:
            case alg.BGP(triples, sources):
                parts = ([self.sources(sources)] if sources is not None else []) + [self.triple(t) for t in triples]
                if not parts:
                    return [pad + "(bgp)"]
                if len(parts) == 1:
                    return [pad + "(bgp " + parts[0] + ")"]
                lines = [pad + "(bgp " + parts[0]] + [pad + INDENT + p for p in parts[1:]]
                lines[-1] += ")"
                return lines
            case alg.PathPattern(subject, path, obj, sources):
                head = (self.sources(sources) + " ") if sources is not None else ""
                return [pad + f"(path {head}{self.term(subject)} {self.path(path)} {self.term(obj)})"]
            case alg.Join(left, right):
                return nest("join", left, right)
            case alg.LeftJoin(left, right, expression):
                lines = nest("leftjoin", left, right)
                if expression is not None:
                    lines[-1] = lines[-1][:-1] + "\n" + pad + INDENT + self.expr(expression) + ")"
                return lines
            case alg.Filter(expression, inner):
                return nest(f"filter {self.expr(expression)}", inner)
            case alg.Union(left, right):
                return nest("union", left, right)
            case alg.Minus(left, right):
                return nest("minus", left, right)
            case alg.Graph(name, inner):
                return nest(f"graph {self.term(name)}", inner)
            case alg.Extend(inner, var, expression):
                return nest(f"extend (({self.term(var)} {self.expr(expression)}))", inner)
            case alg.Table(vars_, rows):
                head = "table (vars " + " ".join(self.term(v) for v in vars_) + ")"
                body = []
                for row in rows:
                    cells = " ".join(f"({self.term(v)} {self.term(x)})" for v, x in zip(vars_, row) if x is not None)
                    body.append(f"(row {cells})" if cells else "(row)")
                return [pad + "(" + " ".join([head, *body]) + ")"]
            case alg.PaneRows(vars_):
                return [pad + "(pane-rows (vars " + " ".join(self.term(v) for v in vars_) + "))"]
            case alg.Group(inner, keys, aggregates):
                key_text = " ".join(
                    self.expr(k.expression) if k.var is None or k.var == k.expression else f"({self.term(k.var)} {self.expr(k.expression)})"
                    for k in keys
                )
                aggregate_text = " ".join(f"({self.term(v)} {self.expr(a)})" for v, a in aggregates)
                return nest(f"group ({key_text}) ({aggregate_text})", inner)
            case alg.StreamAggregate(inner, clauses):
                return nest("aggregate (" + " ".join(self.clause(c) for c in clauses) + ")", inner)
            case alg.OrderBy(inner, conditions):
                conds = " ".join(f"(desc {self.expr(e)})" if d else self.expr(e) for e, d in conditions)
                return nest(f"order ({conds})", inner)
            case alg.Project(inner, vars_):
                return nest("project (" + " ".join(self.term(v) for v in vars_) + ")", inner)
            case alg.Distinct(inner):
                return nest("distinct", inner)
            case alg.Reduced(inner):
                return nest("reduced", inner)
            case alg.Slice(inner, start, length):
                return nest(f"slice {start} {'_' if length is None else length}", inner)
        raise TypeError(f"cannot print operator {type(op).__name__}")

    def clause(self, clause: alg.AggregateSpec) -> str:
        function = clause.function.lower()
        if clause.distinct:
            function += " distinct"
        argument = f" {self.term(clause.argument)}" if clause.argument is not None else ""
        groups = " ".join(self.term(g) for g in clause.groups)
        text = f"({self.term(clause.var)} ({function}{argument}) ({groups})"
        if clause.filter is not None:
            text += f" (filter {self.expr(clause.filter)})"
        return text + ")"

    def path(self, path: sx.PathExpr) -> str:
        match path:
            case URIRef():
                return self.term(path)
            case sx.SequencePath(steps):
                return "(seq " + " ".join(self.path(s) for s in steps) + ")"
            case sx.AlternativePath(options):
                return "(alt " + " ".join(self.path(o) for o in options) + ")"
            case sx.InversePath(inner):
                return f"(reverse {self.path(inner)})"
            case sx.ModifiedPath(inner, modifier):
                return f"(path{modifier} {self.path(inner)})"
            case sx.NegatedPropertySet(members):
                return "(notoneof " + " ".join(("^" if inv else "") + self.term(iri) for iri, inv in members) + ")"
        raise TypeError(f"cannot print path {path!r}")

    def expr(self, expression: ex.Expr) -> str:
        match expression:
            case ex.Or(left, right):
                return f"(|| {self.expr(left)} {self.expr(right)})"
            case ex.And(left, right):
                return f"(&& {self.expr(left)} {self.expr(right)})"
            case ex.Not(operand):
                return f"(! {self.expr(operand)})"
            case ex.Compare(op, left, right) | ex.Arithmetic(op, left, right):
                return f"({op} {self.expr(left)} {self.expr(right)})"
            case ex.In(operand, options, negated):
                name = "notin" if negated else "in"
                return f"({name} {self.expr(operand)}" + "".join(" " + self.expr(o) for o in options) + ")"
            case ex.Unary(op, operand):
                return f"({op} {self.expr(operand)})"
            case ex.BuiltinCall(name, args):
                return f"({name.lower()}" + "".join(" " + self.expr(a) for a in args) + ")"
            case ex.FunctionCall(iri, args, distinct):
                return f"(call {self.term(iri)}{' distinct' if distinct else ''}" + "".join(" " + self.expr(a) for a in args) + ")"
            case ex.Exists(pattern, negated):
                name = "notexists" if negated else "exists"
                inner = " ".join(line.strip() for line in self.operator(pattern, 0)) if isinstance(pattern, alg.Operator) else "…"
                return f"({name} {inner})"
            case ex.AggregateCall(name, argument, distinct, separator):
                parts = [name.lower()]
                if distinct:
                    parts.append("distinct")
                if argument is not None:
                    parts.append(self.expr(argument))
                if separator is not None:
                    parts.append(f"(separator {format_sparql_term(__import__('rdflib').Literal(separator))})")
                return "(" + " ".join(parts) + ")"
            case ex.Timestamp(var, stream, _):
                return f"(timestamp {self.term(var)}" + (f" {self.term(stream)})" if stream is not None else ")")
            case ex.TripleTimestamp(s, p, o):
                return f"(triple-timestamp {self.expr(s)} {self.expr(p)} {self.expr(o)})"
        return self.term(expression)


__all__ = ["format_plan", "format_operator", "format_expression", "format_source", "Variable"]
