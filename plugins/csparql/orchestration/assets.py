"""The Airflow Assets of csparql's tables: every stream table and every query's result table.

An evaluation task has the tables it writes as outlets (its result table, or the stream a ``REGISTER STREAM``
query produces) and the streams it reads as inlets; an ingest task has the stream it lands as outlet. Airflow's
asset graph therefore shows ingest → stream → query → result table, and a ``REGISTER STREAM`` query linked to
its consumers through its output stream. An Asset names a table, not a warehouse folder: the same query or
stream has the same Asset in every deployment.
"""

from __future__ import annotations

from airflow.sdk import Asset

from csparql.storage.warehouse import OUTPUT_STREAM_PREFIX, slug


def stream_key(iri: str) -> str:
    """What names a stream in its Asset: the query name of an output stream (``urn:csparql:stream:<name>``),
    else the stream's table folder name (readable, with a short hash of the IRI)."""
    iri = str(iri)
    return iri.removeprefix(OUTPUT_STREAM_PREFIX) if iri.startswith(OUTPUT_STREAM_PREFIX) else slug(iri)


def stream_asset(iri: str) -> Asset:
    """The Asset of the stream table of ``iri`` (an ingested stream or a ``REGISTER STREAM`` query's output)."""
    key = stream_key(iri)
    return Asset(name=f"csparql_stream_{key}", uri=f"csparql://streams/{key}")


def result_asset(query: str) -> Asset:
    """The Asset of the result table of the query (or result name) ``query``."""
    return Asset(name=f"csparql_results_{query}", uri=f"csparql://results/{query}")
