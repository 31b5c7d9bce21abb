"""Text to syntax tree: ``parse(text)`` returns a ``csparql.core.language.syntax.Query`` or raises a ``QueryError``.

The grammar (``grammar.lark``, and for RSP-QL ``rspql.lark`` after it) is parsed with lark's LALR(1) parser
and contextual lexer, built once per grammar and kept on disk (``lark_parser``). A parse goes: the length
limit, lark (counting terms as it reads them, ``csparql.core.language.limits.TermLimit``), the nesting limit
(``limits.check_nesting``), then the tree builder (``csparql.core.language.builder.TreeBuilder``). Lark's
exceptions never leave this module: they become ``QuerySyntaxError`` with a message in plain words, the
position, and what was expected there (``csparql.core.language.syntax_errors``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path as FilePath

import lark

from csparql.core.language import syntax as sx
from csparql.core.language.builder import TreeBuilder
from csparql.core.language.errors import Diagnostic, QueryError, QuerySyntaxError
from csparql.core.language.limits import MAX_QUERY_CHARACTERS, TermLimit, check_nesting
from csparql.core.language.syntax_errors import syntax_error, terminal_words

GRAMMAR_FILE = FilePath(str(resources.files("csparql") / "core" / "language" / "grammar.lark"))
RSPQL_GRAMMAR_FILE = FilePath(str(resources.files("csparql") / "core" / "language" / "rspql.lark"))
"""The RSP-QL additions: the RSP-QL parser is built from ``GRAMMAR_FILE`` followed by this file."""
DIALECTS = ("csparql", "rspql")
"""The query languages csparql reads: C-SPARQL and RSP-QL (``csparql.core.language.dialect`` tells them apart)."""

LARK_OPTIONS = {"parser": "lalr", "lexer": "contextual", "propagate_positions": True, "maybe_placeholders": False}

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
def lark_parser(dialect: str = "csparql") -> lark.Lark:
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
    # The term limit is saved with the parser (pickled by its module and name): a parser saved where it lived
    # elsewhere is not loaded.
    postlex = f"{TermLimit.__module__}.{TermLimit.__qualname__}"
    key = "\0".join([grammar, lark.__version__, sys.version, repr(sorted(LARK_OPTIONS.items())), postlex])
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
    ``csparql.core.language.checks``.
    """
    return parse_with(text, source_name, "csparql", TreeBuilder)


def parse_with(text: str, source_name: str, dialect: str, builder: type[TreeBuilder]) -> sx.Query:
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
        tree = lark_parser(dialect).parse(text)
    except lark.exceptions.UnexpectedInput as error:
        raise syntax_error(error, text, _terminal_words(dialect)).with_source(text, source_name) from None
    except QueryError as error:  # beyond MAX_TERMS
        raise error.with_source(text, source_name) from None
    try:
        check_nesting(tree)
        return builder().build(tree)
    except QueryError as error:
        raise error.with_source(text, source_name) from None


@functools.cache
def _terminal_words(dialect: str) -> dict[str, str]:
    return terminal_words(lark_parser(dialect).terminals)
