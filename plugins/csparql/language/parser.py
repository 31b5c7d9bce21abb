"""Text to syntax tree: ``parse(text)`` returns a ``csparql.language.syntax.Query`` or raises a ``QueryError``.

The grammar (``grammar.lark``) is parsed with lark's LALR(1) parser and contextual lexer. ``_TreeBuilder``
walks lark's parse tree top-down and builds the syntax tree, resolving prefixed names and relative IRIs on
the way. Lark's exceptions never leave this module: they become ``QuerySyntaxError`` with a message in plain
words, the position, and what was expected there.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
import tempfile
from importlib import resources
from decimal import Decimal
from fractions import Fraction
from pathlib import Path as FilePath
from urllib.parse import urljoin

import lark
from lark import Token, Tree
from rdflib import BNode, URIRef, Variable

from csparql.language import expressions as ex
from csparql.language import syntax as sx
from csparql.language.errors import (
    Diagnostic,
    QueryError,
    QuerySemanticError,
    QuerySyntaxError,
    Span,
    UnsupportedFeatureError,
    shorten,
)
from csparql.terms import RDF_NIL, RDF_TYPE, XSD_BOOLEAN, XSD_DECIMAL, XSD_DOUBLE, XSD_INTEGER, literal
from csparql.windows import MAX_COUNT, canonical_unit, unit_micros

GRAMMAR_FILE = FilePath(str(resources.files("csparql") / "language" / "grammar.lark"))
RSPQL_GRAMMAR_FILE = FilePath(str(resources.files("csparql") / "language" / "rspql.lark"))
"""The RSP-QL additions: the RSP-QL parser is built from ``GRAMMAR_FILE`` followed by this file."""
DIALECTS = ("csparql", "rspql")
"""The query languages csparql reads: C-SPARQL and RSP-QL (``csparql.language.dialect`` tells them apart)."""
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
UPDATE_KEYWORDS = ("INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH")


LARK_OPTIONS = {"parser": "lalr", "lexer": "contextual", "propagate_positions": True, "maybe_placeholders": False}


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


def grammar_text(dialect: str = "csparql") -> str:
    """The lark grammar of a dialect: the C-SPARQL grammar, and for RSP-QL that grammar followed by the RSP-QL
    additions (which override and extend its rules, so that both dialects share every SPARQL 1.1 rule)."""
    grammar = GRAMMAR_FILE.read_text(encoding="utf-8")
    if dialect == "rspql":
        grammar += "\n" + RSPQL_GRAMMAR_FILE.read_text(encoding="utf-8")
    elif dialect != "csparql":
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    return grammar


@functools.cache
def _lark(dialect: str = "csparql") -> lark.Lark:
    """The parser of a dialect, built from its grammar once per grammar (building the LALR tables takes a
    CPU-second that every process would pay: each Airflow task and DAG file parse) and otherwise loaded from
    the cache."""
    grammar = grammar_text(dialect)
    cached = _parser_cache(grammar)
    if cached is not None:
        try:
            with open(cached, "rb") as file:
                return lark.Lark.load(file)
        except Exception:  # noqa: BLE001 - missing, cut short or from elsewhere: build it again
            pass
    parser = lark.Lark(grammar, postlex=TermLimit(), **LARK_OPTIONS)
    if cached is not None:
        _save_parser(parser, cached)
    return parser


def _parser_cache(grammar: str) -> FilePath | None:
    """Where the parser built from this grammar is kept (``$CSPARQL_CACHE_DIR``, else ``$XDG_CACHE_HOME/csparql``,
    else ``~/.cache/csparql``), named by a digest of everything the built parser depends on; None when there
    is no such folder and none can be made."""
    root = os.environ.get("CSPARQL_CACHE_DIR") or FilePath(
        os.environ.get("XDG_CACHE_HOME") or FilePath.home() / ".cache") / "csparql"
    key = "\0".join([grammar, lark.__version__, sys.version, repr(sorted(LARK_OPTIONS.items())), TermLimit.__qualname__])
    try:
        folder = FilePath(root)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return folder / f"sparql-parser-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:24]}.lark"


def _save_parser(parser: lark.Lark, path: FilePath) -> None:
    """Write the parser beside ``path`` and move it there in one step, so that no process reads half of it."""
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(handle, "wb") as file:
            parser.save(file)
        os.replace(temporary, path)
    except Exception:  # noqa: BLE001 - a parser not kept is only built again next time
        FilePath(temporary).unlink(missing_ok=True)


def parse(text: str, source_name: str = "<query>") -> sx.Query:
    """Parse C-SPARQL text into its syntax tree.

    Raises ``QuerySyntaxError`` when the text is not C-SPARQL or is longer than ``MAX_QUERY_CHARACTERS``,
    ``UnsupportedFeatureError`` for SPARQL Update and SERVICE, and ``QuerySemanticError`` for what the builder
    can already tell is wrong (more terms than ``MAX_TERMS``, nesting deeper than ``MAX_NESTING``, an undefined
    prefix, a duration finer than a microsecond). The language rules that need the whole query are checked by
    ``csparql.language.checks``.
    """
    return parse_with(text, source_name, "csparql", _TreeBuilder)


def parse_with(text: str, source_name: str, dialect: str, builder: type[_TreeBuilder]) -> sx.Query:
    """Parse ``text`` with the parser of ``dialect`` and build its syntax tree with a new ``builder``; every
    problem is a ``QueryError`` carrying the text, as ``parse`` promises."""
    if len(text) > MAX_QUERY_CHARACTERS:
        raise QuerySyntaxError(
            Diagnostic(
                f"the query is {len(text):,} characters long; csparql accepts queries of at most "
                f"{MAX_QUERY_CHARACTERS:,} characters (docs/language.md, Limits)"
            ),
            text,
            source_name,
        )
    try:
        tree = _lark(dialect).parse(text)
    except lark.exceptions.UnexpectedInput as error:
        raise _syntax_error(error, text, dialect).with_source(text, source_name) from None
    except QueryError as error:  # beyond MAX_TERMS
        raise error.with_source(text, source_name) from None
    try:
        _check_nesting(tree)
        return builder().build(tree)
    except QueryError as error:
        raise error.with_source(text, source_name) from None


# --- lark errors in plain words ------------------------------------------------------------------------

_TERMINAL_WORDS = {
    "VAR1": "a variable",
    "VAR2": "a variable",
    "IRIREF": "an IRI",
    "PNAME_LN": "an IRI",
    "PNAME_NS": "an IRI",
    "STRING_LITERAL1": "a string",
    "STRING_LITERAL2": "a string",
    "STRING_LITERAL_LONG1": "a string",
    "STRING_LITERAL_LONG2": "a string",
    "INTEGER": "a number",
    "DECIMAL": "a number",
    "DOUBLE": "a number",
    "INTEGER_POSITIVE": "a number",
    "DECIMAL_POSITIVE": "a number",
    "DOUBLE_POSITIVE": "a number",
    "INTEGER_NEGATIVE": "a number",
    "DECIMAL_NEGATIVE": "a number",
    "DOUBLE_NEGATIVE": "a number",
    "TRUE": "a boolean",
    "FALSE": "a boolean",
    "BLANK_NODE_LABEL": "a blank node",
    "ANON": "a blank node",
    "NIL": "'()'",
    "LANGTAG": "a language tag",
    "TIME_UNIT": "a time unit (ms, s, m, h, d)",
    "QUERY_NAME": "a query name",
    "ENTAILMENT_REGIME": "an entailment regime (RDFS, SAMEAS)",
    "BUILTIN_UNARY": "a function call",
    "BUILTIN_BINARY": "a function call",
    "BUILTIN_NULLARY": "a function call",
    "AGGREGATE_NAME": "an aggregate function (COUNT, SUM, AVG, MIN, MAX)",
    "COMPARATOR": "a comparison",
    "ADDITIVE_OP": "'+' or '-'",
    "MULTIPLICATIVE_OP": "'*' or '/'",
    "UNARY_OP": "'!', '+' or '-'",
    "PATH_MOD": "'*', '+' or '?'",
    "INVERSE": "'^'",
    "RDF_TYPE": "'a'",
    "ORDER_DIRECTION": "'ASC' or 'DESC'",
    "ISO_DURATION": "an ISO 8601 duration (PT10M)",
    "NOW_BOUND": "NOW or NOW-<duration>",
    "$END": "the end of the query",
}
# Expected-set words that say the most, listed first.
_WORD_ORDER = ["the end of the query", "'}'", "')'", "']'", "'.'"]


@functools.cache
def _terminal_words(dialect: str) -> dict[str, str]:
    words = dict(_TERMINAL_WORDS)
    for terminal in _lark(dialect).terminals:
        if terminal.name in words:
            continue
        pattern = terminal.pattern
        if isinstance(pattern, lark.lexer.PatternStr):
            words[terminal.name] = f"'{pattern.value}'"
        elif re.fullmatch(r"[A-Z_]+", terminal.name) and "(?i:" in pattern.value:
            words[terminal.name] = f"'{terminal.name}'"
    return words


def _describe_expected(names, dialect: str = "csparql") -> str:
    words = _terminal_words(dialect)
    described = sorted({words.get(name, name) for name in names})
    described.sort(key=lambda w: (_WORD_ORDER.index(w) if w in _WORD_ORDER else len(_WORD_ORDER), w.startswith("'"), w))
    if len(described) > 8:
        described = described[:8] + ["…"]
    if not described:
        return "nothing more"
    if len(described) == 1:
        return described[0]
    return ", ".join(described[:-1]) + " or " + described[-1]


def _describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of query"
    return f"'{shorten(str(token))}'"


def _word_at(text: str, line: int, column: int) -> str:
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return ""
    match = re.match(r"[A-Za-z_]+", lines[line - 1][column - 1:])
    return match.group(0) if match else ""


def _end_span(text: str) -> Span:
    """The place just after the last character that is not white space."""
    lines = text.rstrip().split("\n")
    return Span(len(lines), len(lines[-1]) + 1, 1)


def _syntax_error(error: lark.exceptions.UnexpectedInput, text: str, dialect: str = "csparql") -> QueryError:
    line, column = getattr(error, "line", -1), getattr(error, "column", -1)
    if isinstance(error, lark.exceptions.UnexpectedToken) and error.token.type == "$END":
        span = _end_span(text)
        if all(line.strip().startswith("#") or not line.strip() for line in text.split("\n")):
            return QuerySyntaxError(
                Diagnostic("the query is empty: expected SELECT, CONSTRUCT, ASK or DESCRIBE", span if text.strip() else Span(1, 1))
            )
        return QuerySyntaxError(Diagnostic(f"unexpected end of query; expected {_describe_expected(error.expected, dialect)}", span))
    if line < 1:
        return QuerySyntaxError(Diagnostic("the query could not be parsed", None))
    word = _word_at(text, line, column)
    if word.upper() in UPDATE_KEYWORDS:
        return UnsupportedFeatureError(
            Diagnostic(
                f"SPARQL Update ({word.upper()}) is not supported: csparql evaluates queries "
                "(SELECT, CONSTRUCT, ASK, DESCRIBE) and never changes stored data",
                Span(line, column, len(word)),
            )
        )
    if isinstance(error, lark.exceptions.UnexpectedToken):
        token = error.token
        span = Span.of_token(token)
        if token.type == "TIME_UNIT" or (token.type == "QUERY_NAME" and word):
            span = Span(line, column, len(word) or 1)
        message = f"unexpected {_describe_token(token)}; expected {_describe_expected(error.expected, dialect)}"
        return QuerySyntaxError(Diagnostic(message, span))
    # UnexpectedCharacters: no terminal starts here.
    char = getattr(error, "char", "")
    allowed = getattr(error, "allowed", None) or set()
    rest = text.split("\n")[line - 1][column - 1:] if line <= len(text.split("\n")) else ""
    if char in "\"'" and not re.match(r"('''|\"\"\")", rest):
        message = "unterminated string: a string must end with its opening quote on the same line"
    elif char in "\"'":
        message = "unterminated long string"
    elif char == "<" and "IRIREF" in allowed:
        message = "unterminated or malformed IRI: an IRI is written <…> with no spaces, quotes or braces inside"
    elif word and allowed & {"TIME_UNIT"}:
        message = f"unknown time unit '{shorten(word)}'; expected {_describe_expected(allowed, dialect)}"
    elif word:
        message = f"unexpected '{shorten(word)}'; expected {_describe_expected(allowed, dialect)}"
    else:
        shown = char if char.strip() else repr(char)
        message = f"unexpected character '{shown}'"
        if allowed:
            message += f"; expected {_describe_expected(allowed, dialect)}"
    return QuerySyntaxError(Diagnostic(message, Span(line, column, len(word) or 1)))


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


def _check_nesting(tree: Tree) -> None:
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


# --- lark tree to syntax tree --------------------------------------------------------------------------

_ECHAR = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|[tbnrf\"'\\])")
_UCHAR = re.compile(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8})")
_PN_LOCAL_ESCAPE = re.compile(r"\\([_~.\-!$&'()*+,;=/?#@%])")


def _unescape_string(body: str) -> str:
    def replace(match: re.Match) -> str:
        code = match.group(1)
        if code[0] in "uU":
            return chr(int(code[1:], 16))
        return _ECHAR[code]

    return _ESCAPE.sub(replace, body)


def _unescape_iri(body: str) -> str:
    return _UCHAR.sub(lambda m: chr(int(m.group(1)[1:], 16)), body)


def _tree(node, name: str) -> bool:
    return isinstance(node, Tree) and node.data == name


def _is_token(node, *types: str) -> bool:
    return isinstance(node, Token) and node.type in types


class _TreeBuilder:
    """Builds the syntax tree from lark's parse tree, one method per grammar rule that needs one."""

    def __init__(self) -> None:
        self.base: str | None = None
        self.prefixes: dict[str, str] = {}
        self.anonymous_count = 0
        # Blank node labels are scoped to one basic graph pattern (SPARQL 1.1 §4.1.4): each label is
        # remembered with the pattern it first appeared in. FILTERs do not end a pattern; other elements do.
        self.bnode_patterns: dict[str, int] = {}
        self.current_pattern = 0
        self.in_template = False

    def new_basic_pattern(self) -> None:
        self.current_pattern += 1

    def span_of(self, node) -> Span | None:
        if isinstance(node, Token):
            return Span.of_token(node)
        return Span.of_meta(node.meta)

    # entry points

    def build(self, tree: Tree) -> sx.Query:
        registration = None
        query_tree = tree.children[-1]
        if len(tree.children) == 2:
            registration = self.registration(tree.children[0])
        prologue = self.prologue(query_tree.children[0])
        query = self.query_form(query_tree.children[1])
        values = self.values_clause(query_tree.children[2]) if len(query_tree.children) > 2 else None
        return sx.Query(
            prologue=prologue, registration=registration, values=values, **query
        )

    def registration(self, tree: Tree) -> sx.Registration:
        kind_tree = tree.children[1]
        name = next(c for c in tree.children if _is_token(c, "QUERY_NAME"))
        options = [c for c in tree.children if _tree(c, "computed_every") or _tree(c, "entailment")]
        for index, option in enumerate(options):
            if any(earlier.data == option.data for earlier in options[:index]):
                clause = "COMPUTED EVERY" if option.data == "computed_every" else "ENTAILMENT"
                raise QuerySemanticError(
                    Diagnostic(f"{clause} is given twice: a registration takes it at most once", Span.of_meta(option.meta))
                )
        every = next((c for c in options if c.data == "computed_every"), None)
        entailment = next((c for c in options if c.data == "entailment"), None)
        regimes = [c for c in entailment.children if _is_token(c, "ENTAILMENT_REGIME")] if entailment is not None else []
        return sx.Registration(
            kind=str(kind_tree.children[0]).upper(),
            name=str(name),
            computed_every=self.duration(every.children[-1]) if every is not None else None,
            entailment=tuple(str(r).upper() for r in regimes),
            span=Span.of_meta(tree.meta),
            entailment_spans=tuple(Span.of_token(r) for r in regimes),
        )

    def duration(self, tree: Tree) -> sx.Duration:
        number_token = tree.children[0].children[0]
        unit = tree.children[1]
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
                base = self.resolve(_unescape_iri(str(decl.children[1])[1:-1]))
                self.base = base
            else:
                prefix = str(decl.children[1])[:-1]
                namespace = self.resolve(_unescape_iri(str(decl.children[2])[1:-1]))
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
        kind = tree.data
        children = list(tree.children)
        datasets = tuple(self.dataset(c) for c in children if isinstance(c, Tree) and c.data.startswith("from_"))
        aggregates = tuple(self.aggregate_clause(c) for c in children if _tree(c, "aggregate_clause"))
        modifiers = self.solution_modifier(next(c for c in children if _tree(c, "solution_modifier")))
        where_tree = next((c for c in children if _tree(c, "where_clause")), None)
        where = self.group_graph_pattern(where_tree.children[-1]) if where_tree is not None else None
        form_span = Span.of_token(children[0]) if isinstance(children[0], Token) else None
        if kind == "select_query":
            form = self.select_clause(children[0])
        elif kind == "construct_query":
            template_tree = children[1]
            template = self.triples_template(template_tree.children[0]) if template_tree.children else ()
            form = sx.ConstructForm(template=template, span=form_span)
        elif kind == "construct_where":
            template_tree = next((c for c in children if _tree(c, "triples_template")), None)
            triples = self.triples_template(template_tree) if template_tree is not None else ()
            form = sx.ConstructForm(template=None, span=form_span)
            where = sx.GroupPattern((sx.TriplesBlock(triples),) if triples else ())
        elif kind == "describe_query":
            if any(_tree(c, "select_all") for c in children):
                terms = None
            else:
                terms = tuple(
                    self.term(c) for c in children[1:] if isinstance(c, (Tree, Token)) and not self._is_clause(c)
                )
            form = sx.DescribeForm(terms=terms, span=form_span)
        else:
            form = sx.AskForm(span=form_span)
        return dict(form=form, datasets=datasets, where=where, aggregates=aggregates, **modifiers)

    @staticmethod
    def _is_clause(node) -> bool:
        return isinstance(node, Tree) and (
            node.data.startswith("from_")
            or node.data in ("where_clause", "aggregate_clause", "solution_modifier", "select_all")
        )

    def select_clause(self, tree: Tree) -> sx.SelectForm:
        modifier = None
        items: list[sx.SelectItem] | None = []
        braced = False
        operator = None
        for child in tree.children[1:]:
            if _tree(child, "stream_operator"):
                operator = child.children[0]
            elif _tree(child, "select_modifier"):
                modifier = str(child.children[0]).upper()
            elif _tree(child, "select_all"):
                items = None
            elif _tree(child, "braced_projection"):
                braced = True
                items.extend(sx.SelectItem(self.var(v), span=Span.of_meta(v.meta)) for v in child.children)
            elif _tree(child, "select_item"):
                if len(child.children) == 1:
                    items.append(sx.SelectItem(self.var(child.children[0]), span=Span.of_meta(child.meta)))
                else:
                    var_tree = child.children[-1]
                    items.append(
                        sx.SelectItem(
                            self.var(var_tree),
                            self.expression(child.children[0]),
                            span=Span.of_meta(var_tree.meta),
                            expression_span=self.span_of(child.children[0]),
                        )
                    )
        return sx.SelectForm(
            modifier=modifier,
            items=tuple(items) if items is not None else None,
            braced=braced,
            stream_operator=str(operator).upper() if operator is not None else None,
            span=Span.of_token(tree.children[0]),
            stream_operator_span=Span.of_token(operator) if operator is not None else None,
        )

    def dataset(self, tree: Tree) -> sx.DatasetClause:
        iri_tree = next(c for c in tree.children if _tree(c, "iri"))
        iri = self.iri(iri_tree)
        span = Span.of_meta(iri_tree.meta)
        if tree.data == "from_graph":
            return sx.FromGraph(iri, named=False, span=span)
        if tree.data == "from_named_graph":
            return sx.FromGraph(iri, named=True, span=span)
        window_tree = next((c for c in tree.children if isinstance(c, Tree) and c.data.endswith("_window")), None)
        window = self.window(window_tree) if window_tree is not None else None
        return sx.FromStream(iri, window, named=tree.data == "from_named_stream", span=span)

    def window(self, tree: Tree) -> sx.WindowSpec:
        span = Span.of_meta(tree.meta)
        if tree.data == "logical_window":
            duration_tree = next(c for c in tree.children if _tree(c, "duration"))
            overlap = next(c for c in tree.children if _tree(c, "window_overlap"))
            step = self.duration(overlap.children[1]) if len(overlap.children) > 1 else None
            return sx.LogicalWindowSpec(range=self.duration(duration_tree), step=step, span=span)
        count_tree = next(c for c in tree.children if _tree(c, "count_number"))
        with_range = any(_is_token(c, "RANGE") for c in tree.children)
        return sx.PhysicalWindowSpec(
            count=self.whole_number(count_tree, "TRIPLES", allow_negative=True),
            with_range=with_range,
            span=Span.of_token(count_tree.children[0]),
        )

    def whole_number(self, tree: Tree, clause: str, allow_negative: bool = False) -> int:
        """The integer a ``count_number`` holds; a clear error when it is not a whole number, is negative, or is
        larger than ``MAX_COUNT`` (Spark's LIMIT takes a 32-bit int)."""
        token = tree.children[0]
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
        var_tree = tree.children[1]
        function_tree = tree.children[2]
        group_tree = tree.children[3]
        filter_tree = tree.children[4] if len(tree.children) > 4 else None
        name_token = function_tree.children[0]
        argument = None
        distinct = False
        argument_span = None
        if len(function_tree.children) > 1:
            arg_tree = function_tree.children[1]
            distinct = any(_is_token(c, "DISTINCT") for c in arg_tree.children)
            target = arg_tree.children[-1]
            argument = "*" if _tree(target, "select_all") else self.var(target)
            argument_span = Span.of_meta(target.meta)
        group_vars = [c for c in group_tree.children if _tree(c, "var")]
        first = group_vars[0] if group_vars else None
        braced = first is None or group_tree.meta.column != first.meta.column or group_tree.meta.line != first.meta.line
        return sx.AggregateClause(
            var=self.var(var_tree),
            function=str(name_token).upper(),
            argument=argument,
            distinct=distinct,
            groups=tuple(self.var(v) for v in group_vars),
            filter=self.expression(filter_tree.children[1]) if filter_tree is not None else None,
            braced_groups=braced,
            span=Span.of_meta(tree.meta),
            var_span=Span.of_meta(var_tree.meta),
            function_span=Span.of_token(name_token),
            argument_span=argument_span,
            group_spans=tuple(Span.of_meta(v.meta) for v in group_vars),
        )

    def solution_modifier(self, tree: Tree) -> dict:
        result: dict = {}
        for clause in tree.children:
            if clause.data == "group_clause":
                result["group_by"] = tuple(self.group_condition(c) for c in clause.children[2:])
            elif clause.data == "having_clause":
                result["having"] = tuple(self.expression(c) for c in clause.children[1:])
            elif clause.data == "order_clause":
                result["order_by"] = tuple(self.order_condition(c) for c in clause.children[2:])
            elif clause.data == "limit_offset_clauses":
                for part in clause.children:
                    keyword = "LIMIT" if part.data == "limit_clause" else "OFFSET"
                    result[keyword.lower()] = self.whole_number(part.children[1], keyword)
        return result

    def group_condition(self, tree: Tree) -> sx.GroupCondition:
        children = tree.children
        if len(children) == 3:
            return sx.GroupCondition(self.expression(children[0]), self.var(children[2]), bracketed=True)
        child = children[0]
        if _tree(child, "var") or _tree(child, "builtin_call") or child.data in ("builtin_fixed", "builtin_list", "function_call", "exists", "not_exists", "timestamp_call"):
            return sx.GroupCondition(self.expression(child))
        return sx.GroupCondition(self.expression(child), bracketed=True)

    def order_condition(self, tree: Tree) -> sx.OrderCondition:
        if _is_token(tree.children[0], "ORDER_DIRECTION"):
            return sx.OrderCondition(self.expression(tree.children[1]), str(tree.children[0]).upper())
        return sx.OrderCondition(self.expression(tree.children[0]))

    def values_clause(self, tree: Tree) -> sx.ValuesBlock:
        return self.data_block(tree.children[1])

    def data_block(self, tree: Tree) -> sx.ValuesBlock:
        span = Span.of_meta(tree.meta)
        if tree.data == "inline_data_one_var":
            var = self.var(tree.children[0])
            rows = tuple((self.data_value(v),) for v in tree.children[1:])
            return sx.ValuesBlock((var,), rows, one_var_form=True, span=span, row_spans=tuple(Span.of_meta(v.meta) for v in tree.children[1:]))
        vars_: list[Variable] = []
        rows: list[tuple] = []
        row_spans: list[Span | None] = []
        seen_rows = False
        for child in tree.children:
            if _tree(child, "var"):
                vars_.append(self.var(child))
            elif _tree(child, "data_block_row"):
                rows.append(tuple(self.data_value(v) for v in child.children))
                row_spans.append(Span.of_meta(child.meta))
                seen_rows = True
            elif _is_token(child, "NIL"):
                if seen_rows or vars_ or child is not tree.children[0]:
                    rows.append(())
                    row_spans.append(Span.of_token(child))
                    seen_rows = True
        return sx.ValuesBlock(tuple(vars_), tuple(rows), span=span, row_spans=tuple(row_spans))

    def data_value(self, tree: Tree):
        child = tree.children[0]
        if _is_token(child, "UNDEF"):
            return None
        return self.term(child)

    # group graph patterns

    def group_graph_pattern(self, tree: Tree) -> sx.GroupPattern:
        span = Span.of_meta(tree.meta)
        if not tree.children:
            return sx.GroupPattern((), span=span)
        inner = tree.children[0]
        if inner.data == "sub_select":
            return sx.GroupPattern((self.sub_select(inner),), span=span)
        elements: list[sx.GroupElement] = []
        self.new_basic_pattern()
        for child in inner.children:
            ends_pattern = child.data not in ("triples_block", "filter")
            if ends_pattern:
                self.new_basic_pattern()
            elements.append(self.group_element(child))
            if ends_pattern:
                self.new_basic_pattern()
        self.new_basic_pattern()
        return sx.GroupPattern(tuple(elements), span=span)

    def sub_select(self, tree: Tree) -> sx.SubSelect:
        children = tree.children
        form = self.select_clause(children[0])
        where = self.group_graph_pattern(children[1].children[-1])
        aggregates = tuple(self.aggregate_clause(c) for c in children if _tree(c, "aggregate_clause"))
        modifiers = self.solution_modifier(next(c for c in children if _tree(c, "solution_modifier")))
        values_tree = next((c for c in children if _tree(c, "values_clause")), None)
        values = self.values_clause(values_tree) if values_tree is not None else None
        return sx.SubSelect(sx.Query(form=form, where=where, aggregates=aggregates, values=values, **modifiers))

    def group_element(self, tree: Tree) -> sx.GroupElement:
        kind = tree.data
        if kind == "triples_block":
            return sx.TriplesBlock(tuple(self.triples_same_subject(t) for t in tree.children))
        if kind == "group_or_union_graph_pattern":
            operands = [self.union_operand(c) for c in tree.children if isinstance(c, Tree)]
            if len(operands) == 1:
                return operands[0]
            return sx.UnionPattern(tuple(operands))
        if kind == "optional_graph_pattern":
            return sx.OptionalPattern(self.group_graph_pattern(tree.children[1]))
        if kind == "minus_graph_pattern":
            return sx.MinusPattern(self.group_graph_pattern(tree.children[1]))
        if kind == "service_graph_pattern":
            raise UnsupportedFeatureError(
                Diagnostic(
                    "SERVICE (federated query) is not supported: csparql evaluates queries over its own streams "
                    "and static graphs; load the remote data with 'csparql load-static' instead",
                    Span.of_token(tree.children[0]),
                )
            )
        if kind == "filter":
            return sx.FilterPattern(self.expression(tree.children[1]), span=Span.of_meta(tree.meta))
        if kind == "bind":
            var_tree = tree.children[-1]
            return sx.BindPattern(
                self.expression(tree.children[1]),
                self.var(var_tree),
                span=Span.of_meta(tree.meta),
                var_span=Span.of_meta(var_tree.meta),
            )
        if kind == "inline_data":
            return self.data_block(tree.children[1])
        raise AssertionError(f"unknown group element {kind}")

    def union_operand(self, tree: Tree):
        if tree.data == "graph_graph_pattern":
            name_node = tree.children[1]
            return sx.GraphPattern(
                self.term(name_node), self.group_graph_pattern(tree.children[2]), span=Span.of_meta(tree.meta)
            )
        return self.group_graph_pattern(tree)

    # triples

    def triples_template(self, tree: Tree) -> tuple[sx.TriplesSameSubject, ...]:
        self.in_template = True
        try:
            return tuple(self.triples_same_subject(t) for t in tree.children)
        finally:
            self.in_template = False

    def triples_same_subject(self, tree: Tree) -> sx.TriplesSameSubject:
        subject = self.node(tree.children[0])
        properties = self.property_list(tree.children[1]) if len(tree.children) > 1 else ()
        return sx.TriplesSameSubject(subject, properties, span=Span.of_meta(tree.meta))

    def property_list(self, tree: Tree) -> sx.PropertyList:
        children = tree.children
        pairs = []
        for i in range(0, len(children), 2):
            verb = self.verb(children[i])
            objects = tuple(self.node(o) for o in children[i + 1].children)
            pairs.append((verb, objects))
        return tuple(pairs)

    def verb(self, node) -> sx.Verb:
        if _tree(node, "var"):
            return self.var(node)
        if _tree(node, "rdf_type"):
            return RDF_TYPE
        if _tree(node, "iri"):
            return self.iri(node)
        return self.path(node)

    def node(self, node) -> sx.Node:
        if _tree(node, "collection") or _tree(node, "collection_path"):
            return sx.Collection(tuple(self.node(c) for c in node.children))
        if _tree(node, "blank_node_property_list") or _tree(node, "blank_node_property_list_path"):
            return sx.BlankNodePropertyList(self.property_list(node.children[0]))
        if _tree(node, "blank_node") and _is_token(node.children[0], "ANON"):
            index = self.anonymous_count
            self.anonymous_count += 1
            return sx.Anonymous(index)
        return self.term(node)

    # property paths

    def path(self, tree: Tree) -> sx.PathExpr:
        if tree.data == "path":
            options = [self.path(c) for c in tree.children]
            return options[0] if len(options) == 1 else sx.AlternativePath(tuple(options))
        if tree.data == "path_sequence":
            steps = [self.path(c) for c in tree.children]
            return steps[0] if len(steps) == 1 else sx.SequencePath(tuple(steps))
        if tree.data == "path_elt_or_inverse":
            if _is_token(tree.children[0], "INVERSE"):
                return sx.InversePath(self.path(tree.children[1]))
            return self.path(tree.children[0])
        if tree.data == "path_elt":
            primary = self.path(tree.children[0])
            if len(tree.children) > 1:
                return sx.ModifiedPath(primary, str(tree.children[1]))
            return primary
        if tree.data == "path_primary":
            child = tree.children[0]
            if _tree(child, "iri"):
                return self.iri(child)
            if _tree(child, "rdf_type"):
                return RDF_TYPE
            if _tree(child, "path_negated_property_set"):
                members = []
                for member in child.children:
                    inverse = _is_token(member.children[0], "INVERSE")
                    target = member.children[-1]
                    members.append((RDF_TYPE if _tree(target, "rdf_type") else self.iri(target), inverse))
                return sx.NegatedPropertySet(tuple(members))
            return self.path(child)
        raise AssertionError(f"unknown path node {tree.data}")

    # terms

    def term(self, node):
        if isinstance(node, Token):
            raise AssertionError(f"unexpected token {node.type}")
        kind = node.data
        if kind == "var":
            return self.var(node)
        if kind == "iri":
            return self.iri(node)
        if kind == "rdf_literal":
            return self.rdf_literal(node)
        if kind == "numeric_literal":
            return self.numeric_literal(node)
        if kind == "boolean_literal":
            return literal(str(node.children[0]).lower(), XSD_BOOLEAN)
        if kind == "blank_node":
            token = node.children[0]
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
        if kind == "nil":
            return RDF_NIL
        if kind == "rdf_type":
            return RDF_TYPE
        raise AssertionError(f"unknown term node {kind}")

    def var(self, tree: Tree) -> Variable:
        return Variable(str(tree.children[0])[1:])

    def iri(self, tree: Tree) -> URIRef:
        token = tree.children[0]
        text = str(token)
        if token.type == "IRIREF":
            return URIRef(self.resolve(_unescape_iri(text[1:-1])))
        prefix, _, local = text.partition(":")
        if prefix not in self.prefixes:
            raise QuerySemanticError(
                Diagnostic(
                    f"undefined prefix '{prefix}:' — declare it with PREFIX {prefix}: <…> before the query",
                    Span.of_token(token),
                )
            )
        return URIRef(self.prefixes[prefix] + _PN_LOCAL_ESCAPE.sub(r"\1", local))

    def string(self, tree: Tree) -> str:
        token = tree.children[0]
        text = str(token)
        quote = 3 if token.type.startswith("STRING_LITERAL_LONG") else 1
        return _unescape_string(text[quote:-quote])

    def rdf_literal(self, tree: Tree):
        lexical = self.string(tree.children[0])
        if len(tree.children) == 1:
            return literal(lexical)
        extra = tree.children[1]
        if _is_token(extra, "LANGTAG"):
            return literal(lexical, language=str(extra)[1:])
        return literal(lexical, str(self.iri(extra)))

    def numeric_literal(self, tree: Tree):
        child = tree.children[0]
        token = child.children[0] if _tree(child, "numeric_literal_signed") else child
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
        kind = node.data
        c = node.children
        if kind == "or_expression":
            return ex.Or(self.expression(c[0]), self.expression(c[1]))
        if kind == "and_expression":
            return ex.And(self.expression(c[0]), self.expression(c[1]))
        if kind == "comparison":
            return ex.Compare(str(c[1]), self.expression(c[0]), self.expression(c[2]))
        if kind == "in_expression":
            return ex.In(self.expression(c[0]), self.expression_list(c[2]))
        if kind == "not_in_expression":
            return ex.In(self.expression(c[0]), self.expression_list(c[3]), negated=True)
        if kind in ("additive", "multiplicative"):
            return ex.Arithmetic(str(c[1]), self.expression(c[0]), self.expression(c[2]))
        if kind == "additive_signed":
            return ex.Arithmetic("+", self.expression(c[0]), self.expression(c[1]))
        if kind == "signed_multiplicative":
            if len(c) == 1:
                return self.numeric_literal(Tree("numeric_literal", [c[0]]))
            return ex.Arithmetic(str(c[1]), self.expression(c[0]), self.expression(c[2]))
        if kind == "unary":
            operand = self.expression(c[1])
            return ex.Not(operand) if str(c[0]) == "!" else ex.Unary(str(c[0]), operand)
        if kind == "builtin_call":
            return self.aggregate(c[0])
        if kind == "builtin_fixed":
            return self.builtin_fixed(node)
        if kind == "builtin_list":
            return ex.BuiltinCall(str(c[0]).upper(), self.expression_list(c[1]))
        if kind == "exists":
            return ex.Exists(self.group_graph_pattern(c[1]))
        if kind == "not_exists":
            return ex.Exists(self.group_graph_pattern(c[2]), negated=True)
        if kind == "timestamp_call":
            stream = None
            stream_span = None
            if len(c) > 2:
                stream = self.term(c[2])
                stream_span = Span.of_meta(c[2].meta)
            return ex.Timestamp(self.var(c[1]), stream, stream_span=stream_span)
        if kind in ("iri_or_function", "function_call"):
            iri = self.iri(c[0])
            if len(c) == 1:
                return iri
            distinct, args = self.arg_list(c[1])
            return ex.FunctionCall(iri, args, distinct)
        if kind == "aggregate":
            return self.aggregate(node)
        return self.term(node)

    def builtin_fixed(self, tree: Tree) -> ex.BuiltinCall:
        name_token = tree.children[0]
        name = str(name_token).upper()
        args = tuple(
            self.expression(child)
            for child in tree.children[1:]
            if not _is_token(child, "NIL")
        )
        return ex.BuiltinCall(name, args)

    def aggregate(self, tree: Tree) -> ex.AggregateCall:
        c = tree.children
        name = str(c[0]).upper()
        distinct = any(_is_token(x, "DISTINCT") for x in c)
        rest = [x for x in c[1:] if not _is_token(x, "DISTINCT", "SEPARATOR")]
        target = rest[0]
        argument = None if _tree(target, "select_all") else self.expression(target)
        separator = self.string(rest[1]) if len(rest) > 1 else None
        if argument is None and name != "COUNT":
            raise QuerySyntaxError(
                Diagnostic(f"{name}(*) is not allowed: only COUNT takes '*'", Span.of_meta(target.meta))
            )
        if separator is not None and name != "GROUP_CONCAT":
            raise QuerySyntaxError(
                Diagnostic(f"SEPARATOR is only allowed in GROUP_CONCAT, not in {name}", Span.of_token(c[0]))
            )
        return ex.AggregateCall(name, argument, distinct, separator)

    def arg_list(self, tree: Tree) -> tuple[bool, tuple[ex.Expr, ...]]:
        if tree.children and _is_token(tree.children[0], "NIL"):
            return False, ()
        distinct = any(_is_token(x, "DISTINCT") for x in tree.children)
        return distinct, tuple(self.expression(x) for x in tree.children if not _is_token(x, "DISTINCT"))

    def expression_list(self, tree: Tree) -> tuple[ex.Expr, ...]:
        if tree.children and _is_token(tree.children[0], "NIL"):
            return ()
        return tuple(self.expression(x) for x in tree.children)

