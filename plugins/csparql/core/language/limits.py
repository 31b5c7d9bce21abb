"""The limits on what a query may be, checked while it is parsed: its length, its terms, how deeply it nests.

Every stage after the parser (translation, the optimizer, the Spark compiler, the printers) does work in
proportion to a query's terms and walks it recursively; these limits keep that work bounded and well within
Python's recursion limit. ``TermLimit`` counts the terms as the lexer reads them (so a query beyond
``MAX_TERMS`` is refused before the rest of its text is read); ``check_nesting`` measures lark's parse tree
before the syntax tree is built from it. Each refusal is a ``QuerySemanticError`` pointing at the place where
the limit is crossed (``csparql.core.language.parser`` adds the query text and name).
"""

from __future__ import annotations

import lark
from lark import Token, Tree

from csparql.core.language.errors import Diagnostic, QuerySemanticError, Span

MAX_QUERY_CHARACTERS = 200_000
"""The longest query text accepted, in characters: a query is a program, not a data set (``MAX_TERMS`` bounds
what it may write)."""
MAX_NESTING = 64
"""The most levels a query may nest (see ``nesting_depth``): every later stage (translation, optimizer, Spark
compiler, printers) walks the query recursively, and this keeps them well within Python's recursion limit."""
MAX_TERMS = 30_000
"""The most terms a query may write (see ``TERM_TOKENS``): about 10,000 triple patterns of three terms. Every
later stage does work in proportion to the terms, so the parser stops at the first term beyond the limit, before
the rest of the text is read (a 200,000-character query can hold 100,000 patterns of one literal each)."""
TERM_TOKENS = frozenset({
    "VAR1", "VAR2", "IRIREF", "PNAME_LN", "PNAME_NS", "RDF_TYPE", "BLANK_NODE_LABEL", "ANON", "NIL", "UNDEF",
    "STRING_LITERAL1", "STRING_LITERAL2", "STRING_LITERAL_LONG1", "STRING_LITERAL_LONG2", "TRUE", "FALSE",
    "INTEGER", "DECIMAL", "DOUBLE", "INTEGER_POSITIVE", "DECIMAL_POSITIVE", "DOUBLE_POSITIVE",
    "INTEGER_NEGATIVE", "DECIMAL_NEGATIVE", "DOUBLE_NEGATIVE",
})
"""The tokens counted as terms by ``MAX_TERMS``: variables, IRIs (``a`` included), blank nodes, ``()``, literals
and VALUES's UNDEF."""
MAX_INTEGER_DIGITS = 4300
"""The longest integer literal read (Python converts no longer digit strings to ints)."""


class TermLimit(lark.lark.PostLex):
    """Passes the lexer's tokens on to the parser, and stops the parse with a ``QuerySemanticError`` at the
    first term beyond ``MAX_TERMS`` (each parse counts its own terms: the parser is shared by threads)."""

    always_accept = ()

    def process(self, stream):
        terms = 0
        for token in stream:
            if token.type in TERM_TOKENS:
                terms += 1
                if terms > MAX_TERMS:
                    raise QuerySemanticError(
                        Diagnostic(
                            f"the query has more than {MAX_TERMS:,} terms (variables, IRIs, literals, blank nodes) "
                            f"here; csparql reads at most {MAX_TERMS:,}, about {MAX_TERMS // 3:,} triple patterns "
                            "(docs/language.md, Limits)",
                            Span.of_token(token),
                        )
                    )
            yield token


# --- how deeply a query nests ---------------------------------------------------------------------------

# The rules that are one level of the trees the later stages walk: groups, sub-selects, EXISTS, every
# operator and function call of an expression, nested collections and blank nodes.
_LEVEL_RULES = (
    "group_graph_pattern", "exists", "not_exists",
    "or_expression", "and_expression", "comparison", "in_expression", "not_in_expression", "additive",
    "additive_signed", "multiplicative", "signed_multiplicative", "unary", "builtin_fixed", "builtin_list",
    "aggregate", "function_call", "iri_or_function", "timestamp_call",
    "collection", "collection_path", "blank_node_property_list", "blank_node_property_list_path",
)
# Rules whose parts are joined one after another (a group's patterns, a UNION's operands, HAVING conditions:
# the first part ends up deepest), so that each later part adds a level to the parts before it.
_CHAIN_RULES = ("group_graph_pattern_sub", "group_or_union_graph_pattern", "having_clause")
# What each rule that needs more than the deepest of its children is (one lookup per node: the rest of the
# tree, most of it, takes the fast way).
_LEVEL, _CHAIN, _SELECT_QUERY, _SUB_SELECT, _SELECT_CLAUSE, _TRIPLES_BLOCK, _PATH, _PATH_ELT, _NEGATED_SET, \
    _PATH_PRIMARY = range(10)
_RULE_KINDS = {
    **dict.fromkeys(_LEVEL_RULES, _LEVEL),
    **dict.fromkeys(_CHAIN_RULES, _CHAIN),
    "select_query": _SELECT_QUERY,
    "sub_select": _SUB_SELECT,
    "select_clause": _SELECT_CLAUSE,
    "triples_block": _TRIPLES_BLOCK,
    "path": _PATH,
    "path_elt": _PATH_ELT,
    "path_negated_property_set": _NEGATED_SET,
    "path_primary": _PATH_PRIMARY,
}


def _tree(node, name: str) -> bool:
    return isinstance(node, Tree) and node.data == name


def _is_path_operator(node: Tree, kind: int | None) -> bool:
    """A part of a property path that makes it a path pattern of its own (joined to the triples around it):
    an alternative, a '*', '+' or '?', a negated property set."""
    if kind == _PATH or kind == _PATH_ELT:
        return len(node.children) > 1
    return kind == _NEGATED_SET


def _weight(node: Tree, kind: int | None) -> int:
    """The levels a node is by itself: one for a rule of ``_LEVEL_RULES``, a sub-select and a bracketed path."""
    if kind == _LEVEL or kind == _SUB_SELECT:
        return 1
    if kind == _PATH_PRIMARY:
        return int(_tree(node.children[0], "path"))
    return 0


def _select_expressions(select_clause: Tree) -> list[Tree]:
    return [c for c in select_clause.children if _tree(c, "select_item") and len(c.children) > 1]


def _offsets(node: Tree, kind: int | None, children: list[Tree]) -> list[int]:
    """The levels each child of ``node`` sits below it besides its own, as the algebra will nest them."""
    count = len(children)
    if kind == _CHAIN:
        return [count - 1 - index for index in range(count)]
    if kind == _SELECT_CLAUSE:
        expressions = {id(c): index for index, c in enumerate(_select_expressions(node))}
        return [len(expressions) - 1 - expressions[id(c)] if id(c) in expressions else 0 for c in children]
    if kind == _SELECT_QUERY or kind == _SUB_SELECT:
        # Each SELECT expression extends the solutions of the WHERE clause: one level above it.
        select = next((c for c in children if c.data == "select_clause"), None)
        above = len(_select_expressions(select)) if select is not None else 0
        return [above if c.data == "where_clause" else 0 for c in children]
    return [0] * count


def _heights(tree: Tree) -> dict[int, int]:
    """Per node (by id): how many levels its subtree nests, counted as ``nesting_depth`` says. Iterative, and
    written for speed: it runs on every query."""
    heights: dict[int, int] = {}
    path_operators = 0
    stack: list[tuple[Tree, int]] = [(tree, -1)]
    while stack:
        node, operators_before = stack.pop()
        if operators_before < 0:  # first visit: the children first
            stack.append((node, path_operators))
            for child in node.children:
                if isinstance(child, Tree):
                    stack.append((child, -1))
            continue
        kind = _RULE_KINDS.get(node.data)
        if kind is None:  # most nodes: as deep as their deepest child
            height = 0
            for child in node.children:
                if isinstance(child, Tree) and heights[id(child)] > height:
                    height = heights[id(child)]
            heights[id(node)] = height
            continue
        children = [child for child in node.children if isinstance(child, Tree)]
        below = max((heights[id(c)] + o for c, o in zip(children, _offsets(node, kind, children))), default=0)
        if kind == _TRIPLES_BLOCK:
            # Each path pattern of a block is joined to the triples before it (and those after it).
            below += 2 * (path_operators - operators_before)
        elif _is_path_operator(node, kind):
            path_operators += 1
        heights[id(node)] = below + _weight(node, kind)
    return heights


def nesting_depth(tree: Tree) -> int:
    """How many levels deep a parsed query nests: the depth of the trees that translation, the optimizer, the
    Spark compiler and the printers walk, as it can be read off the parse tree.

    Each group ``{ … }``, sub-select, EXISTS, operator, function call, nested collection or ``[ … ]`` and
    bracketed property path is a level. Parts that are joined one after another count as nested: in a group,
    each pattern (triples, OPTIONAL, UNION, BIND, FILTER, …) adds a level to those before it, and so does each
    operand of a UNION, each HAVING condition, each SELECT expression and each path pattern of a block of
    triples (twice: the triples around it are joined too). Brackets around an expression add nothing.
    """
    return _heights(tree)[id(tree)]


def check_nesting(tree: Tree) -> None:
    """``QuerySemanticError`` at the place where the query goes deeper than ``MAX_NESTING`` levels."""
    heights = _heights(tree)
    if heights[id(tree)] <= MAX_NESTING:
        return
    # Go down the first (in reading order) branch that is too deep, to the node where the limit is crossed.
    node, budget, place = tree, MAX_NESTING, None
    while True:
        kind = _RULE_KINDS.get(node.data)
        place = _position(node) or place
        budget -= _weight(node, kind)
        if budget < 0:
            break
        children = [child for child in node.children if isinstance(child, Tree)]
        if kind == _TRIPLES_BLOCK:
            operators = [n for n in _preorder(node) if _is_path_operator(n, _RULE_KINDS.get(n.data))]
            budget -= 2 * len(operators)
            if budget < 0:
                place = _position(operators[len(operators) + budget // 2]) or place
                break
        offsets = _offsets(node, kind, children)
        deeper = [(c, budget - o) for c, o in zip(children, offsets) if heights[id(c)] > budget - o]
        if not deeper:
            break
        node, budget = deeper[0]
    raise QuerySemanticError(
        Diagnostic(
            f"the query nests more than {MAX_NESTING} levels deep here; csparql reads at most {MAX_NESTING} levels, "
            "counting each group { }, sub-select, operator and function call, and each pattern of a group as one "
            "level above the patterns before it (docs/language.md, Limits)",
            place,
        )
    )


def _preorder(tree: Tree) -> list[Tree]:
    nodes, stack = [], [tree]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(reversed([c for c in node.children if isinstance(c, Tree)]))
    return nodes


def _position(node: Tree) -> Span | None:
    """Where a node is best pointed at: its first keyword or operator, else the first character it starts with
    (the right operand of an operator written without a token of its own: ``||``, ``&&``, ``1 +2``)."""
    if node.data in ("or_expression", "and_expression", "additive_signed"):
        node = node.children[-1] if isinstance(node.children[-1], Tree) else node
    token = next((c for c in node.children if isinstance(c, Token)), None)
    if token is not None:
        return Span.of_token(token)
    span = Span.of_meta(node.meta)
    return Span(span.line, span.column) if span is not None else None

