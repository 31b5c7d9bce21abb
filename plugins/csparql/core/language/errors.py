"""Errors a user sees for a query that cannot be accepted.

Every error carries the place it refers to (line, column, and the length of the offending text) and renders
itself as a short message followed by the source line with a caret under the offending text, the way
compilers do::

    query.rq:4:1: error: only CONSTRUCT and DESCRIBE queries can be registered as STREAM ...
      4 | SELECT DISTINCT ?car1
        | ^^^^^^

Whatever the query, a report stays small: a line longer than ``EXCERPT_WIDTH`` characters is shown as a window
of that many characters around the position, marked with '…' where it is cut; a message quotes at most a short
piece of the text (``shorten``) and is cut to ``MAX_MESSAGE`` characters; and a report shows at most
``MAX_REPORTED`` problems.
"""

from __future__ import annotations

from dataclasses import dataclass

EXCERPT_WIDTH = 120
"""The most characters of a source line a report shows (a window around the position on longer lines)."""

MAX_MESSAGE = 600
"""The longest message a diagnostic keeps (longer ones lose their middle)."""

MAX_REPORTED = 20
"""The most problems a report shows; it says how many more there are."""

ELLIPSIS = "…"


def shorten(text: str, limit: int = 30) -> str:
    """A piece of query text as a message quotes it: its first line, cut to ``limit`` characters with '…'."""
    first_line = text.split("\n", 1)[0]
    return first_line if len(first_line) <= limit else first_line[: limit - 1] + ELLIPSIS


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

    def __post_init__(self) -> None:
        if len(self.message) > MAX_MESSAGE:
            tail = MAX_MESSAGE // 4
            cut = self.message[: MAX_MESSAGE - tail - 3] + f" {ELLIPSIS} " + self.message[-tail:]
            object.__setattr__(self, "message", cut)

    def render(self, source: str, source_name: str = "<query>") -> str:
        """The message with its position and, when the position is known, the source line (at most
        ``EXCERPT_WIDTH`` characters of it, around the position) and a caret under the offending text."""
        if self.span is None:
            return f"{source_name}: error: {self.message}"
        head = f"{source_name}:{self.span.line}:{self.span.column}: error: {self.message}"
        text = _source_line(source, self.span.line)
        if text is None:
            return head
        text = text.rstrip("\r").expandtabs(1)
        start = self.span.column - 1
        width = max(1, min(self.span.length, len(text) - start))
        if len(text) > EXCERPT_WIDTH:
            # A window of the line with the position a third of the way in, '…' where the line goes on.
            first = max(0, min(start - EXCERPT_WIDTH // 3, len(text) - EXCERPT_WIDTH))
            last = first + EXCERPT_WIDTH
            width = max(1, min(width, last - start))
            marker = ELLIPSIS if first > 0 else ""
            text = marker + text[first:last] + (ELLIPSIS if last < len(text) else "")
            start = start - first + len(marker)
        number = str(self.span.line)
        gutter = " " * len(number)
        caret = " " * start + "^" * width
        return f"{head}\n  {number} | {text}\n  {gutter} | {caret}"


def _source_line(source: str, number: int) -> str | None:
    """Line ``number`` (1-based) of the source, or None when there is no such line; without splitting the whole
    text, so that a report on a long query costs no more than the line it shows."""
    if number < 1:
        return None
    start = 0
    for _ in range(number - 1):
        start = source.find("\n", start) + 1
        if start == 0:
            return None
    end = source.find("\n", start)
    return source[start:] if end < 0 else source[start:end]


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
        """Every diagnostic with its position and caret, one after the other (the first ``MAX_REPORTED``, and
        how many more there are)."""
        shown = [d.render(self.source, self.source_name) for d in self.diagnostics[:MAX_REPORTED]]
        hidden = len(self.diagnostics) - MAX_REPORTED
        if hidden > 0:
            shown.append(f"{self.source_name}: … and {hidden:,} more problem{'s' if hidden > 1 else ''}")
        return "\n".join(shown)

    def __str__(self) -> str:
        return self.render()


class QuerySyntaxError(QueryError):
    """The text is not C-SPARQL: the parser could not go on at the given place."""


class QuerySemanticError(QueryError):
    """The text parses but breaks a rule of the language (registration, windows, aggregates, scoping)."""


class UnsupportedFeatureError(QueryError):
    """The text is valid SPARQL but asks for something this engine refuses (SERVICE, SPARQL Update)."""
