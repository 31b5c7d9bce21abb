"""RDF terms as the language sees them, and their text forms.

Terms are rdflib's: ``URIRef``, ``Literal``, ``BNode`` and ``Variable``. Literals are built without rdflib's
lexical normalisation, so that ``"01"^^xsd:integer`` stays the term it was written as (SPARQL matches
terms, and compares values only in expressions).
"""

from __future__ import annotations

import re

from rdflib import BNode, Literal, URIRef, Variable
from rdflib.namespace import RDF, XSD

Term = URIRef | Literal | BNode | Variable
GroundTerm = URIRef | Literal | BNode

XSD_STRING = XSD.string
XSD_INTEGER = XSD.integer
XSD_DECIMAL = XSD.decimal
XSD_DOUBLE = XSD.double
XSD_BOOLEAN = XSD.boolean
XSD_DATETIME = XSD.dateTime
RDF_TYPE = RDF.type
RDF_FIRST = RDF.first
RDF_REST = RDF.rest
RDF_NIL = RDF.nil
RDF_LANGSTRING = RDF.langString

# The reference engine's timestamp function, accepted as f:timestamp(?s, ?p, ?o) (docs/semantics.md,
# *The timestamp function*).
CSPARQL_EXT = "http://larkc.eu/csparql/sparql/jena/ext#"
CSPARQL_TIMESTAMP_FUNCTION = URIRef(CSPARQL_EXT + "timestamp")

_PN_LOCAL_SAFE = re.compile(r"^[A-Za-z0-9_\u00C0-\uFFFD]([A-Za-z0-9_\-\u00B7\u00C0-\uFFFD.]*[A-Za-z0-9_\-\u00B7\u00C0-\uFFFD])?$")
_STRING_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def literal(lexical: str, datatype: str | None = None, language: str | None = None) -> Literal:
    """The literal term with exactly this lexical form, datatype and language tag (no normalisation)."""
    if language:
        return Literal(lexical, lang=language, normalize=False)
    if datatype is None or URIRef(datatype) == XSD_STRING:
        return Literal(lexical, datatype=XSD_STRING if datatype else None, normalize=False)
    return Literal(lexical, datatype=URIRef(datatype), normalize=False)


def quote_string(text: str) -> str:
    """A SPARQL/N-Triples string literal body in double quotes, with the needed escapes."""
    return '"' + "".join(_STRING_ESCAPES.get(ch, ch) for ch in text) + '"'


def format_iri(iri: str, prefixes: dict[str, str] | None = None) -> str:
    """The IRI as a prefixed name when a prefix fits it and the rest is a plain local name, else in <>."""
    if prefixes:
        best = None
        for prefix, namespace in prefixes.items():
            if namespace and iri.startswith(namespace) and (best is None or len(namespace) > len(best[1])):
                local = iri[len(namespace):]
                if local == "" or _PN_LOCAL_SAFE.match(local):
                    best = (prefix, namespace)
        if best is not None:
            return f"{best[0]}:{iri[len(best[1]):]}"
    escaped = "".join(ch if ch not in '<>"{}|^`\\' and ord(ch) > 0x20 else f"\\u{ord(ch):04X}" for ch in iri)
    return f"<{escaped}>"


def format_term(term: Term, prefixes: dict[str, str] | None = None) -> str:
    """The term in SPARQL syntax (variables as ?name, blank nodes as _:label)."""
    if isinstance(term, Variable):
        return f"?{term}"
    if isinstance(term, URIRef):
        return format_iri(str(term), prefixes)
    if isinstance(term, BNode):
        return f"_:{term}"
    if isinstance(term, Literal):
        body = quote_string(str(term))
        if term.language:
            return f"{body}@{term.language}"
        if term.datatype is not None and term.datatype != XSD_STRING:
            return f"{body}^^{format_iri(str(term.datatype), prefixes)}"
        if term.datatype == XSD_STRING:
            return f"{body}^^{format_iri(str(XSD_STRING), prefixes)}"
        return body
    raise TypeError(f"not an RDF term: {term!r}")


def format_ntriples_term(term: GroundTerm) -> str:
    """The term in N-Triples syntax: IRIs always in <>, plain strings without a datatype."""
    if isinstance(term, Literal) and term.datatype == XSD_STRING and not term.language:
        return quote_string(str(term))
    return format_term(term)
