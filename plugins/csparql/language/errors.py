"""Errors a user sees for a query that cannot be accepted.

Every error carries the place it refers to (line, column, and the length of the offending text) and renders
itself as a short message followed by the source line with a caret under the offending text, the way
compilers do::

    query.rq:4:1: error: only CONSTRUCT and DESCRIBE queries can be registered as STREAM ...
      4 | SELECT DISTINCT ?car1
        | ^^^^^^
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A stretch of query text: 1-based line and column of its start, and its length in characters."""

    line: int
    column: int
    length: int = 1

    @classmethod
    def of_token(cls, token) -> Span:
        """The span of a lark token (its first line only, for tokens that run over several lines)."""
        first_line = str(token).split("\n", 1)[0]
        return cls(token.line, token.column, max(1, len(first_line)))

    @classmethod
    def of_meta(cls, meta) -> Span | None:
        """The span of a lark tree node (its first line only), or None when lark recorded no position."""
        if getattr(meta, "empty", True):
            return None
        length = meta.end_column - meta.column if meta.end_line == meta.line else 1
        return cls(meta.line, meta.column, max(1, length))


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a query: what is wrong, in plain words, and where."""

    message: str
    span: Span | None = None

    def render(self, source: str, source_name: str = "<query>") -> str:
        """The message with its position and, when the position is known, the source line and a caret."""
        if self.span is None:
            return f"{source_name}: error: {self.message}"
        head = f"{source_name}:{self.span.line}:{self.span.column}: error: {self.message}"
        lines = source.split("\n")
        if not 1 <= self.span.line <= len(lines):
            return head
        text = lines[self.span.line - 1].rstrip("\r").expandtabs(1)
        number = str(self.span.line)
        gutter = " " * len(number)
        width = max(1, min(self.span.length, len(text) - self.span.column + 1))
        caret = " " * (self.span.column - 1) + "^" * width
        return f"{head}\n  {number} | {text}\n  {gutter} | {caret}"


class QueryError(Exception):
    """A query was refused. Carries one or more diagnostics and the source they point into.

    ``str(error)`` gives the full report (every diagnostic with its caret), which is what a user should see.
    """

    kind = "error"

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic, source: str = "", source_name: str = "<query>"):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        self.source = source
        self.source_name = source_name
        super().__init__(self.diagnostics[0].message if self.diagnostics else "invalid query")

    @property
    def message(self) -> str:
        """The first problem's message, without position."""
        return self.diagnostics[0].message

    @property
    def span(self) -> Span | None:
        """Where the first problem is."""
        return self.diagnostics[0].span

    def with_source(self, source: str, source_name: str) -> QueryError:
        """The same error, rendered against the given source text and name."""
        return type(self)(self.diagnostics, source, source_name)

    def render(self) -> str:
        """Every diagnostic with its position and caret, one after the other."""
        return "\n".join(d.render(self.source, self.source_name) for d in self.diagnostics)

    def __str__(self) -> str:
        return self.render()


class QuerySyntaxError(QueryError):
    """The text is not C-SPARQL: the parser could not go on at the given place."""


class QuerySemanticError(QueryError):
    """The text parses but breaks a rule of the language (registration, windows, aggregates, scoping)."""


class UnsupportedFeatureError(QueryError):
    """The text is valid SPARQL but asks for something this engine refuses (SERVICE, SPARQL Update)."""
