"""The optimizer's statistics of a source are given only while they account for every row of its tables: a
table another writer appended to, whose counts do not know its triples, is an unknown source, for which no
pattern is pruned (pure: in-process ingests, no Spark)."""

from __future__ import annotations

import pyarrow as pa
from deltalake import write_deltalake
from rdflib import URIRef

from csparql.core.frontend import compile_query
from csparql.core.algebra.walk import walk
from csparql.ingest.ingest import ingest_stream
from csparql.core.optimizer import optimize
from csparql.storage import schema
from csparql.storage.instants import bucket_of
from csparql.storage.statistics import read_statistics
from csparql.storage.terms import term_dict
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import format_instant, parse_instant

EX = "http://example.org/"
STREAM = EX + "gates"
OTHER = EX + "other-gates"
AT = parse_instant("2026-01-05T10:00:00Z")
QUERY = f"""REGISTER QUERY Colours AS
SELECT ?gate ?colour FROM STREAM <{STREAM}> [RANGE 10m STEP 5m]
WHERE {{ ?gate <{EX}registers> ?car . ?car <{EX}colour> ?colour }}
"""


def _land(warehouse: Warehouse, tmp_path) -> None:
    events = tmp_path / "events.nq"
    events.write_text(f'<{EX}g1> <{EX}registers> <{EX}c1> "{format_instant(AT)}"^^'
                      "<http://www.w3.org/2001/XMLSchema#dateTime> .\n", encoding="utf-8")
    ingest_stream(None, warehouse, STREAM, [events], in_process=True)
    ingest_stream(None, warehouse, OTHER, [events], in_process=True)


def _sources(plan, pattern_predicate: str) -> set:
    """The sources the optimized plan reads for the triple pattern with ``pattern_predicate``."""
    return {str(source.iri) for op in walk(plan.pattern) for triple in getattr(op, "triples", ())
            if str(triple.predicate) == EX + pattern_predicate for source in op.sources}


def test_counts_of_csparql_ingests_are_given_and_a_table_another_writer_appended_to_is_unknown(tmp_path):
    warehouse = Warehouse(tmp_path / "warehouse")
    _land(warehouse, tmp_path)
    plan = compile_query(QUERY)
    counts = read_statistics(warehouse).predicate_counts
    assert counts[URIRef(STREAM)] == {URIRef(EX + "registers"): 1}
    assert counts[URIRef(OTHER)] == {URIRef(EX + "registers"): 1}
    # what the counts say: the stream holds no colour, so the pattern does not read it
    assert STREAM not in _sources(optimize(plan, read_statistics(warehouse)), "colour")

    # another writer appends colours to the stream table, recording no counts
    colour = {"s": term_dict(URIRef(EX + "c1")), "p": term_dict(URIRef(EX + "colour")),
              "o": term_dict(URIRef(EX + "red")), "ts": AT, "arrival": 1, "bucket": bucket_of(AT)}
    write_deltalake(str(warehouse.stream(STREAM)), pa.Table.from_pylist([colour], schema=schema.STREAM),
                    mode="append", partition_by=schema.STREAM_PARTITIONS)

    statistics = read_statistics(warehouse)
    assert URIRef(STREAM) not in statistics.predicate_counts  # unknown: it may hold any predicate
    assert statistics.predicate_counts[URIRef(OTHER)] == {URIRef(EX + "registers"): 1}
    assert STREAM in _sources(optimize(plan, statistics), "colour")
    # a plan's statistics name only its own sources
    assert set(read_statistics(warehouse, {URIRef(OTHER)}).predicate_counts) == {URIRef(OTHER)}
