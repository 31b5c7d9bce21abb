"""Syntax tree to algebra: SPARQL 1.1 §18.2 ("Translation to the SPARQL Algebra") plus C-SPARQL.

``translate(query)`` returns a ``QueryPlan``. Along the way it refuses what needs variable scopes to be seen:
a BIND or SELECT expression that rebinds an in-scope variable, a VALUES row of the wrong length, an
aggregate outside SELECT/HAVING/ORDER BY, a projected variable that is not grouped, a timestamp() naming a
stream the query does not read.

Generated variables are deterministic (``.p0``, ``.agg0``, ``_:.c0``…), so translating the same text twice,
or the printed form of a query, gives equal plans.
"""

from __future__ import annotations

from rdflib import BNode, URIRef, Variable

from csparql.core.algebra import operators as alg
from csparql.core.algebra.variables import in_scope, visible
from csparql.core.language import expressions as ex
from csparql.core.language import syntax as sx
from csparql.core.language.errors import Diagnostic, QuerySemanticError, Span
from csparql.core.terms import CSPARQL_TIMESTAMP_FUNCTION, RDF_FIRST, RDF_NIL, RDF_REST
from csparql.core.windows import LogicalWindow, PhysicalWindow, Window


def window_of(spec: sx.WindowSpec) -> Window:
    """The window a written window clause stands for (``TUMBLING`` means STEP = RANGE)."""
    if isinstance(spec, sx.PhysicalWindowSpec):
        return PhysicalWindow(spec.count)
    step = spec.step.micros if spec.step is not None else spec.range.micros
    return LogicalWindow(spec.range.micros, step)


def dataset_of(query: sx.Query) -> alg.Dataset:
    """The dataset of an evaluation (docs/semantics.md): stream windows and FROM graphs (or the default static
    graph) make the default graph; every stream window and every FROM NAMED graph is a named graph, and so is
    every named static graph of the store when the query names no static graph at all. A stream window is named
    by its stream, or by its ``graph`` (an RSP-QL query reading one stream through several different
    windows)."""
    streams: dict[tuple[URIRef, URIRef | None], alg.StreamWindow] = {}
    default: list[alg.Source] = []
    named: list[alg.Source] = []
    for clause in query.datasets:
        if isinstance(clause, sx.FromStream) and clause.window is not None:
            source = streams.setdefault(
                (clause.iri, clause.graph), alg.StreamWindow(clause.iri, window_of(clause.window), clause.graph)
            )
            if not clause.named and source not in default:
                default.append(source)
            if source not in named:
                named.append(source)
    graphs = [alg.StaticGraph(c.iri) for c in query.datasets if isinstance(c, sx.FromGraph) and not c.named]
    named_graphs = [alg.StaticGraph(c.iri) for c in query.datasets if isinstance(c, sx.FromGraph) and c.named]
    default.extend(dict.fromkeys(graphs) or [alg.DEFAULT_GRAPH])
    # As in SPARQL (§13.2), a query that describes its static dataset (FROM or FROM NAMED) gets exactly the
    # named graphs it names; one that names no static graph sees every named static graph of the store.
    named.extend(dict.fromkeys(named_graphs) if graphs or named_graphs else [alg.ALL_NAMED_GRAPHS])
    return alg.Dataset(tuple(default), tuple(named))


def translate(query: sx.Query) -> alg.QueryPlan:
    """The algebra of a parsed (and checked) query."""
    return Translation(query).plan()


def join(left: alg.Operator, right: alg.Operator) -> alg.Operator:
    """``Join(left, right)`` with the empty BGP simplified away (§18.2.2.8)."""
    if left == alg.BGP():
        return right
    if right == alg.BGP():
        return left
    return alg.Join(left, right)


def conjunction(expressions: list[ex.Expr]) -> ex.Expr:
    """The expressions joined with ``&&``, left to right."""
    result = expressions[0]
    for expression in expressions[1:]:
        result = ex.And(result, expression)
    return result


def _error(message: str, span: Span | None) -> QuerySemanticError:
    return QuerySemanticError(Diagnostic(message, span))


class Translation:
    """The translation of one query, done once: ``where()`` is the WHERE clause's pattern (what the C-SPARQL
    checks read its in-scope variables from, before the rest is translated), ``plan()`` the whole plan, built
    on that same pattern. ``translate(query)`` is ``Translation(query).plan()``."""

    def __init__(self, query: sx.Query):
        self.query = query
        self.stream_iris = {c.iri for c in query.streams}
        self.path_vars = 0
        self.node_vars = 0
        self.aggregate_vars = 0
        self._where: alg.Operator | None = None

    def where(self) -> alg.Operator:
        """The pattern of the query's WHERE clause (the empty BGP without one), translated on first use."""
        if self._where is None:
            query = self.query
            self._where = self.group(query.where) if query.where is not None else alg.BGP()
        return self._where

    # fresh variables

    def fresh_path_var(self) -> Variable:
        var = Variable(f".p{self.path_vars}")
        self.path_vars += 1
        return var

    def fresh_node(self) -> Variable:
        var = Variable(f"_:.c{self.node_vars}")
        self.node_vars += 1
        return var

    def fresh_aggregate_var(self) -> Variable:
        var = Variable(f".agg{self.aggregate_vars}")
        self.aggregate_vars += 1
        return var

    # the query

    def plan(self) -> alg.QueryPlan:
        query = self.query
        registration = None
        if query.registration is not None:
            r = query.registration
            registration = alg.Registration(
                r.kind, r.name, r.computed_every.micros if r.computed_every else None, tuple(r.entailment)
            )
        form, pattern = self.query_pattern(query, top_level=True)
        operator = query.form.stream_operator if isinstance(query.form, sx.SelectForm) else None
        return alg.QueryPlan(
            form=form,
            pattern=pattern,
            dataset=dataset_of(query),
            registration=registration,
            prefixes=query.prologue.prefixes,
            base=query.prologue.base,
            stream_operator=operator or alg.RSTREAM,
        )

    def query_pattern(self, query: sx.Query, top_level: bool = False) -> tuple[alg.ResultForm, alg.Operator]:
        """§18.2.4 and §18.2.5: the pattern of a query or sub-select, with its modifiers."""
        if top_level:
            pattern = self.where()
        else:
            pattern = self.group(query.where) if query.where is not None else alg.BGP()
        if query.aggregates:
            pattern = alg.StreamAggregate(pattern, tuple(self.aggregate_spec(c) for c in query.aggregates))

        form = query.form
        select_items = form.items if isinstance(form, sx.SelectForm) else None
        aggregates: list[tuple[Variable, ex.AggregateCall]] = []
        grouped = bool(query.group_by) or any(
            ex.contains_aggregate(e)
            for e in [
                *(i.expression for i in select_items or () if i.expression is not None),
                *query.having,
                *(c.expression for c in query.order_by),
            ]
        )
        group_vars: set[Variable] = set()
        if grouped:
            if isinstance(form, sx.SelectForm) and form.items is None:
                raise _error("SELECT * is not allowed with GROUP BY or aggregates: list the grouped variables", form.span)
            keys, group_vars = self.group_keys(query.group_by)
            pattern = alg.Group(pattern, keys, ())
        having = [self.expression(h, allow_aggregates=grouped, collect=aggregates) for h in query.having]
        extends, projected = self.select_expressions(select_items or (), pattern, grouped, group_vars, aggregates)
        order = [
            (self.expression(c.expression, allow_aggregates=grouped, collect=aggregates), c.direction == "DESC")
            for c in query.order_by
        ]
        if grouped:
            pattern = alg.Group(pattern.input, pattern.keys, tuple(aggregates))
        if having:
            pattern = alg.Filter(conjunction(having), pattern)
        if query.values is not None:
            pattern = join(pattern, self.values(query.values))
        for var, expression, _ in extends:
            pattern = alg.Extend(pattern, var, expression)
        if order:
            pattern = alg.OrderBy(pattern, tuple(order))
        result, pattern = self.result_form(query, pattern, projected)
        if query.offset is not None or query.limit is not None:
            pattern = alg.Slice(pattern, query.offset or 0, query.limit)
        return result, pattern

    def group_keys(self, conditions) -> tuple[tuple[alg.GroupKey, ...], set[Variable]]:
        """§18.2.4.1: the keys of a GROUP BY, and the variables they bind (a grouped variable, or the ``AS``
        variable of a grouped expression)."""
        keys = []
        group_vars: set[Variable] = set()
        for condition in conditions:
            expression = self.expression(condition.expression, allow_aggregates=False)
            if condition.var is not None:
                keys.append(alg.GroupKey(expression, condition.var))
                group_vars.add(condition.var)
            elif isinstance(expression, Variable):
                keys.append(alg.GroupKey(expression, expression))
                group_vars.add(expression)
            else:
                keys.append(alg.GroupKey(expression))
        return tuple(keys), group_vars

    def select_expressions(self, select_items, pattern: alg.Operator, grouped: bool, group_vars: set[Variable],
                           aggregates: list[tuple[Variable, ex.AggregateCall]],
                           ) -> tuple[list[tuple[Variable, ex.Expr, Span | None]], list[Variable]]:
        """§18.2.4.4: the SELECT expressions, in order, as ``(variable, expression, span)`` to extend the pattern
        with, and the projected variables; a projected variable that is neither grouped nor aggregated, and an
        ``AS`` variable bound before it, are refused. The aggregates found are added to ``aggregates``."""
        extends: list[tuple[Variable, ex.Expr, Span | None]] = []
        projected: list[Variable] = []
        bound_so_far = set(in_scope(pattern)) if not grouped else set(group_vars)
        for item in select_items:
            if item.expression is None:
                if grouped and item.var not in group_vars and item.var not in {v for v, _, _ in extends}:
                    raise _error(
                        f"?{item.var} is projected but is neither grouped nor an aggregate: add it to GROUP BY "
                        f"or aggregate it, e.g. (SAMPLE(?{item.var}) AS ?{item.var})",
                        item.span,
                    )
                projected.append(item.var)
                continue
            expression = self.expression(item.expression, allow_aggregates=grouped, collect=aggregates)
            if grouped:
                loose = _non_aggregated_variables(item.expression) - group_vars - {v for v, _, _ in extends}
                if loose:
                    name = sorted(loose)[0]
                    raise _error(
                        f"?{name} is used in a SELECT expression but is neither grouped nor inside an aggregate",
                        item.expression_span or item.span,
                    )
            if item.var in bound_so_far or item.var in projected:
                raise _error(
                    f"?{item.var} is already bound: (… AS ?{item.var}) needs a variable not used before it", item.span
                )
            extends.append((item.var, expression, item.span))
            bound_so_far.add(item.var)
            projected.append(item.var)
        return extends, projected

    def result_form(self, query: sx.Query, pattern: alg.Operator, projected: list[Variable],
                    ) -> tuple[alg.ResultForm, alg.Operator]:
        """§18.2.5: the query's result form, and its pattern projected (with DISTINCT or REDUCED) for a SELECT."""
        form = query.form
        if isinstance(form, sx.SelectForm):
            vars_ = tuple(projected) if form.items is not None else visible(pattern)
            pattern = alg.Project(pattern, vars_)
            if form.modifier == "DISTINCT":
                pattern = alg.Distinct(pattern)
            elif form.modifier == "REDUCED":
                pattern = alg.Reduced(pattern)
            return alg.SelectResult(vars_), pattern
        if isinstance(form, sx.ConstructForm):
            template = form.template if form.template is not None else _template_of(query.where)
            return alg.ConstructResult(self.template(template)), pattern
        if isinstance(form, sx.DescribeForm):
            terms = form.terms if form.terms is not None else visible(pattern)
            return alg.DescribeResult(tuple(terms)), pattern
        return alg.AskResult(), pattern

    def aggregate_spec(self, clause: sx.AggregateClause) -> alg.AggregateSpec:
        argument = clause.argument if isinstance(clause.argument, Variable) else None
        return alg.AggregateSpec(
            var=clause.var,
            function=clause.function,
            argument=argument,
            distinct=clause.distinct,
            groups=clause.groups,
            filter=self.expression(clause.filter) if clause.filter is not None else None,
        )

    # group graph patterns (§18.2.2.6)

    def group(self, group: sx.GroupPattern) -> alg.Operator:
        pattern, condition = self.group_and_condition(group)
        return pattern if condition is None else alg.Filter(condition, pattern)

    def group_and_condition(self, group: sx.GroupPattern) -> tuple[alg.Operator, ex.Expr | None]:
        """A group's pattern and the conjunction of the group's own FILTERs (None when it has none), kept apart
        because an OPTIONAL lifts exactly these into its LeftJoin condition — not the FILTERs of a group nested
        inside it (§18.2.2.6; W3C test dawg-optional-filter-005-not-simplified)."""
        filters: list[ex.Expr] = []
        pattern: alg.Operator = alg.BGP()
        for element in group.elements:
            match element:
                case sx.FilterPattern(expression):
                    filters.append(self.expression(expression))
                case sx.TriplesBlock():
                    pattern = join(pattern, self.triples_block(element))
                case sx.OptionalPattern(inner):
                    optional, condition = self.group_and_condition(inner)
                    pattern = alg.LeftJoin(pattern, optional, condition)
                case sx.MinusPattern(inner):
                    pattern = alg.Minus(pattern, self.group(inner))
                case sx.BindPattern(expression, var):
                    if var in in_scope(pattern):
                        raise _error(
                            f"?{var} is already bound in this group before the BIND: BIND needs a new variable",
                            element.var_span,
                        )
                    pattern = alg.Extend(pattern, var, self.expression(expression))
                case sx.ValuesBlock():
                    pattern = join(pattern, self.values(element))
                case sx.UnionPattern(operands):
                    union = self.union_operand(operands[0])
                    for operand in operands[1:]:
                        union = alg.Union(union, self.union_operand(operand))
                    pattern = join(pattern, union)
                case sx.GraphPattern():
                    pattern = join(pattern, self.union_operand(element))
                case sx.GroupPattern():
                    pattern = join(pattern, self.group(element))
                case sx.SubSelect(sub):
                    _, sub_pattern = self.query_pattern(sub)
                    pattern = join(pattern, sub_pattern)
                case _:
                    raise TypeError(f"unknown group element {element!r}")
        return pattern, conjunction(filters) if filters else None

    def union_operand(self, operand: sx.GroupPattern | sx.GraphPattern) -> alg.Operator:
        if isinstance(operand, sx.GraphPattern):
            return alg.Graph(operand.name, self.group(operand.group))
        return self.group(operand)

    def values(self, block: sx.ValuesBlock) -> alg.Table:
        spans = block.row_spans or ()
        for index, row in enumerate(block.rows):
            if len(row) != len(block.vars):
                span = spans[index] if index < len(spans) else block.span
                raise _error(
                    f"this VALUES row has {len(row)} value(s) but the block names {len(block.vars)} variable(s)",
                    span,
                )
        return alg.Table(block.vars, block.rows)

    # triples and paths (§18.2.2.1, §18.2.2.3 – §18.2.2.5)

    def triples_block(self, block: sx.TriplesBlock) -> alg.Operator:
        items: list[alg.TriplePattern | alg.PathPattern] = []
        for triples in block.triples:
            self.expand(triples, items)
        pattern: alg.Operator = alg.BGP()
        run: list[alg.TriplePattern] = []
        for item in items:
            if isinstance(item, alg.TriplePattern):
                run.append(item)
                continue
            if run:
                pattern = join(pattern, alg.BGP(tuple(run)))
                run = []
            pattern = join(pattern, item)
        if run:
            pattern = join(pattern, alg.BGP(tuple(run)))
        return pattern

    def expand(self, triples: sx.TriplesSameSubject, out: list) -> None:
        subject = self.node(triples.subject, out)
        for verb, objects in triples.properties:
            for obj in objects:
                self.path_triples(subject, verb, self.node(obj, out), out)

    def node(self, node: sx.Node, out: list):
        """The term standing for a node; collections and ``[ … ]`` add their triples to ``out``."""
        match node:
            case sx.Anonymous(index):
                return Variable(f"_:.a{index}")
            case sx.BlankNodePropertyList(properties):
                subject = self.fresh_node()
                for verb, objects in properties:
                    for obj in objects:
                        self.path_triples(subject, verb, self.node(obj, out), out)
                return subject
            case sx.Collection(items):
                head = RDF_NIL
                cells = [self.fresh_node() for _ in items]
                for index, item in enumerate(items):
                    value = self.node(item, out)
                    out.append(alg.TriplePattern(cells[index], RDF_FIRST, value))
                    rest = cells[index + 1] if index + 1 < len(items) else RDF_NIL
                    out.append(alg.TriplePattern(cells[index], RDF_REST, rest))
                return cells[0] if cells else head
            case BNode():
                return Variable(f"_:{node}")
        return node

    def path_triples(self, subject, verb, obj, out: list) -> None:
        """Translate ``subject verb obj``: plain predicates, inverses and sequences become triples (§18.2.2.3)."""
        match verb:
            case Variable() | URIRef():
                out.append(alg.TriplePattern(subject, verb, obj))
            case sx.InversePath(inner) if isinstance(inner, URIRef):
                out.append(alg.TriplePattern(obj, inner, subject))
            case sx.InversePath(sx.SequencePath(steps)):
                # S ^(p1/p2) O  is  O p1/p2 S.
                self.path_triples(obj, sx.SequencePath(steps), subject, out)
            case sx.InversePath(sx.InversePath(inner)):
                self.path_triples(subject, inner, obj, out)
            case sx.SequencePath(steps):
                current = subject
                for step in steps[:-1]:
                    nxt = self.fresh_path_var()
                    self.path_triples(current, step, nxt, out)
                    current = nxt
                self.path_triples(current, steps[-1], obj, out)
            case _:
                out.append(alg.PathPattern(subject, verb, obj))

    def template(self, template: tuple[sx.TriplesSameSubject, ...]) -> tuple[alg.TriplePattern, ...]:
        items: list = []
        for triples in template:
            self.expand(triples, items)
        return tuple(_template_term(t) for t in items)

    # expressions

    def expression(
        self,
        expression: ex.Expr,
        allow_aggregates: bool = False,
        collect: list[tuple[Variable, ex.AggregateCall]] | None = None,
    ) -> ex.Expr:
        match expression:
            case ex.AggregateCall(name, argument, distinct, separator):
                if not allow_aggregates or collect is None:
                    raise _error(
                        f"the aggregate {name}(…) is only allowed in SELECT, HAVING and ORDER BY; "
                        "in an AGGREGATE clause write (?var, {name}(?arg), {{?group}})",
                        None,
                    )
                inner = self.expression(argument) if argument is not None else None
                call = ex.AggregateCall(name, inner, distinct, separator)
                for var, existing in collect:
                    if existing == call:
                        return var
                var = self.fresh_aggregate_var()
                collect.append((var, call))
                return var
            case ex.Exists(pattern, negated):
                return ex.Exists(self.group(pattern), negated)
            case ex.FunctionCall(iri, args, distinct) if iri == CSPARQL_TIMESTAMP_FUNCTION:
                if len(args) != 3:
                    raise _error(
                        f"f:timestamp takes three arguments (?s, ?p, ?o), not {len(args)}", None
                    )
                s, p, o = (self.expression(a) for a in args)
                return ex.TripleTimestamp(s, p, o)
            case ex.Timestamp(var, stream, span):
                if isinstance(stream, URIRef) and stream not in self.stream_iris:
                    raise _error(
                        f"timestamp() names the stream <{stream}>, which this query does not read: "
                        "name one of its FROM STREAM IRIs",
                        span,
                    )
                return expression
            case ex.Or(l, r):
                return ex.Or(self.expression(l, allow_aggregates, collect), self.expression(r, allow_aggregates, collect))
            case ex.And(l, r):
                return ex.And(self.expression(l, allow_aggregates, collect), self.expression(r, allow_aggregates, collect))
            case ex.Not(o):
                return ex.Not(self.expression(o, allow_aggregates, collect))
            case ex.Compare(op, l, r):
                return ex.Compare(op, self.expression(l, allow_aggregates, collect), self.expression(r, allow_aggregates, collect))
            case ex.In(o, options, negated):
                return ex.In(
                    self.expression(o, allow_aggregates, collect),
                    tuple(self.expression(x, allow_aggregates, collect) for x in options),
                    negated,
                )
            case ex.Arithmetic(op, l, r):
                return ex.Arithmetic(op, self.expression(l, allow_aggregates, collect), self.expression(r, allow_aggregates, collect))
            case ex.Unary(op, o):
                return ex.Unary(op, self.expression(o, allow_aggregates, collect))
            case ex.BuiltinCall(name, args):
                return ex.BuiltinCall(name, tuple(self.expression(a, allow_aggregates, collect) for a in args))
            case ex.FunctionCall(iri, args, distinct):
                return ex.FunctionCall(iri, tuple(self.expression(a, allow_aggregates, collect) for a in args), distinct)
        return expression


def _non_aggregated_variables(expression: ex.Expr) -> set[Variable]:
    """Variables of a SELECT expression that occur outside every aggregate (and outside EXISTS)."""
    if isinstance(expression, Variable):
        return {expression}
    if isinstance(expression, (ex.AggregateCall, ex.Exists)):
        return set()
    found: set[Variable] = set()
    for child in ex.children(expression):
        found |= _non_aggregated_variables(child)
    return found


def _template_of(where: sx.GroupPattern | None) -> tuple[sx.TriplesSameSubject, ...]:
    """The template of ``CONSTRUCT WHERE { triples }``: the triples of the pattern."""
    if where is None:
        return ()
    triples: list[sx.TriplesSameSubject] = []
    for element in where.elements:
        if isinstance(element, sx.TriplesBlock):
            triples.extend(element.triples)
    return tuple(triples)


def _template_term_of(term):
    if isinstance(term, Variable) and term.startswith("_:"):
        return BNode(term[2:])
    return term


def _template_term(item) -> alg.TriplePattern:
    if isinstance(item, alg.PathPattern):
        raise _error("a CONSTRUCT template cannot hold a property path", None)
    return alg.TriplePattern(*(_template_term_of(t) for t in (item.subject, item.predicate, item.object)))

