"""Lark's syntax errors in plain words: ``syntax_error(error, text, terminals)`` is the ``QueryError`` a query
author reads — what was found, what was expected there (in words, not terminal names), the position.

Lark's exceptions never leave ``csparql.core.language.parser``: it hands each one to ``syntax_error``.
"""

from __future__ import annotations

import re

import lark
from lark import Token

from csparql.core.language.errors import Diagnostic, QueryError, QuerySyntaxError, Span, UnsupportedFeatureError, shorten

UPDATE_KEYWORDS = ("INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH")
"""The words that start a SPARQL Update operation, refused as such where a query form was expected."""

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


def terminal_words(terminals) -> dict[str, str]:
    """How each of a parser's terminals (lark's ``TerminalDef``s) is named in a message: the words of
    ``_TERMINAL_WORDS``, a keyword or punctuation as written."""
    words = dict(_TERMINAL_WORDS)
    for terminal in terminals:
        if terminal.name in words:
            continue
        pattern = terminal.pattern
        if isinstance(pattern, lark.lexer.PatternStr):
            words[terminal.name] = f"'{pattern.value}'"
        elif re.fullmatch(r"[A-Z_]+", terminal.name) and "(?i:" in pattern.value:
            words[terminal.name] = f"'{terminal.name}'"
    return words


def _describe_expected(names, words: dict[str, str]) -> str:
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


def syntax_error(error: lark.exceptions.UnexpectedInput, text: str, words: dict[str, str]) -> QueryError:
    """The error to report for lark's ``error`` in ``text``; ``words`` names the parser's terminals
    (``terminal_words``)."""
    line, column = getattr(error, "line", -1), getattr(error, "column", -1)
    if isinstance(error, lark.exceptions.UnexpectedToken) and error.token.type == "$END":
        span = _end_span(text)
        if all(line.strip().startswith("#") or not line.strip() for line in text.split("\n")):
            return QuerySyntaxError(
                Diagnostic("the query is empty: expected SELECT, CONSTRUCT, ASK or DESCRIBE", span if text.strip() else Span(1, 1))
            )
        return QuerySyntaxError(Diagnostic(f"unexpected end of query; expected {_describe_expected(error.expected, words)}", span))
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
        message = f"unexpected {_describe_token(token)}; expected {_describe_expected(error.expected, words)}"
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
        message = f"unknown time unit '{shorten(word)}'; expected {_describe_expected(allowed, words)}"
    elif word:
        message = f"unexpected '{shorten(word)}'; expected {_describe_expected(allowed, words)}"
    else:
        shown = char if char.strip() else repr(char)
        message = f"unexpected character '{shown}'"
        if allowed:
            message += f"; expected {_describe_expected(allowed, words)}"
    return QuerySyntaxError(Diagnostic(message, Span(line, column, len(word) or 1)))

