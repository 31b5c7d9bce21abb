"""Lark's parse tree to the syntax tree of ``csparql.core.language.syntax``: ``TreeBuilder``.

The builder walks the parse tree top-down (prefixes and BASE are known before the IRIs that use them; blank
node labels are scoped to the basic graph pattern they appear in), resolving prefixed names and relative IRIs
and decoding escapes on the way. Each kind of node — query form, solution modifier, group element, union
operand, verb, graph node, path step, term, expression — is dispatched through a table from grammar rule to
method (``QUERY_FORMS``, ``MODIFIERS``, ``GROUP_ELEMENTS``, ``UNION_OPERANDS``, ``VERBS``, ``NODES``,
``PATHS``, ``TERMS``, ``EXPRESSIONS``), so a dialect extends the builder by adding rules to a table or
overriding a rule's method (``csparql.core.language.rspql.RspqlTreeBuilder``). A node's parts are taken by the
rule or terminal they are (``_child``, ``_token``) or by the shape of the rule (``_subtrees``: the operands
of an operator, the expression and variable of ``BIND``), never by counting the keywords before them.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from urllib.parse import urljoin

from lark import Token, Tree
from rdflib import BNode, URIRef, Variable

from csparql.core.language import expressions as ex
from csparql.core.language import parse_tree as pt
from csparql.core.language import syntax as sx
from csparql.core.language.errors import (
    Diagnostic,
    QuerySemanticError,
    QuerySyntaxError,
    Span,
    UnsupportedFeatureError,
    shorten,
)
from csparql.core.language.escapes import EscapeError, unescape
from csparql.core.language.limits import MAX_INTEGER_DIGITS
from csparql.core.terms import RDF_NIL, RDF_TYPE, XSD_BOOLEAN, XSD_DECIMAL, XSD_DOUBLE, XSD_INTEGER, literal
from csparql.core.windows import MAX_COUNT, canonical_unit, unit_micros

_PN_LOCAL_ESCAPE = re.compile(r"\\([_~.\-!$&'()*+,;=/?#@%])")
# The GROUP BY conditions written without brackets (a variable, a call); any other is an expression in brackets.
_UNBRACKETED_CONDITIONS = frozenset(
    {"var", "builtin_call", "builtin_fixed", "builtin_list", "function_call", "exists", "not_exists", "timestamp_call"}
)


def _escape_error(token: Token, quote: int, error: EscapeError) -> QuerySyntaxError:
    """The syntax error for a bad escape of ``token``, whose text starts ``quote`` characters before what was
    unescaped, pointing at the escape's backslash."""
    before = str(token)[:quote + error.offset]
    newline = before.rfind("\n")
    line = token.line + before.count("\n")
    column = len(before) - newline if newline >= 0 else token.column + len(before)
    escape = re.match(r"\\(?:u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.?)", str(token)[quote + error.offset:], re.S)
    return QuerySyntaxError(Diagnostic(error.reason, Span(line, column, len(escape.group(0)))))


class TreeBuilder:
    """Builds the syntax tree of one query from lark's parse tree (``build``); a new builder per query."""

    QUERY_FORMS = {"select_query": "select_form", "construct_query": "construct_form",
                   "construct_where": "construct_where_form", "describe_query": "describe_form",
                   "ask_query": "ask_form"}
    MODIFIERS = {"group_clause": "group_clause", "having_clause": "having_clause", "order_clause": "order_clause",
                 "limit_offset_clauses": "limit_offset_clauses"}
    GROUP_ELEMENTS = {"triples_block": "triples_block", "group_or_union_graph_pattern": "union_pattern",
                      "optional_graph_pattern": "optional_pattern", "minus_graph_pattern": "minus_pattern",
                      "service_graph_pattern": "service_pattern", "filter": "filter_pattern",
                      "bind": "bind_pattern", "inline_data": "inline_data"}
    UNION_OPERANDS = {"group_graph_pattern": "group_graph_pattern", "graph_graph_pattern": "graph_pattern"}
    VERBS = {"var": "var", "rdf_type": "rdf_type", "iri": "iri"}
    """A verb of another rule is a property path."""
    NODES = {"collection": "collection", "collection_path": "collection",
             "blank_node_property_list": "blank_node_property_list",
             "blank_node_property_list_path": "blank_node_property_list"}
    """A graph node of another rule is a term."""
    PATHS = {"path": "path_alternative", "path_sequence": "path_sequence",
             "path_elt_or_inverse": "path_elt_or_inverse", "path_elt": "path_elt", "path_primary": "path_primary"}
    TERMS = {"var": "var", "iri": "iri", "rdf_literal": "rdf_literal", "numeric_literal": "numeric_literal",
             "boolean_literal": "boolean_literal", "blank_node": "blank_node", "nil": "nil", "rdf_type": "rdf_type"}
    EXPRESSIONS = {"or_expression": "or_expression", "and_expression": "and_expression", "comparison": "comparison",
                   "in_expression": "in_expression", "not_in_expression": "in_expression",
                   "additive": "arithmetic", "multiplicative": "arithmetic", "additive_signed": "additive_signed",
                   "signed_multiplicative": "signed_multiplicative", "unary": "unary",
                   "builtin_call": "builtin_call", "builtin_fixed": "builtin_fixed", "builtin_list": "builtin_list",
                   "exists": "exists", "not_exists": "exists", "timestamp_call": "timestamp_call",
                   "iri_or_function": "function_call", "function_call": "function_call", "aggregate": "aggregate"}
    """An expression of another rule is a term."""

    def __init__(self) -> None:
        self.base: str | None = None
        self.prefixes: dict[str, str] = {}
        self.anonymous_count = 0
        # Blank node labels are scoped to one basic graph pattern (SPARQL 1.1 §4.1.4): each label is
        # remembered with the pattern it first appeared in. FILTERs do not end a pattern; other elements do.
        self.bnode_patterns: dict[str, int] = {}
        self.current_pattern = 0
        self.in_template = False
        # The tables with this builder's methods (a subclass's overrides included), looked up once per query.
        self._expressions = self._methods(self.EXPRESSIONS)
        self._terms = self._methods(self.TERMS)
        self._nodes = self._methods(self.NODES)
        self._paths = self._methods(self.PATHS)
        self._verbs = self._methods(self.VERBS)

    def _methods(self, table: dict[str, str]) -> dict:
        return {rule: getattr(self, method) for rule, method in table.items()}

    def _dispatch(self, table: dict[str, str], node: Tree, what: str):
        method = table.get(node.data)
        if method is None:
            raise AssertionError(f"unknown {what} {node.data}")
        return getattr(self, method)(node)

    def new_basic_pattern(self) -> None:
        self.current_pattern += 1

    def span_of(self, node) -> Span | None:
        if isinstance(node, Token):
            return Span.of_token(node)
        return Span.of_meta(node.meta)

    # entry points

    def build(self, tree: Tree) -> sx.Query:
        """The syntax tree of the query lark parsed into ``tree`` (rule ``start``)."""
        registration_tree = pt.child(tree, "registration")
        registration = self.registration(registration_tree) if registration_tree is not None else None
        return self.query(pt.child(tree, "query"), registration=registration)

    def query(self, tree: Tree, leading: list[Tree] = (), registration: sx.Registration | None = None) -> sx.Query:
        """The query of a ``query`` tree (prologue, query form, VALUES); ``leading`` are prologue declarations
        written before it (RSP-QL writes some before its registration)."""
        prologue = self.prologue(Tree("prologue", [*leading, *pt.child(tree, "prologue").children]))
        built = self.query_form(pt.child(tree, *self.QUERY_FORMS))
        values_tree = pt.child(tree, "values_clause")
        values = self.values_clause(values_tree) if values_tree is not None else None
        return sx.Query(prologue=prologue, registration=registration, values=values, **built)

    def registration(self, tree: Tree) -> sx.Registration:
        name = pt.token(tree, "QUERY_NAME")
        options = pt.children(tree, "computed_every", "entailment")
        for index, option in enumerate(options):
            if any(earlier.data == option.data for earlier in options[:index]):
                clause = "COMPUTED EVERY" if option.data == "computed_every" else "ENTAILMENT"
                raise QuerySemanticError(
                    Diagnostic(f"{clause} is given twice: a registration takes it at most once", Span.of_meta(option.meta))
                )
        every = pt.child(tree, "computed_every")
        entailment = pt.child(tree, "entailment")
        regimes = [c for c in entailment.children if pt.is_token(c, "ENTAILMENT_REGIME")] if entailment is not None else []
        return sx.Registration(
            kind=str(pt.first_token(pt.child(tree, "registration_kind"))).upper(),
            name=str(name),
            computed_every=self.duration(pt.child(every, "duration")) if every is not None else None,
            entailment=tuple(str(r).upper() for r in regimes),
            span=Span.of_meta(tree.meta),
            entailment_spans=tuple(Span.of_token(r) for r in regimes),
        )

    def duration(self, tree: Tree) -> sx.Duration:
        number_token = pt.only_child(pt.child(tree, "duration_number"))
        unit = pt.token(tree, "TIME_UNIT")
        span = Span(number_token.line, number_token.column, unit.end_column - number_token.column if unit.line == number_token.line else len(number_token))
        amount = Decimal(str(number_token))
        micros = Fraction(amount) * unit_micros(str(unit))  # exact: Decimal arithmetic rounds to 28 digits
        if micros.denominator != 1:
            raise QuerySemanticError(
                Diagnostic(
                    f"the duration {shorten(str(number_token))}{unit} is not a whole number of microseconds", span
                )
            )
        return sx.Duration(amount=amount, unit=canonical_unit(str(unit)), micros=int(micros), span=span)

    def prologue(self, tree: Tree) -> sx.Prologue:
        base = None
        prefixes: list[tuple[str, str]] = []
        for decl in tree.children:
            if decl.data == "base_decl":
                base = self.iriref(pt.token(decl, "IRIREF"))
                self.base = base
            else:
                prefix = str(pt.token(decl, "PNAME_NS"))[:-1]
                namespace = self.iriref(pt.token(decl, "IRIREF"))
                self.prefixes[prefix] = namespace
                prefixes = [(p, n) for p, n in prefixes if p != prefix] + [(prefix, namespace)]
        return sx.Prologue(base=base, prefixes=tuple(prefixes))

    def resolve(self, iri: str) -> str:
        """An IRI resolved against BASE when it is relative and a base is declared; otherwise as written."""
        if self.base is None or re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*:", iri):
            return iri
        reference, hash_sign, fragment = iri.partition("#")
        # urljoin drops an empty fragment ("#" alone), which RFC 3986 keeps: PREFIX : <#> names <base#…>.
        resolved = urljoin(self.base, reference) if reference else self.base.partition("#")[0]
        return resolved + hash_sign + fragment

    # query forms

    def query_form(self, tree: Tree) -> dict:
        """The fields of ``sx.Query`` a query form gives: its form, datasets, WHERE, AGGREGATE clauses and
        solution modifiers."""
        datasets = tuple(self.dataset(c) for c in tree.children if isinstance(c, Tree) and c.data.startswith("from_"))
        aggregates = tuple(self.aggregate_clause(c) for c in pt.children(tree, "aggregate_clause"))
        modifiers = self.solution_modifier(pt.child(tree, "solution_modifier"))
        where_tree = pt.child(tree, "where_clause")
        where = self.group_graph_pattern(pt.child(where_tree, "group_graph_pattern")) if where_tree is not None else None
        form, where = getattr(self, self.QUERY_FORMS[tree.data])(tree, where)
        return dict(form=form, datasets=datasets, where=where, aggregates=aggregates, **modifiers)

    # Each query form's method takes its tree and the WHERE pattern already built (the form is built after
    # it, as blank node scoping and the numbering of anonymous blank nodes need) and gives (form, WHERE).

    def select_form(self, tree: Tree, where: sx.GroupPattern | None):
        return self.select_clause(pt.child(tree, "select_clause")), where

    def construct_form(self, tree: Tree, where: sx.GroupPattern | None):
        inner = pt.child(pt.child(tree, "construct_template"), "triples_template")
        template = self.triples_template(inner) if inner is not None else ()
        return sx.ConstructForm(template=template, span=Span.of_token(pt.token(tree, "CONSTRUCT"))), where

    def construct_where_form(self, tree: Tree, where: None):
        """``CONSTRUCT WHERE { triples }``: the triples are both the template (None) and the WHERE pattern."""
        template_tree = pt.child(tree, "triples_template")
        triples = self.triples_template(template_tree) if template_tree is not None else ()
        form = sx.ConstructForm(template=None, span=Span.of_token(pt.token(tree, "CONSTRUCT")))
        return form, sx.GroupPattern((sx.TriplesBlock(triples),) if triples else ())

    def describe_form(self, tree: Tree, where: sx.GroupPattern | None):
        terms = None if pt.child(tree, "select_all") is not None else tuple(
            self.term(c) for c in pt.children(tree, "var", "iri"))
        return sx.DescribeForm(terms=terms, span=Span.of_token(pt.token(tree, "DESCRIBE"))), where

    def ask_form(self, tree: Tree, where: sx.GroupPattern | None):
        return sx.AskForm(span=Span.of_token(pt.token(tree, "ASK"))), where

    def select_clause(self, tree: Tree) -> sx.SelectForm:
        modifier = None
        items: list[sx.SelectItem] | None = []
        braced = False
        operator = None
        for child in pt.subtrees(tree):
            if child.data == "stream_operator":
                operator = pt.first_token(child)
            elif child.data == "select_modifier":
                modifier = str(pt.first_token(child)).upper()
            elif child.data == "select_all":
                items = None
            elif child.data == "braced_projection":
                braced = True
                items.extend(sx.SelectItem(self.var(v), span=Span.of_meta(v.meta)) for v in pt.subtrees(child))
            elif child.data == "select_item":
                if pt.token(child, "AS") is None:
                    items.append(sx.SelectItem(self.var(pt.only_subtree(child)), span=Span.of_meta(child.meta)))
                else:
                    expression_tree, var_tree = pt.subtrees(child)
                    items.append(
                        sx.SelectItem(
                            self.var(var_tree),
                            self.expression(expression_tree),
                            span=Span.of_meta(var_tree.meta),
                            expression_span=self.span_of(expression_tree),
                        )
                    )
        return sx.SelectForm(
            modifier=modifier,
            items=tuple(items) if items is not None else None,
            braced=braced,
            stream_operator=str(operator).upper() if operator is not None else None,
            span=Span.of_token(pt.token(tree, "SELECT")),
            stream_operator_span=Span.of_token(operator) if operator is not None else None,
        )

    def dataset(self, tree: Tree) -> sx.DatasetClause:
        iri_tree = pt.child(tree, "iri")
        iri = self.iri(iri_tree)
        span = Span.of_meta(iri_tree.meta)
        if tree.data == "from_graph":
            return sx.FromGraph(iri, named=False, span=span)
        if tree.data == "from_named_graph":
            return sx.FromGraph(iri, named=True, span=span)
        window_tree = next((c for c in pt.subtrees(tree) if c.data.endswith("_window")), None)
        window = self.window(window_tree) if window_tree is not None else None
        return sx.FromStream(iri, window, named=tree.data == "from_named_stream", span=span)

    def window(self, tree: Tree) -> sx.WindowSpec:
        span = Span.of_meta(tree.meta)
        if tree.data == "logical_window":
            step = pt.child(pt.child(tree, "window_overlap"), "duration")
            return sx.LogicalWindowSpec(
                range=self.duration(pt.child(tree, "duration")),
                step=self.duration(step) if step is not None else None,
                span=span,
            )
        count_tree = pt.child(tree, "count_number")
        return sx.PhysicalWindowSpec(
            count=self.whole_number(count_tree, "TRIPLES", allow_negative=True),
            with_range=pt.token(tree, "RANGE") is not None,
            span=Span.of_token(pt.first_token(count_tree)),
        )

    def whole_number(self, tree: Tree, clause: str, allow_negative: bool = False) -> int:
        """The integer a ``count_number`` holds; a clear error when it is not a whole number, is negative, or is
        larger than ``MAX_COUNT`` (Spark's LIMIT takes a 32-bit int)."""
        token = pt.only_child(tree)
        if token.type not in ("INTEGER", "INTEGER_POSITIVE", "INTEGER_NEGATIVE") or (
            token.type == "INTEGER_NEGATIVE" and not allow_negative
        ):
            raise QuerySyntaxError(
                Diagnostic(
                    f"{clause} takes a whole number of at least 0, not {shorten(str(token))}", Span.of_token(token)
                )
            )
        digits = str(token).lstrip("+-").lstrip("0")
        # Compared as text first: int() refuses numbers of more than 4300 digits.
        if len(digits) > len(str(MAX_COUNT)) or int(digits or "0") > MAX_COUNT:
            raise QuerySemanticError(
                Diagnostic(
                    f"{clause} takes a whole number of at most {MAX_COUNT:,}, not {shorten(str(token))}",
                    Span.of_token(token),
                )
            )
        return int(str(token))

    def aggregate_clause(self, tree: Tree) -> sx.AggregateClause:
        var_tree = pt.child(tree, "var")
        function_tree = pt.child(tree, "aggregate_function")
        group_tree = pt.child(tree, "aggregate_group")
        filter_tree = pt.child(tree, "filter")
        name_token = pt.token(function_tree, "AGGREGATE_NAME")
        argument = None
        distinct = False
        argument_span = None
        arg_tree = pt.child(function_tree, "aggregate_argument")
        if arg_tree is not None:
            distinct = pt.token(arg_tree, "DISTINCT") is not None
            target = pt.child(arg_tree, "var", "select_all")
            argument = "*" if target.data == "select_all" else self.var(target)
            argument_span = Span.of_meta(target.meta)
        group_vars = pt.children(group_tree, "var")
        first = group_vars[0] if group_vars else None
        braced = first is None or group_tree.meta.column != first.meta.column or group_tree.meta.line != first.meta.line
        return sx.AggregateClause(
            var=self.var(var_tree),
            function=str(name_token).upper(),
            argument=argument,
            distinct=distinct,
            groups=tuple(self.var(v) for v in group_vars),
            filter=self.expression(pt.only_subtree(filter_tree)) if filter_tree is not None else None,
            braced_groups=braced,
            span=Span.of_meta(tree.meta),
            var_span=Span.of_meta(var_tree.meta),
            function_span=Span.of_token(name_token),
            argument_span=argument_span,
            group_spans=tuple(Span.of_meta(v.meta) for v in group_vars),
        )

    # solution modifiers: each clause's method gives the fields of ``sx.Query`` it sets

    def solution_modifier(self, tree: Tree) -> dict:
        result: dict = {}
        for clause in tree.children:
            result.update(self._dispatch(self.MODIFIERS, clause, "solution modifier"))
        return result

    def group_clause(self, tree: Tree) -> dict:
        return {"group_by": tuple(self.group_condition(c) for c in pt.children(tree, "group_condition"))}

    def having_clause(self, tree: Tree) -> dict:
        return {"having": tuple(self.expression(c) for c in pt.subtrees(tree))}

    def order_clause(self, tree: Tree) -> dict:
        return {"order_by": tuple(self.order_condition(c) for c in pt.children(tree, "order_condition"))}

    def limit_offset_clauses(self, tree: Tree) -> dict:
        result = {}
        for part in tree.children:
            keyword = "LIMIT" if part.data == "limit_clause" else "OFFSET"
            result[keyword.lower()] = self.whole_number(pt.child(part, "count_number"), keyword)
        return result

    def group_condition(self, tree: Tree) -> sx.GroupCondition:
        if pt.token(tree, "AS") is not None:
            expression_tree, var_tree = pt.subtrees(tree)
            return sx.GroupCondition(self.expression(expression_tree), self.var(var_tree), bracketed=True)
        child = pt.only_subtree(tree)
        return sx.GroupCondition(self.expression(child), bracketed=child.data not in _UNBRACKETED_CONDITIONS)

    def order_condition(self, tree: Tree) -> sx.OrderCondition:
        direction = pt.token(tree, "ORDER_DIRECTION")
        expression = self.expression(pt.only_subtree(tree))
        if direction is not None:
            return sx.OrderCondition(expression, str(direction).upper())
        return sx.OrderCondition(expression)

    def values_clause(self, tree: Tree) -> sx.ValuesBlock:
        return self.data_block(pt.only_subtree(tree))

    def data_block(self, tree: Tree) -> sx.ValuesBlock:
        span = Span.of_meta(tree.meta)
        if tree.data == "inline_data_one_var":
            var = self.var(pt.child(tree, "var"))
            values = pt.children(tree, "data_block_value")
            rows = tuple((self.data_value(v),) for v in values)
            return sx.ValuesBlock((var,), rows, one_var_form=True, span=span, row_spans=tuple(Span.of_meta(v.meta) for v in values))
        vars_: list[Variable] = []
        rows: list[tuple] = []
        row_spans: list[Span | None] = []
        seen_rows = False
        for child in tree.children:
            if pt.is_tree(child, "var"):
                vars_.append(self.var(child))
            elif pt.is_tree(child, "data_block_row"):
                rows.append(tuple(self.data_value(v) for v in child.children))
                row_spans.append(Span.of_meta(child.meta))
                seen_rows = True
            elif pt.is_token(child, "NIL"):
                # `()` first is the empty list of variables; after it, each `()` is a row without values.
                if seen_rows or vars_ or child is not tree.children[0]:
                    rows.append(())
                    row_spans.append(Span.of_token(child))
                    seen_rows = True
        return sx.ValuesBlock(tuple(vars_), tuple(rows), span=span, row_spans=tuple(row_spans))

    def data_value(self, tree: Tree):
        if pt.token(tree, "UNDEF") is not None:
            return None
        return self.term(pt.only_subtree(tree))

    # group graph patterns

    def group_graph_pattern(self, tree: Tree) -> sx.GroupPattern:
        span = Span.of_meta(tree.meta)
        if not tree.children:
            return sx.GroupPattern((), span=span)
        inner = pt.only_subtree(tree)
        if inner.data == "sub_select":
            return sx.GroupPattern((self.sub_select(inner),), span=span)
        elements: list[sx.GroupElement] = []
        self.new_basic_pattern()
        for child in inner.children:
            ends_pattern = child.data not in ("triples_block", "filter")
            if ends_pattern:
                self.new_basic_pattern()
            elements.append(self._dispatch(self.GROUP_ELEMENTS, child, "group element"))
            if ends_pattern:
                self.new_basic_pattern()
        self.new_basic_pattern()
        return sx.GroupPattern(tuple(elements), span=span)

    def sub_select(self, tree: Tree) -> sx.SubSelect:
        form = self.select_clause(pt.child(tree, "select_clause"))
        where = self.group_graph_pattern(pt.child(pt.child(tree, "where_clause"), "group_graph_pattern"))
        aggregates = tuple(self.aggregate_clause(c) for c in pt.children(tree, "aggregate_clause"))
        modifiers = self.solution_modifier(pt.child(tree, "solution_modifier"))
        values_tree = pt.child(tree, "values_clause")
        values = self.values_clause(values_tree) if values_tree is not None else None
        return sx.SubSelect(sx.Query(form=form, where=where, aggregates=aggregates, values=values, **modifiers))

    def triples_block(self, tree: Tree) -> sx.TriplesBlock:
        return sx.TriplesBlock(tuple(self.triples_same_subject(t) for t in pt.subtrees(tree)))

    def union_pattern(self, tree: Tree):
        operands = [self._dispatch(self.UNION_OPERANDS, c, "union operand") for c in pt.subtrees(tree)]
        if len(operands) == 1:
            return operands[0]
        return sx.UnionPattern(tuple(operands))

    def optional_pattern(self, tree: Tree) -> sx.OptionalPattern:
        return sx.OptionalPattern(self.group_graph_pattern(pt.child(tree, "group_graph_pattern")))

    def minus_pattern(self, tree: Tree) -> sx.MinusPattern:
        return sx.MinusPattern(self.group_graph_pattern(pt.child(tree, "group_graph_pattern")))

    def service_pattern(self, tree: Tree):
        raise UnsupportedFeatureError(
            Diagnostic(
                "SERVICE (federated query) is not supported: csparql evaluates queries over its own streams "
                "and static graphs; load the remote data with 'csparql load-static' instead",
                Span.of_token(pt.token(tree, "SERVICE")),
            )
        )

    def filter_pattern(self, tree: Tree) -> sx.FilterPattern:
        return sx.FilterPattern(self.expression(pt.only_subtree(tree)), span=Span.of_meta(tree.meta))

    def bind_pattern(self, tree: Tree) -> sx.BindPattern:
        expression_tree, var_tree = pt.subtrees(tree)
        return sx.BindPattern(
            self.expression(expression_tree),
            self.var(var_tree),
            span=Span.of_meta(tree.meta),
            var_span=Span.of_meta(var_tree.meta),
        )

    def inline_data(self, tree: Tree) -> sx.ValuesBlock:
        return self.data_block(pt.only_subtree(tree))

    def graph_pattern(self, tree: Tree) -> sx.GraphPattern:
        name_node, pattern_tree = pt.subtrees(tree)
        return sx.GraphPattern(self.term(name_node), self.group_graph_pattern(pattern_tree), span=Span.of_meta(tree.meta))

    # triples

    def triples_template(self, tree: Tree) -> tuple[sx.TriplesSameSubject, ...]:
        self.in_template = True
        try:
            return tuple(self.triples_same_subject(t) for t in pt.subtrees(tree))
        finally:
            self.in_template = False

    def triples_same_subject(self, tree: Tree) -> sx.TriplesSameSubject:
        subject, *rest = pt.subtrees(tree)
        properties = self.property_list(rest[0]) if rest else ()
        return sx.TriplesSameSubject(self.node(subject), properties, span=Span.of_meta(tree.meta))

    def property_list(self, tree: Tree) -> sx.PropertyList:
        """The (verb, objects) pairs of a property list: each verb is followed by its object list."""
        pairs = []
        verb = None
        for child in tree.children:
            if child.data in ("object_list", "object_list_path"):
                pairs.append((verb, tuple(self.node(o) for o in child.children)))
            else:
                verb = self.verb(child)
        return tuple(pairs)

    def verb(self, node: Tree) -> sx.Verb:
        method = self._verbs.get(node.data)
        return method(node) if method is not None else self.path(node)

    def node(self, node: Tree) -> sx.Node:
        method = self._nodes.get(node.data)
        return method(node) if method is not None else self.term(node)

    def collection(self, tree: Tree) -> sx.Collection:
        return sx.Collection(tuple(self.node(c) for c in tree.children))

    def blank_node_property_list(self, tree: Tree) -> sx.BlankNodePropertyList:
        return sx.BlankNodePropertyList(self.property_list(pt.only_subtree(tree)))

    # property paths

    def path(self, tree: Tree) -> sx.PathExpr:
        method = self._paths.get(tree.data)
        if method is None:
            raise AssertionError(f"unknown path node {tree.data}")
        return method(tree)

    def path_alternative(self, tree: Tree) -> sx.PathExpr:
        options = [self.path(c) for c in tree.children]
        return options[0] if len(options) == 1 else sx.AlternativePath(tuple(options))

    def path_sequence(self, tree: Tree) -> sx.PathExpr:
        steps = [self.path(c) for c in tree.children]
        return steps[0] if len(steps) == 1 else sx.SequencePath(tuple(steps))

    def path_elt_or_inverse(self, tree: Tree) -> sx.PathExpr:
        step = self.path(pt.child(tree, "path_elt"))
        return sx.InversePath(step) if pt.token(tree, "INVERSE") is not None else step

    def path_elt(self, tree: Tree) -> sx.PathExpr:
        primary = self.path(pt.child(tree, "path_primary"))
        modifier = pt.token(tree, "PATH_MOD")
        return sx.ModifiedPath(primary, str(modifier)) if modifier is not None else primary

    def path_primary(self, tree: Tree) -> sx.PathExpr:
        child = pt.only_subtree(tree)
        if child.data == "path_negated_property_set":
            members = []
            for member in child.children:
                target = pt.child(member, "iri", "rdf_type")
                members.append((self.predicate(target), pt.token(member, "INVERSE") is not None))
            return sx.NegatedPropertySet(tuple(members))
        if child.data == "path":
            return self.path(child)
        return self.predicate(child)

    def predicate(self, tree: Tree) -> URIRef:
        """The IRI of an ``iri`` or of ``a``."""
        return RDF_TYPE if tree.data == "rdf_type" else self.iri(tree)

    # terms

    def term(self, node):
        if isinstance(node, Token):
            raise AssertionError(f"unexpected token {node.type}")
        method = self._terms.get(node.data)
        if method is None:
            raise AssertionError(f"unknown term node {node.data}")
        return method(node)

    def boolean_literal(self, tree: Tree):
        return literal(str(pt.only_child(tree)).lower(), XSD_BOOLEAN)

    def blank_node(self, tree: Tree):
        token = pt.only_child(tree)
        if token.type == "ANON":
            index = self.anonymous_count
            self.anonymous_count += 1
            return sx.Anonymous(index)
        label = str(token)[2:]
        if not self.in_template:
            first = self.bnode_patterns.setdefault(label, self.current_pattern)
            if first != self.current_pattern:
                raise QuerySemanticError(
                    Diagnostic(
                        f"the blank node _:{label} is already used in another basic graph pattern; "
                        "a blank node label belongs to one pattern (use a variable to join across patterns)",
                        Span.of_token(token),
                    )
                )
        return BNode(label)

    def nil(self, tree: Tree) -> URIRef:
        return RDF_NIL

    def rdf_type(self, tree: Tree) -> URIRef:
        return RDF_TYPE

    def var(self, tree: Tree) -> Variable:
        return Variable(str(pt.only_child(tree))[1:])

    def iriref(self, token: Token) -> str:
        """The IRI an ``IRIREF`` token writes: escapes decoded, resolved against BASE."""
        try:
            return self.resolve(unescape(str(token)[1:-1], iri=True))
        except EscapeError as error:
            raise _escape_error(token, 1, error) from None

    def iri(self, tree: Tree) -> URIRef:
        token = pt.only_child(tree)
        if token.type == "IRIREF":
            return URIRef(self.iriref(token))
        prefix, _, local = str(token).partition(":")
        if prefix not in self.prefixes:
            raise QuerySemanticError(
                Diagnostic(
                    f"undefined prefix '{prefix}:' — declare it with PREFIX {prefix}: <…> before the query",
                    Span.of_token(token),
                )
            )
        return URIRef(self.prefixes[prefix] + _PN_LOCAL_ESCAPE.sub(r"\1", local))

    def string(self, tree: Tree) -> str:
        token = pt.only_child(tree)
        quote = 3 if token.type.startswith("STRING_LITERAL_LONG") else 1
        try:
            return unescape(str(token)[quote:-quote])
        except EscapeError as error:
            raise _escape_error(token, quote, error) from None

    def rdf_literal(self, tree: Tree):
        lexical = self.string(pt.child(tree, "string"))
        language = pt.token(tree, "LANGTAG")
        if language is not None:
            return literal(lexical, language=str(language)[1:])
        datatype = pt.child(tree, "iri")
        if datatype is not None:
            return literal(lexical, str(self.iri(datatype)))
        return literal(lexical)

    def numeric_literal(self, tree: Tree):
        number = pt.only_child(tree)
        return self.number(pt.only_child(number) if isinstance(number, Tree) else number)

    def number(self, token: Token):
        """The literal of a number token: an xsd:double, xsd:decimal or xsd:integer as written."""
        text = str(token)
        if "DOUBLE" in token.type:
            return literal(text, XSD_DOUBLE)
        if "DECIMAL" in token.type:
            return literal(text, XSD_DECIMAL)
        if len(text.lstrip("+-")) > MAX_INTEGER_DIGITS:
            raise QuerySemanticError(
                Diagnostic(
                    f"this integer has {len(text.lstrip('+-')):,} digits; csparql reads integers of at most "
                    f"{MAX_INTEGER_DIGITS:,} digits",
                    Span.of_token(token),
                )
            )
        return literal(text, XSD_INTEGER)

    # expressions

    def expression(self, node) -> ex.Expr:
        if isinstance(node, Token):
            raise AssertionError(f"unexpected token {node.type} in expression")
        method = self._expressions.get(node.data)
        return method(node) if method is not None else self.term(node)

    def or_expression(self, tree: Tree) -> ex.Expr:
        left, right = pt.subtrees(tree)
        return ex.Or(self.expression(left), self.expression(right))

    def and_expression(self, tree: Tree) -> ex.Expr:
        left, right = pt.subtrees(tree)
        return ex.And(self.expression(left), self.expression(right))

    def comparison(self, tree: Tree) -> ex.Expr:
        left, right = pt.subtrees(tree)
        return ex.Compare(str(pt.token(tree, "COMPARATOR")), self.expression(left), self.expression(right))

    def in_expression(self, tree: Tree) -> ex.Expr:
        """``IN`` and ``NOT IN``."""
        operand, values = pt.subtrees(tree)
        return ex.In(self.expression(operand), self.expression_list(values), negated=tree.data == "not_in_expression")

    def arithmetic(self, tree: Tree) -> ex.Expr:
        """``+``, ``-``, ``*`` and ``/`` between two operands."""
        left, right = pt.subtrees(tree)
        operator = pt.token(tree, "ADDITIVE_OP", "MULTIPLICATIVE_OP")
        return ex.Arithmetic(str(operator), self.expression(left), self.expression(right))

    def additive_signed(self, tree: Tree) -> ex.Expr:
        """An operand followed by a signed number (``?x -1``, ``?x +2 * ?y``): their sum."""
        left, right = pt.subtrees(tree)
        return ex.Arithmetic("+", self.expression(left), self.expression(right))

    def signed_multiplicative(self, tree: Tree) -> ex.Expr:
        """A signed number, or a signed number times or divided by an operand."""
        operator = pt.token(tree, "MULTIPLICATIVE_OP")
        if operator is None:
            return self.number(pt.only_child(pt.only_subtree(tree)))
        left, right = pt.subtrees(tree)
        return ex.Arithmetic(str(operator), self.expression(left), self.expression(right))

    def unary(self, tree: Tree) -> ex.Expr:
        operator = str(pt.token(tree, "UNARY_OP"))
        operand = self.expression(pt.only_subtree(tree))
        return ex.Not(operand) if operator == "!" else ex.Unary(operator, operand)

    def builtin_call(self, tree: Tree) -> ex.Expr:
        """A built-in call that is an aggregate (the other built-ins have rules of their own)."""
        return self.aggregate(pt.only_subtree(tree))

    def builtin_fixed(self, tree: Tree) -> ex.BuiltinCall:
        return ex.BuiltinCall(str(pt.first_token(tree)).upper(), tuple(self.expression(c) for c in pt.subtrees(tree)))

    def builtin_list(self, tree: Tree) -> ex.BuiltinCall:
        return ex.BuiltinCall(str(pt.first_token(tree)).upper(), self.expression_list(pt.child(tree, "expression_list")))

    def exists(self, tree: Tree) -> ex.Expr:
        """``EXISTS`` and ``NOT EXISTS``."""
        return ex.Exists(self.group_graph_pattern(pt.child(tree, "group_graph_pattern")), negated=tree.data == "not_exists")

    def timestamp_call(self, tree: Tree) -> ex.Expr:
        """C-SPARQL's ``timestamp(?v [, stream])``."""
        var_tree, *stream_tree = pt.subtrees(tree)
        stream = self.term(stream_tree[0]) if stream_tree else None
        stream_span = Span.of_meta(stream_tree[0].meta) if stream_tree else None
        return ex.Timestamp(self.var(var_tree), stream, stream_span=stream_span)

    def function_call(self, tree: Tree) -> ex.Expr:
        """A call of a function named by an IRI, or (without arguments, in an expression) the IRI itself."""
        iri = self.iri(pt.child(tree, "iri"))
        arguments = pt.child(tree, "arg_list")
        if arguments is None:
            return iri
        distinct, args = self.arg_list(arguments)
        return ex.FunctionCall(iri, args, distinct)

    def aggregate(self, tree: Tree) -> ex.AggregateCall:
        name_token = pt.token(tree, "AGGREGATE_NAME")
        name = str(name_token).upper()
        distinct = pt.token(tree, "DISTINCT") is not None
        target, *separator_tree = pt.subtrees(tree)
        argument = None if target.data == "select_all" else self.expression(target)
        separator = self.string(separator_tree[0]) if separator_tree else None
        if argument is None and name != "COUNT":
            raise QuerySyntaxError(
                Diagnostic(f"{name}(*) is not allowed: only COUNT takes '*'", Span.of_meta(target.meta))
            )
        if separator is not None and name != "GROUP_CONCAT":
            raise QuerySyntaxError(
                Diagnostic(f"SEPARATOR is only allowed in GROUP_CONCAT, not in {name}", Span.of_token(name_token))
            )
        return ex.AggregateCall(name, argument, distinct, separator)

    def arg_list(self, tree: Tree) -> tuple[bool, tuple[ex.Expr, ...]]:
        """Whether the arguments are DISTINCT, and the arguments (none for ``()``)."""
        return pt.token(tree, "DISTINCT") is not None, tuple(self.expression(x) for x in pt.subtrees(tree))

    def expression_list(self, tree: Tree) -> tuple[ex.Expr, ...]:
        return tuple(self.expression(x) for x in pt.subtrees(tree))
