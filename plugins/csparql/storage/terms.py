"""RDF terms as stored: a struct of four fields, lossless, one per position of a triple.

``kind`` is 1 for an IRI, 2 for a blank node, 3 for a literal (``IRI``, ``BLANK``, ``LITERAL`` of
``csparql.storage.schema``, where ``TERM_TYPE`` is); ``value`` is the IRI, the blank node label or
the literal's lexical form; ``datatype`` is the literal's datatype IRI (``xsd:string`` for a plain literal,
``rdf:langString`` for a language-tagged one) and ``language`` its tag in lower case. Two terms are the same
RDF term exactly when their structs are equal, so joins compare structs.

Result tables show terms to analysts in N-Triples syntax (``ntriples``).
"""

from __future__ import annotations

import re

import pyarrow as pa
from rdflib import BNode, Literal, URIRef
from rdflib.term import Identifier

from csparql.core.language.escapes import unescape
from csparql.storage.schema import BLANK, IRI, LITERAL, TERM_TYPE
from csparql.core.terms import RDF_LANGSTRING, XSD_STRING, format_ntriples_term

TermRow = tuple[int, str, str | None, str | None]


def term_row(term: Identifier) -> TermRow:
    """The stored form of an rdflib term: (kind, value, datatype, language)."""
    if isinstance(term, URIRef):
        return (IRI, str(term), None, None)
    if isinstance(term, BNode):
        return (BLANK, str(term), None, None)
    if isinstance(term, Literal):
        if term.language:
            return (LITERAL, str(term), str(RDF_LANGSTRING), term.language.lower())
        return (LITERAL, str(term), str(term.datatype or XSD_STRING), None)
    raise TypeError(f"not a ground RDF term: {term!r}")


def term_dict(term: Identifier) -> dict:
    """The stored form of a term as a dict (the shape pyarrow builds structs from)."""
    kind, value, datatype, language = term_row(term)
    return {"kind": kind, "value": value, "datatype": datatype, "language": language}


def from_row(kind: int, value: str, datatype: str | None = None, language: str | None = None) -> Identifier:
    """The rdflib term of a stored struct."""
    if kind == IRI:
        return URIRef(value)
    if kind == BLANK:
        return BNode(value)
    if kind == LITERAL:
        if language:
            return Literal(value, lang=language, normalize=False)
        if datatype is None or datatype == str(XSD_STRING):
            return Literal(value, normalize=False)
        return Literal(value, datatype=URIRef(datatype), normalize=False)
    raise ValueError(f"unknown term kind {kind}")


def from_dict(struct: dict | None) -> Identifier | None:
    """The rdflib term of a stored struct given as a dict (None stays None: unbound)."""
    if struct is None:
        return None
    return from_row(struct["kind"], struct["value"], struct.get("datatype"), struct.get("language"))


def ntriples(term: Identifier | None) -> str | None:
    """A term in N-Triples syntax, as result tables show it (None for unbound)."""
    if term is None:
        return None
    return format_ntriples_term(term)


def term_array(terms: list[Identifier | None]) -> pa.Array:
    """An Arrow array of stored terms (None entries are null)."""
    return pa.array([None if t is None else term_dict(t) for t in terms], type=TERM_TYPE)


_NT_TERM = re.compile(r'^(?:<([^>]*)>|_:(\S+)|"((?:[^"\\]|\\.)*)"(?:@([A-Za-z0-9-]+)|\^\^<([^>]*)>)?)$', re.S)


def parse_ntriples_term(text: str | None) -> Identifier | None:
    """The term an N-Triples string (as result tables hold them) stands for; ``ValueError`` (an ``EscapeError``
    for a bad escape) when it is none."""
    if text is None:
        return None
    match = _NT_TERM.match(text)
    if match is None:
        raise ValueError(f"not an N-Triples term: {text!r}")
    iri, label, lexical, language, datatype = match.groups()
    if iri is not None:
        return URIRef(unescape(iri, iri=True))
    if label is not None:
        return BNode(label)
    value = unescape(lexical)
    if language:
        return Literal(value, lang=language, normalize=False)
    if datatype:
        return Literal(value, datatype=URIRef(unescape(datatype, iri=True)), normalize=False)
    return Literal(value, normalize=False)

