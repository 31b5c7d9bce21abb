"""The escapes of strings and IRIs in RDF's and SPARQL's text forms, decoded in one place: ``unescape``.

Every reader of csparql decodes with it: the query parser (``csparql.core.language.builder``), the N-Triples and
timestamped N-Quads lines of an ingest (``csparql.ingest.parsers.lines``), the N-Triples terms of result tables
(``csparql.storage.result_rows``) and plans read back from S-expressions (``csparql.core.algebra.sexpr_reader``). The
escapes are those of the W3C grammars (N-Triples [9]-[10], N-Quads [12]-[13], Turtle [26] and [159], SPARQL
1.1 [160] and §19.2):

- ``ECHAR ::= '\\' [tbnrf"'\\]`` — tab, backspace, line feed, carriage return, form feed, quotes, backslash —
  in strings only;
- ``UCHAR ::= '\\u' HEX HEX HEX HEX | '\\U' HEX HEX HEX HEX HEX HEX HEX HEX`` in strings and IRIs (the only
  escape an ``IRIREF`` may hold).

A ``UCHAR`` must name a Unicode scalar value: a surrogate code point (U+D800 to U+DFFF) or a number beyond
U+10FFFF is no character, and RDF literals and IRIs are Unicode strings (RDF 1.1 Concepts §3.3; SPARQL 1.2
§19.2 refuses surrogates outright). Anything else after a backslash is refused too. This module imports only
the standard library: Spark's executors run it during an ingest.
"""

from __future__ import annotations

import re

ECHAR = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
"""What each ``ECHAR`` (the character after the backslash) stands for."""

_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.)|$)", re.S)


class EscapeError(ValueError):
    """An escape that is not one: ``reason`` says what is wrong, ``offset`` is where its backslash is in the
    text given to ``unescape`` (0 for the first character); the message says both."""

    def __init__(self, reason: str, offset: int, kind: str):
        super().__init__(f"{reason}, at character {offset + 1} of the {kind}")
        self.reason = reason
        self.offset = offset


def unescape(text: str, iri: bool = False) -> str:
    """``text`` (a string's body between its quotes, or an IRI's between ``<`` and ``>``) with its escapes
    decoded: ``UCHAR`` always, ``ECHAR`` unless ``iri``. Raises ``EscapeError`` at the first escape that is
    not one: an ``ECHAR`` in an IRI, an unknown escape, ``\\u``/``\\U`` without their 4/8 hexadecimal digits,
    a code point that is no Unicode character, a backslash that ends the text."""
    if "\\" not in text:
        return text
    kind = "IRI" if iri else "string"

    def replace(match: re.Match) -> str:
        short, long_, char = match.groups()
        hexadecimal = short or long_
        if hexadecimal is not None:
            code = int(hexadecimal, 16)
            if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                why = "a surrogate code point" if code <= 0xDFFF else "beyond U+10FFFF"
                raise EscapeError(f"the escape '{match.group(0)}' is not a Unicode character ({why})",
                                  match.start(), kind)
            return chr(code)
        if char is None:
            raise EscapeError(f"a backslash ends the {kind} without an escape", match.start(), kind)
        if not iri and char in ECHAR:
            return ECHAR[char]
        if char in "uU":
            digits = 4 if char == "u" else 8
            shown = text[match.start():match.start() + 2 + digits]
            raise EscapeError(f"the escape '{shown}' needs {digits} hexadecimal digits",
                              match.start(), kind)
        if iri:
            raise EscapeError(f"invalid escape '\\{char}' in an IRI (an IRI may only use \\uXXXX and \\UXXXXXXXX)",
                              match.start(), kind)
        raise EscapeError(f"invalid escape '\\{char}' in a string (a string may use \\t \\b \\n \\r \\f \\\" \\' "
                          "\\\\, \\uXXXX and \\UXXXXXXXX)", match.start(), kind)

    return _ESCAPE.sub(replace, text)
