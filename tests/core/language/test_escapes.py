"""Escapes in strings and IRIs: one unescaper (``csparql.core.language.escapes.unescape``) for every reader — queries,
ingested N-Triples/N-Quads lines, result tables' N-Triples terms, plans read back from S-expressions — so that
each decodes the same escapes to the same characters and refuses the same bad ones, saying where.

The cases are those of the W3C grammars and test suites (N-Triples/N-Quads ``ECHAR``, ``UCHAR``; Turtle's
``turtle-syntax-string-*``, ``*-bad-esc-*``, ``*-bad-string-*``, ``*-bad-uri-*``; SPARQL 1.1 §19.2)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from rdflib import Literal, URIRef

from csparql.core.algebra.sexpr_reader import SexprError, read_expression
from csparql.storage.result_rows import TermColumn
from csparql.storage.terms import parse_ntriples_term
from csparql.ingest.parsers.lines import LineParser
from csparql.core.language.errors import QueryError
from csparql.core.language.escapes import EscapeError, unescape
from csparql.core.language.parser import parse
from csparql.storage.terms import IRI, LITERAL, TERM_TYPE

ECHARS = {r"\t": "\t", r"\b": "\b", r"\n": "\n", r"\r": "\r", r"\f": "\f", r"\"": '"', r"\'": "'", "\\\\": "\\"}
UCHARS = {
    r"\u0041": "A", r"\u00e9": "é", r"\u00E9": "é", r"\u0000": "\x00", r"\uFFFD": "\ufffd",
    r"\U0001F600": "😀", r"\U00000041": "A", r"\U0010FFFF": "\U0010ffff",
}
STRING_ESCAPES = r"""(a string may use \t \b \n \r \f \" \' \\, \uXXXX and \UXXXXXXXX)"""
# Escapes that are none: (text, what the message says, the offset of the backslash).
BAD_STRING_ESCAPES = [
    (r"a\qb", rf"invalid escape '\q' in a string {STRING_ESCAPES}", 1),
    ("ab\\", "a backslash ends the string without an escape", 2),
    (r"\x41", rf"invalid escape '\x' in a string {STRING_ESCAPES}", 0),
    (r"x\u12", r"the escape '\u12' needs 4 hexadecimal digits", 1),
    (r"\u00ZZ", r"the escape '\u00ZZ' needs 4 hexadecimal digits", 0),
    (r"\U0001F60", r"the escape '\U0001F60' needs 8 hexadecimal digits", 0),
    (r"ok \uD800", r"the escape '\uD800' is not a Unicode character (a surrogate code point)", 3),
    (r"\uDFFF", r"the escape '\uDFFF' is not a Unicode character (a surrogate code point)", 0),
    (r"\U0000DC00", r"the escape '\U0000DC00' is not a Unicode character (a surrogate code point)", 0),
    (r"\U00110000", r"the escape '\U00110000' is not a Unicode character (beyond U+10FFFF)", 0),
    (r"\UFFFFFFFF", r"the escape '\UFFFFFFFF' is not a Unicode character (beyond U+10FFFF)", 0),
]


@pytest.mark.parametrize("escape", list(ECHARS))
def test_each_echar_in_a_string_is_its_character(escape):
    assert unescape(f"a{escape}b") == f"a{ECHARS[escape]}b"


@pytest.mark.parametrize("escape", list(UCHARS))
def test_each_uchar_is_its_code_point_in_strings_and_iris(escape):
    assert unescape(f"x{escape}y") == f"x{UCHARS[escape]}y"
    assert unescape(f"http://e/{escape}", iri=True) == f"http://e/{UCHARS[escape]}"


def test_escapes_are_decoded_once_and_text_without_them_is_returned_as_is():
    assert unescape(r"\\u0041") == r"\u0041"  # an escaped backslash, then 'u0041'
    assert unescape(r"\u005Cn") == r"\n"  # a backslash written as \u005C starts no escape of its own
    text = "no escapes here"
    assert unescape(text) is text


@pytest.mark.parametrize("text, reason, offset", BAD_STRING_ESCAPES)
def test_a_bad_escape_in_a_string_is_refused_saying_what_and_where(text, reason, offset):
    with pytest.raises(EscapeError) as caught:
        unescape(text)
    assert caught.value.reason == reason and caught.value.offset == offset
    assert str(caught.value) == f"{reason}, at character {offset + 1} of the string"


@pytest.mark.parametrize("escape", list(ECHARS))
def test_an_iri_allows_only_uchar(escape):
    with pytest.raises(EscapeError) as caught:
        unescape(f"http://e/{escape}", iri=True)
    assert caught.value.reason == (
        f"invalid escape '{escape}' in an IRI (an IRI may only use \\uXXXX and \\UXXXXXXXX)")
    assert str(caught.value).endswith("at character 10 of the IRI")


# --- every reader decodes with it ------------------------------------------------------------------------


def _query_string(body: str):
    return str(parse(f'SELECT * WHERE {{ ?s ?p "{body}" }}').where.elements[0].triples[0].properties[0][1][0])


def _line_string(body: str):
    parser = LineParser("x_", timestamps=False)
    parser.add_lines(1, [f'<http://e/s> <http://e/p> "{body}" .'])
    if parser.rejects:
        raise ValueError(parser.rejects[0][1])
    return parser.o_value[0]


def _result_string(body: str):
    return str(parse_ntriples_term(f'"{body}"'))


def _plan_string(body: str):
    return str(read_expression(f'"{body}"'))


READERS = {"query": _query_string, "ingest": _line_string, "results": _result_string, "plans": _plan_string}


@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_decodes_the_same_escapes_to_the_same_characters(reader):
    body = "".join(e for e in ECHARS if e != r"\'") + "".join(UCHARS)
    assert READERS[reader](body) == unescape(body)


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("escape", [r"\uD800", r"\uDBFF", r"\U0000DFFF", r"\U00110000"])
def test_every_reader_refuses_a_code_point_that_is_no_character_with_a_clear_error(reader, escape):
    """On main the query parser and the plan reader took surrogates into strings (and stopped with Python's
    'chr() arg not in range' beyond U+10FFFF), and the results reader took them too."""
    with pytest.raises((QueryError, ValueError)) as caught:
        READERS[reader](f"ab{escape}")
    assert "is not a Unicode character" in str(caught.value)


def test_a_query_with_a_bad_escape_is_refused_at_the_escape():
    text = 'SELECT * WHERE {\n  ?s ?p """two\nlines \\uD800""" .\n  ?s ?q <http://e/\\U00110000> }'
    with pytest.raises(QueryError) as caught:
        parse(text, "q.rq")
    assert caught.value.render().split("\n")[0] == (
        "q.rq:3:7: error: the escape '\\uD800' is not a Unicode character (a surrogate code point)")
    with pytest.raises(QueryError) as caught:
        parse(text.replace("\\uD800", ""), "q.rq")
    assert caught.value.render().split("\n")[0] == (
        "q.rq:4:19: error: the escape '\\U00110000' is not a Unicode character (beyond U+10FFFF)")


def test_an_ingested_line_with_a_bad_escape_is_rejected_with_the_column_of_the_escape():
    parser = LineParser("x_", timestamps=False)
    parser.add_lines(1, ['<http://e/s> <http://e/p> "a\\qb" .', '<http://e/s> <http://e/\\u0020\\n> "x" .'])
    assert [reason for _, reason, _ in parser.rejects] == [
        "invalid escape '\\q' in a string (a string may use \\t \\b \\n \\r \\f \\\" \\' \\\\, \\uXXXX and "
        "\\UXXXXXXXX), at column 29",
        "invalid escape '\\n' in an IRI (an IRI may only use \\uXXXX and \\UXXXXXXXX), at column 30",
    ]


def test_the_results_reader_refuses_what_n_triples_does_not_allow():
    """On main an unknown escape stopped it with a KeyError, and an IRI's \\n was read as a line feed."""
    with pytest.raises(EscapeError, match=r"invalid escape '\\q' in a string"):
        parse_ntriples_term('"a\\qb"')
    with pytest.raises(EscapeError, match=r"invalid escape '\\n' in an IRI"):
        parse_ntriples_term("<http://e/a\\nb>")


def test_a_result_term_read_back_is_the_term_written_datatype_iri_included():
    """The writer escapes a datatype IRI as it does any IRI; on main the reader left the datatype's escapes
    as they were written."""
    terms = [(IRI, "http://e/a b<c>", None, None), (LITERAL, 'x "y"\n\\', "http://e/my type", None),
             (LITERAL, "z", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString", "en")]
    column = TermColumn(pa.array([dict(zip(("kind", "value", "datatype", "language"), t)) for t in terms],
                                 TERM_TYPE))
    assert [parse_ntriples_term(text) for text in column.ntriples().to_pylist()] == [
        URIRef("http://e/a b<c>"), Literal('x "y"\n\\', datatype=URIRef("http://e/my type")),
        Literal("z", lang="en")]


def test_the_plan_reader_refuses_a_bad_escape_in_an_iri_where_it_is():
    """On main ``\\U00110000`` in an IRI stopped it with Python's ValueError from chr()."""
    with pytest.raises(SexprError) as caught:
        read_expression("<http://e/\\U00110000>")
    assert str(caught.value) == (
        "line 1, column 1: the escape '\\U00110000' is not a Unicode character (beyond U+10FFFF), at character 10 "
        "of the IRI")
