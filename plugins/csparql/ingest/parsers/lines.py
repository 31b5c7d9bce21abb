"""N-Triples and timestamped N-Quads, one line at a time, as Spark executors parse them.

This module runs inside the executors' Python workers (``mapInArrow``, through ``csparql.ingest.parsers.ranges``), so
it imports neither Spark nor Delta: only the standard library, pyarrow, the storage contract
(``csparql.storage.schema``, ``vocabulary``, ``instants``) and the escapes every reader decodes alike
(``csparql.core.language.escapes``).

A line is a triple, optionally followed by its timestamp as the fourth term (timestamped N-Quads,
as in the social-data paper, §3.1)::

    <s> <p> <o> "2010-03-22T10:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
    <s> <p> <o> "1269252000000"^^<http://www.w3.org/2001/XMLSchema#integer> .
    <s> <p> <o> 1269252000000 .

Parsing is one compiled regular expression for the common case; escapes are decoded only when a backslash is
present; a line the expression does not match goes through a small tokenizer that either parses it (odd but
valid spacing) or says exactly what is wrong. Comment lines (``#``) and blank lines are skipped.

Terms become the stored struct (``csparql.storage.terms``): IRIs and blank nodes by kind and value; literals
with their lexical form, their datatype (``xsd:string`` for a plain literal, ``rdf:langString`` with a tag)
and their language tag in lower case.

Timestamps: an ``xsd:dateTime`` (or ``xsd:dateTimeStamp``) is an instant; without a zone it is read as UTC,
with an offset it is converted to UTC; fractional seconds beyond microseconds are truncated. An integer
(``xsd:integer``/``long``/``int``/..., a plain literal of digits, or a bare number) is milliseconds since
the epoch. A plain literal may be either. Instants must lie in years 1..9999, and, for an ingest, not after
its ``FutureLimit`` (its wall clock plus the maximum future skew): a later one rejects the line.

Blank node labels are scoped: the label ``b1`` of a file becomes ``<scope>b1``, where the caller passes a
scope unique to the (ingest, file), e.g. ``i3f9c2a1b0e7df1_`` — so ``_:b1`` of two files, or of the same
file ingested twice, are different nodes, as RDF merging requires.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from csparql.core.language.escapes import EscapeError
from csparql.core.language.escapes import unescape as decode_escapes
from csparql.storage.instants import MAX_MICROS, MIN_MICROS, hour_buckets
from csparql.storage.schema import BLANK, IRI, LITERAL, PARSED_STATIC, PARSED_STREAM, TERM_TYPE
from csparql.storage.vocabulary import DATETIME_TYPES, EPOCH_MILLIS_TYPES, RDF_LANGSTRING, XSD_DATETIME, XSD_STRING


class LineError(ValueError):
    """A line that is not a triple (or not a timestamped one); the message is the reason."""


@dataclass(frozen=True)
class FutureLimit:
    """The latest timestamp (µs) an ingest accepts: the wall clock of its driver plus the maximum future skew,
    fixed when the ingest starts so that every executor applies the same bound. ``described`` names it in a
    reject's reason (the instant and how it was reached)."""

    latest: int
    described: str

    def reason(self, shown: str) -> str:
        return f"the timestamp '{shown}' is too far in the future: later than {self.described}"


# ---------------------------------------------------------------------------------------------------------
# The common case: one regular expression
# ---------------------------------------------------------------------------------------------------------

_IRI_CHAR = r'[^\x00-\x20<>"{}|^`\\]'
_IRI_BODY = rf"{_IRI_CHAR}*(?:\\(?:u[0-9A-Fa-f]{{4}}|U[0-9A-Fa-f]{{8}}){_IRI_CHAR}*)*"
_ABS_IRI = rf"<([A-Za-z][A-Za-z0-9+.\-]*:{_IRI_BODY})>"
_BNODE = r"_:([A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_\-])?)"
_STRING = r'"([^"\\\r\n]*(?:\\.[^"\\\r\n]*)*)"'
_LANG = r"@([A-Za-z]+(?:-[A-Za-z0-9]+)*)"
_WS = r"[ \t]*"

_FAST = re.compile(
    rf"{_WS}(?:{_ABS_IRI}|{_BNODE}){_WS}{_ABS_IRI}{_WS}"
    rf"(?:{_ABS_IRI}|{_BNODE}|{_STRING}(?:{_LANG}|\^\^{_ABS_IRI})?){_WS}"
    rf"(?:(?:{_STRING}(?:\^\^{_ABS_IRI})?|([+-]?[0-9]+)){_WS})?"
    rf"\.{_WS}(?:#.*)?"
)

# ---------------------------------------------------------------------------------------------------------
# Escapes
# ---------------------------------------------------------------------------------------------------------

def _decoded(text: str, start: int, iri: bool = False) -> str:
    """``text`` with its N-Triples escapes decoded (``csparql.core.language.escapes.unescape``: ``\\uXXXX``,
    ``\\UXXXXXXXX`` and, outside IRIs, ``\\t \\b \\n \\r \\f \\" \\' \\\\``); a bad escape is a ``LineError``
    saying where: the column of the line (``start`` is the index in the line where ``text`` begins)."""
    try:
        return decode_escapes(text, iri=iri)
    except EscapeError as error:
        raise LineError(f"{error.reason}, at column {start + error.offset + 1}") from None


# ---------------------------------------------------------------------------------------------------------
# Timestamps
# ---------------------------------------------------------------------------------------------------------

_DATETIME = re.compile(
    r"(-?[0-9]{4,})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?(Z|[+-][0-9]{2}:[0-9]{2})?"
)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# 'YYYY-MM-DDTHH' -> microseconds at the start of that hour (UTC): most timestamps of a stream share a few
# hours, so the common form is parsed by slicing the minutes, seconds and fraction off a cached hour.
_HOURS: dict[str, int] = {}


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def datetime_micros(lexical: str) -> int | None:
    """Microseconds since the epoch of an xsd:dateTime lexical form (no zone: UTC), or None if it is not one."""
    base = _HOURS.get(lexical[:13])
    if base is not None and len(lexical) >= 19 and lexical[13] == ":" and lexical[16] == ":":
        minutes, seconds, tail = lexical[14:16], lexical[17:19], lexical[19:]
        if _digits(minutes) and _digits(seconds) and minutes < "60" and seconds < "60":
            base += (int(minutes) * 60 + int(seconds)) * 1_000_000
            if tail == "Z" or not tail:
                return base
            if tail[0] == "." and tail[-1] == "Z" and len(tail) > 2 and _digits(tail[1:-1]):
                return base + int(tail[1:-1][:6].ljust(6, "0"))
    micros = _parse_datetime(lexical)
    if micros is not None and len(_HOURS) < 100_000:
        match = _DATETIME.fullmatch(lexical)
        if len(match.group(1)) == 4 and match.group(4) != "24" and match.group(8) in (None, "Z"):
            _HOURS[lexical[:13]] = micros - micros % 3_600_000_000
    return micros


def _parse_datetime(lexical: str) -> int | None:
    match = _DATETIME.fullmatch(lexical)
    if match is None:
        return None
    year_, month_, day_, hour_, minute_, second_, fraction, zone = match.groups()
    year, month, day = int(year_), int(month_), int(day_)
    hour, minute, second = int(hour_), int(minute_), int(second_)
    if not 1 <= month <= 12 or day < 1:
        return None
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if day > _DAYS_IN_MONTH[month - 1] + (1 if month == 2 and leap else 0):
        return None
    if minute > 59 or second > 59:
        return None
    micro = int(fraction[:6].ljust(6, "0")) if fraction else 0
    if hour == 24:  # 24:00:00 is the end of the day (XML Schema)
        if minute or second or micro:
            return None
    elif hour > 23:
        return None
    micros = (((_days_from_civil(year, month, day) * 24 + hour) * 60 + minute) * 60 + second) * 1_000_000 + micro
    if zone and zone != "Z":
        offset_hours, offset_minutes = int(zone[1:3]), int(zone[4:6])
        if offset_hours > 14 or offset_minutes > 59:
            return None
        offset = (offset_hours * 60 + offset_minutes) * 60_000_000
        micros = micros - offset if zone[0] == "+" else micros + offset
    return micros


def _in_range(micros: int, shown: str) -> int:
    if not MIN_MICROS <= micros <= MAX_MICROS:
        raise LineError(f"the timestamp '{shown}' is outside years 1..9999")
    return micros


def timestamp_micros(lexical: str, datatype: str | None, bare: bool = False) -> int:
    """The instant of the fourth term: a dateTime, or epoch milliseconds (see the module docstring)."""
    if bare or datatype in EPOCH_MILLIS_TYPES:
        if _INTEGER.fullmatch(lexical):
            return _in_range(int(lexical) * 1000, lexical)
        raise LineError(f"the timestamp '{lexical}' is not an integer number of epoch milliseconds")
    if datatype in DATETIME_TYPES:
        micros = datetime_micros(lexical)
        if micros is None:
            raise LineError(f"the timestamp '{lexical}' is not a valid xsd:dateTime")
        return _in_range(micros, lexical)
    if datatype is None or datatype == XSD_STRING:
        micros = datetime_micros(lexical)
        if micros is None and _INTEGER.fullmatch(lexical):
            micros = int(lexical) * 1000
        if micros is None:
            raise LineError(f"the timestamp '{lexical}' is neither an xsd:dateTime nor epoch milliseconds")
        return _in_range(micros, lexical)
    raise LineError(
        f"the timestamp '{lexical}' has the datatype <{datatype}>; give an xsd:dateTime or an integer of epoch "
        "milliseconds"
    )


def bounded_timestamp_micros(lexical: str, datatype: str | None, future: FutureLimit | None,
                             bare: bool = False) -> int:
    """``timestamp_micros``, refused (``LineError``) when later than ``future``'s bound."""
    micros = timestamp_micros(lexical, datatype, bare)
    if future is not None and micros > future.latest:
        raise LineError(future.reason(lexical))
    return micros


_CANONICAL_DATETIME = (r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
                       r"(\.[0-9]{1,6})?Z$")
_SHORT_INTEGER = r"^[0-9]{1,14}$"


def bounded_timestamps_micros(lexical: pa.Array | pa.ChunkedArray, datatype: pa.Array | pa.ChunkedArray,
                              future: FutureLimit | None) -> tuple[pa.Array, dict[int, str]]:
    """``bounded_timestamp_micros`` of many timestamps at once (lexical forms and datatypes as string arrays):
    their instants (µs; null where refused) and, by position, the reason each refused one is refused. The
    common forms (a UTC ``xsd:dateTime`` with at most six fraction digits, a ``Z`` and a date that exists; a
    non-negative integer of epoch milliseconds) are read by Arrow's kernels; any other goes through
    ``bounded_timestamp_micros``, so both give the same instants and the same reasons."""
    lexical, datatype = (column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
                         for column in (lexical, datatype))
    latest = future.latest if future is not None else MAX_MICROS
    no_instant = pa.scalar(None, pa.int64())
    is_datetime = pc.fill_null(pc.is_in(datatype, pa.array(sorted(DATETIME_TYPES))), False)
    canonical = pc.and_(is_datetime, pc.match_substring_regex(lexical, _CANONICAL_DATETIME))
    seconds_text = pc.utf8_slice_codeunits(lexical, 0, 19)
    seconds = pc.strptime(seconds_text, format="%Y-%m-%dT%H:%M:%S", unit="us", error_is_null=True)
    # Arrow's strptime moves a day the month lacks (February 30) into the next month: the day must stay
    day_text = pc.if_else(canonical, pc.utf8_slice_codeunits(lexical, 8, 10), pa.scalar(None, pa.string()))
    exists = pc.fill_null(pc.equal(pc.day(seconds), pc.cast(day_text, pa.int64())), False)
    fraction_text = pc.if_else(canonical, pc.utf8_slice_codeunits(lexical, 20, -1), pa.scalar(None, pa.string()))
    fraction = pc.cast(pc.utf8_rpad(fraction_text, 6, "0"), pa.int64())
    from_datetime = pc.if_else(pc.and_(canonical, exists), pc.add(pc.cast(seconds, pa.int64()), fraction),
                               no_instant)
    is_millis = pc.and_(pc.fill_null(pc.is_in(datatype, pa.array(sorted(EPOCH_MILLIS_TYPES))), False),
                        pc.match_substring_regex(lexical, _SHORT_INTEGER))
    from_millis = pc.multiply(pc.cast(pc.if_else(is_millis, lexical, pa.scalar(None, pa.string())), pa.int64()),
                              1000)
    fast = pc.coalesce(from_datetime, from_millis)
    fast = pc.if_else(pc.and_(pc.greater_equal(fast, MIN_MICROS), pc.less_equal(fast, latest)), fast, no_instant)
    unusual = pc.is_null(fast)
    positions = pc.indices_nonzero(unusual).to_pylist()
    if not positions:
        return fast, {}
    reasons: dict[int, str] = {}
    slow: list[int | None] = []
    for position in positions:
        try:
            slow.append(bounded_timestamp_micros(lexical[position].as_py(), datatype[position].as_py(), future))
        except LineError as error:
            slow.append(None)
            reasons[position] = str(error)
    return pc.replace_with_mask(fast, unusual, pa.array(slow, pa.int64())), reasons


# ---------------------------------------------------------------------------------------------------------
# One line
# ---------------------------------------------------------------------------------------------------------

Term = tuple  # (kind, value, datatype, language)


@dataclass(frozen=True)
class Statement:
    """A parsed line: three terms and the fourth term, if any, as (kind, value, datatype, language) tuples
    (a bare number is a literal with the datatype ``None`` and language ``"bare"``)."""

    s: Term
    p: Term
    o: Term
    g: Term | None


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_IRI_AT = re.compile(r"<([^>\s]*)>")
_BNODE_AT = re.compile(
    r"_:([A-Za-z0-9_\u00B7\u00C0-\uFFFD\U00010000-\U000EFFFF]"
    r"(?:[A-Za-z0-9_.\-\u00B7\u00C0-\uFFFD\U00010000-\U000EFFFF]*[A-Za-z0-9_\-\u00B7\u00C0-\uFFFD\U00010000-\U000EFFFF])?)"
)
_STRING_AT = re.compile(_STRING)
_LANG_AT = re.compile(_LANG)
_NUMBER_AT = re.compile(r"[+-]?[0-9]+(?![0-9A-Za-z_:.]*[0-9A-Za-z_:])")
_WS_AT = re.compile(_WS)
_FORBIDDEN_IRI = re.compile(r'[\x00-\x20<>"{}|^`]')


def _iri(body: str, start: int) -> str:
    """The IRI written ``<body>``, ``body`` starting at index ``start`` of its line."""
    value = _decoded(body, start, iri=True)
    bad = _FORBIDDEN_IRI.search(value)
    if bad is not None:
        raise LineError(f"the IRI <{body}> contains the character {bad.group(0)!r}, which IRIs cannot hold")
    if not _SCHEME.match(value):
        raise LineError(f"the IRI <{body}> is relative; N-Triples needs absolute IRIs")
    return value


class _Tokens:
    """The slow path: term by term, with a reason for whatever is wrong."""

    def __init__(self, line: str):
        self.line = line
        self.pos = 0

    def skip(self) -> None:
        self.pos = _WS_AT.match(self.line, self.pos).end()

    def at_end(self) -> bool:
        return self.pos >= len(self.line) or self.line[self.pos] == "#"

    def peek(self) -> str:
        return self.line[self.pos] if self.pos < len(self.line) else ""

    def iri(self) -> str:
        line, start = self.line, self.pos
        match = _IRI_AT.match(line, start)
        if match is None:
            close = line.find(">", start)
            if close < 0:
                raise LineError("an IRI is not closed with '>'")
            inner = line[start + 1:close]
            bad = re.search(r"[\s<\"{}|^`]", inner)
            shown = bad.group(0) if bad else "?"
            raise LineError(f"the IRI <{inner}> contains the character {shown!r}, which IRIs cannot hold")
        self.pos = match.end()
        return _iri(match.group(1), match.start(1))

    def bnode(self) -> str:
        match = _BNODE_AT.match(self.line, self.pos)
        if match is None:
            raise LineError("invalid blank node label after '_:'")
        self.pos = match.end()
        return match.group(1)

    def literal(self) -> Term:
        match = _STRING_AT.match(self.line, self.pos)
        if match is None:
            rest = self.line[self.pos + 1:]
            if "\\" in rest and re.search(r'\\$', rest):
                raise LineError("a string literal ends with a lone backslash")
            raise LineError("a string literal is not closed with '\"'")
        self.pos = match.end()
        lexical = _decoded(match.group(1), match.start(1))
        if self.peek() == "@":
            lang = _LANG_AT.match(self.line, self.pos)
            if lang is None:
                raise LineError("invalid language tag after '@'")
            self.pos = lang.end()
            return (LITERAL, lexical, RDF_LANGSTRING, lang.group(1).lower())
        if self.line.startswith("^^", self.pos):
            self.pos += 2
            if self.peek() != "<":
                raise LineError("a datatype after '^^' must be an IRI in <>")
            return (LITERAL, lexical, self.iri(), None)
        return (LITERAL, lexical, XSD_STRING, None)

    def term(self, position: str) -> Term:
        char = self.peek()
        if char == "<":
            return (IRI, self.iri(), None, None)
        if self.line.startswith("_:", self.pos):
            return (BLANK, self.bnode(), None, None)
        if char == '"':
            return self.literal()
        if position == "fourth":
            number = _NUMBER_AT.match(self.line, self.pos)
            if number is not None:
                self.pos = number.end()
                return (LITERAL, number.group(0), None, "bare")
        if char == "" or char == "#":
            raise LineError(f"the statement ends before its {position}")
        if char == ".":
            raise LineError(f"expected the {position} term, found '.'")
        word = re.match(r"\S+", self.line[self.pos:]).group(0)[:40]
        raise LineError(f"expected the {position} term, found '{word}'")


def parse_statement(line: str) -> Statement | None:
    """The terms of one line (None for a blank or comment line); raises ``LineError`` with the reason."""
    tokens = _Tokens(line)
    tokens.skip()
    if tokens.at_end():
        return None
    s = tokens.term("subject")
    if s[0] == LITERAL:
        raise LineError("a literal cannot be the subject")
    tokens.skip()
    p = tokens.term("predicate")
    if p[0] != IRI:
        raise LineError("the predicate must be an IRI")
    tokens.skip()
    o = tokens.term("object")
    tokens.skip()
    g = None
    if tokens.peek() != ".":
        if tokens.at_end():
            raise LineError("expected '.' at the end of the statement")
        g = tokens.term("fourth")
        tokens.skip()
    if tokens.peek() != ".":
        if tokens.at_end():
            raise LineError("expected '.' at the end of the statement")
        word = re.match(r"\S+", line[tokens.pos:]).group(0)[:40]
        raise LineError(f"expected '.' at the end of the statement, found '{word}'")
    tokens.pos += 1
    tokens.skip()
    if not tokens.at_end():
        raise LineError(f"unexpected text after the final '.': '{line[tokens.pos:][:40]}'")
    return Statement(s, p, o, g)


# ---------------------------------------------------------------------------------------------------------
# Batches of lines -> Arrow
# ---------------------------------------------------------------------------------------------------------

TIMESTAMP_OPTION = "--timestamp"
"""How messages name the timestamp given to triples that carry none: the command line's option. A push over HTTP
names its query parameter instead (``csparql.ingest.pushed``)."""
NO_TIMESTAMP = f"the triple has no timestamp: give it as the fourth term, or pass {TIMESTAMP_OPTION} for plain RDF"
GRAPH_NAME = "the fourth term must be the triple's timestamp (an xsd:dateTime or epoch milliseconds), not a graph name"
STATIC_QUAD = "a static graph holds triples: a fourth term is not allowed here"


@dataclass
class LineParser:
    """Parses lines into columns. ``timestamps``: a stream (the fourth term, else ``default_micros``) or a
    static graph (no fourth term). ``scope`` prefixes blank node labels. A timestamp after ``future`` rejects
    its line (``default_micros`` is the caller's to check)."""

    scope: str
    timestamps: bool = True
    default_micros: int | None = None
    future: FutureLimit | None = None

    def __post_init__(self):
        self.rejects: list[tuple[int, str, str]] = []
        self._reset()

    def _reset(self) -> None:
        self.s_kind, self.s_value = [], []
        self.p_value = []
        self.o_kind, self.o_value, self.o_datatype, self.o_language = [], [], [], []
        self.ts, self.lines = [], []

    def __len__(self) -> int:
        return len(self.lines)

    def add_lines(self, first_number: int, lines: list[str]) -> None:
        """Parse consecutive lines (numbered from ``first_number``, without newlines, ``\\r`` stripped).

        The hot loop of ingest: the common line (no backslash, IRIs or blank nodes, a canonical UTC
        dateTime or epoch milliseconds) is handled inline; anything else goes through ``add``.
        """
        fast = _FAST.fullmatch
        hours = _HOURS
        scope = self.scope
        stream = self.timestamps
        default = self.default_micros
        latest = self.future.latest if self.future is not None else MAX_MICROS
        s_kind, s_value, p_value = self.s_kind.append, self.s_value.append, self.p_value.append
        o_kind, o_value = self.o_kind.append, self.o_value.append
        o_datatype, o_language = self.o_datatype.append, self.o_language.append
        ts_append, line_append = self.ts.append, self.lines.append
        number = first_number - 1
        for line in lines:
            number += 1
            match = fast(line)
            if match is None or "\\" in line:
                self.add(number, line)
                continue
            s_iri, s_bnode, p, o_iri, o_bnode, o_lex, o_lang, o_dt, g_lex, g_dt, g_int = match.groups()
            if stream:
                ts = None
                if g_lex is not None:
                    if g_dt == XSD_DATETIME:
                        base = hours.get(g_lex[:13])
                        if base is not None and len(g_lex) >= 20 and g_lex[-1] == "Z" and g_lex[13] == ":" \
                                and g_lex[16] == ":":
                            minutes, seconds, fraction = g_lex[14:16], g_lex[17:19], g_lex[19:-1]
                            digits = minutes + seconds + fraction[1:]
                            if digits.isdigit() and digits.isascii() and minutes < "60" and seconds < "60":
                                if not fraction:
                                    ts = base + (int(minutes) * 60 + int(seconds)) * 1_000_000
                                elif fraction[0] == "." and 1 < len(fraction) <= 7:
                                    ts = base + (int(minutes) * 60 + int(seconds)) * 1_000_000 \
                                        + int(fraction[1:].ljust(6, "0"))
                    elif g_dt in EPOCH_MILLIS_TYPES and g_lex.isdigit() and g_lex.isascii() and len(g_lex) < 15:
                        ts = int(g_lex) * 1000
                elif g_int is not None:
                    if g_int.isdigit() and g_int.isascii() and len(g_int) < 15:
                        ts = int(g_int) * 1000
                elif default is not None:
                    ts = default
                if ts is None or ts > latest:  # anything unusual (or wrong) about the timestamp: the general path
                    self.add(number, line)
                    continue
                ts_append(ts)
            elif g_lex is not None or g_int is not None:
                self.add(number, line)
                continue
            if s_iri is not None:
                s_kind(IRI)
                s_value(s_iri)
            else:
                s_kind(BLANK)
                s_value(scope + s_bnode)
            p_value(p)
            if o_iri is not None:
                o_kind(IRI)
                o_value(o_iri)
                o_datatype(None)
                o_language(None)
            elif o_bnode is not None:
                o_kind(BLANK)
                o_value(scope + o_bnode)
                o_datatype(None)
                o_language(None)
            else:
                o_kind(LITERAL)
                o_value(o_lex)
                if o_lang is not None:
                    o_datatype(RDF_LANGSTRING)
                    o_language(o_lang.lower())
                else:
                    o_datatype(o_dt or XSD_STRING)
                    o_language(None)
            line_append(number)

    def add(self, number: int, line: str) -> None:
        """Parse one line (without its newline); a bad line is kept in ``rejects`` with its reason."""
        match = _FAST.fullmatch(line)
        try:
            if match is not None:
                self._add_fast(match)
            else:
                statement = parse_statement(line)
                if statement is None:
                    return
                self._add_statement(statement)
        except LineError as error:
            self.rejects.append((number, str(error), line))
            return
        self.lines.append(number)

    def _add_fast(self, match: re.Match) -> None:
        s_iri, s_bnode, p, o_iri, o_bnode, o_lex, o_lang, o_dt, g_lex, g_dt, g_int = match.groups()
        # Compute everything first: a LineError must leave no half-added row.
        if s_iri is not None:
            s_kind, s_value = IRI, (_iri(s_iri, match.start(1)) if "\\" in s_iri else s_iri)
        else:
            s_kind, s_value = BLANK, self.scope + s_bnode
        if "\\" in p:
            p = _iri(p, match.start(3))
        if o_iri is not None:
            o = (IRI, _iri(o_iri, match.start(4)) if "\\" in o_iri else o_iri, None, None)
        elif o_bnode is not None:
            o = (BLANK, self.scope + o_bnode, None, None)
        else:
            lexical = _decoded(o_lex, match.start(6)) if "\\" in o_lex else o_lex
            if o_lang is not None:
                o = (LITERAL, lexical, RDF_LANGSTRING, o_lang.lower())
            elif o_dt is not None:
                o = (LITERAL, lexical, _iri(o_dt, match.start(8)) if "\\" in o_dt else o_dt, None)
            else:
                o = (LITERAL, lexical, XSD_STRING, None)
        if g_lex is not None:
            g = (LITERAL, _decoded(g_lex, match.start(9)) if "\\" in g_lex else g_lex, g_dt, None)
        elif g_int is not None:
            g = (LITERAL, g_int, None, "bare")
        else:
            g = None
        ts = self._timestamp(g)
        self.s_kind.append(s_kind)
        self.s_value.append(s_value)
        self.p_value.append(p)
        self.o_kind.append(o[0])
        self.o_value.append(o[1])
        self.o_datatype.append(o[2])
        self.o_language.append(o[3])
        self.ts.append(ts)

    def _add_statement(self, statement: Statement) -> None:
        s, p, o = statement.s, statement.p, statement.o
        ts = self._timestamp(statement.g)
        scope = self.scope
        self.s_kind.append(s[0])
        self.s_value.append(scope + s[1] if s[0] == BLANK else s[1])
        self.p_value.append(p[1])
        self.o_kind.append(o[0])
        self.o_value.append(scope + o[1] if o[0] == BLANK else o[1])
        self.o_datatype.append(o[2])
        self.o_language.append(o[3])
        self.ts.append(ts)

    def _timestamp(self, g: Term | None) -> int | None:
        if not self.timestamps:
            if g is not None:
                raise LineError(STATIC_QUAD)
            return None
        if g is None:
            if self.default_micros is None:
                raise LineError(NO_TIMESTAMP)
            return self.default_micros
        if g[0] != LITERAL:
            raise LineError(GRAPH_NAME)
        if g[3] is not None and g[3] != "bare":
            raise LineError(f"the timestamp '{g[1]}'@{g[3]} is a language-tagged string, not an instant")
        bare = g[3] == "bare"
        return bounded_timestamp_micros(g[1], None if bare else g[2], self.future, bare)

    def batch(self, arrival_base: int = 0) -> pa.RecordBatch:
        """The parsed rows as a record batch (``PARSED_STREAM`` or ``PARSED_STATIC``), then starts a new one
        (``rejects`` keeps growing). A row's arrival is ``arrival_base + its line number``."""
        n = len(self.lines)
        s = pa.StructArray.from_arrays(
            [pa.array(self.s_kind, pa.int8()), pa.array(self.s_value, pa.string()),
             pa.nulls(n, pa.string()), pa.nulls(n, pa.string())],
            fields=list(TERM_TYPE),
        )
        p = pa.StructArray.from_arrays(
            [pa.repeat(pa.scalar(IRI, pa.int8()), n), pa.array(self.p_value, pa.string()),
             pa.nulls(n, pa.string()), pa.nulls(n, pa.string())],
            fields=list(TERM_TYPE),
        )
        o = pa.StructArray.from_arrays(
            [pa.array(self.o_kind, pa.int8()), pa.array(self.o_value, pa.string()),
             pa.array(self.o_datatype, pa.string()), pa.array(self.o_language, pa.string())],
            fields=list(TERM_TYPE),
        )
        if self.timestamps:
            ts = pa.array(self.ts, pa.int64())
            arrival = pc.add(pa.array(self.lines, pa.int64()), pa.scalar(arrival_base, pa.int64()))
            bucket = hour_buckets(ts)
            batch = pa.RecordBatch.from_arrays([s, p, o, ts, arrival, bucket], schema=PARSED_STREAM)
        else:
            batch = pa.RecordBatch.from_arrays([s, p, o], schema=PARSED_STATIC)
        self._reset()
        return batch
