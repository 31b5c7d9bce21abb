"""The RDF, RDFS, OWL and XSD namespaces and the datatypes csparql stores and reads, as plain strings.

The one place these IRIs are spelled (standard library only, so that the executors' line parser can use them
without rdflib). rdflib users wrap them (``URIRef(RDF_TYPE)``, ``Namespace(XSD)``).
"""

from __future__ import annotations

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"

XSD_STRING = XSD + "string"
XSD_BOOLEAN = XSD + "boolean"
XSD_INTEGER = XSD + "integer"
XSD_DECIMAL = XSD + "decimal"
XSD_FLOAT = XSD + "float"
XSD_DOUBLE = XSD + "double"
XSD_DATETIME = XSD + "dateTime"
XSD_DATETIMESTAMP = XSD + "dateTimeStamp"
RDF_TYPE = RDF + "type"
RDF_LANGSTRING = RDF + "langString"
RDFS_SUBCLASSOF = RDFS + "subClassOf"
RDFS_SUBPROPERTYOF = RDFS + "subPropertyOf"
OWL_SAMEAS = OWL + "sameAs"

INTEGER_TYPES = frozenset(
    XSD + name
    for name in (
        "integer nonPositiveInteger negativeInteger long int short byte nonNegativeInteger unsignedLong "
        "unsignedInt unsignedShort unsignedByte positiveInteger"
    ).split()
)
"""``xsd:integer`` and every datatype derived from it."""

NUMERIC_TYPES = INTEGER_TYPES | {XSD_DECIMAL, XSD_FLOAT, XSD_DOUBLE}
"""The numeric datatypes of SPARQL's operators."""

DATETIME_TYPES = frozenset({XSD_DATETIME, XSD_DATETIMESTAMP})
"""The datatypes of a timestamp given as an instant."""

EPOCH_MILLIS_TYPES = frozenset(
    XSD + name
    for name in ("integer", "long", "int", "nonNegativeInteger", "positiveInteger", "unsignedLong", "unsignedInt")
)
"""The datatypes of a timestamp given as milliseconds since the epoch (those that can hold one)."""

PROV_GENERATED_AT_TIME = "http://www.w3.org/ns/prov#generatedAtTime"
DEFAULT_TIMESTAMP_PREDICATES = (PROV_GENERATED_AT_TIME,)
"""The predicate a timestamped named graph's instant is given with (RSP-QL's data model), unless the ingest
names others (``--timestamp-predicate``)."""
