"""The golden case of the specification (the C-SPARQL article, §5.5): ingest the stream, load the static graph,
run the worked example at 2010-03-22T10:10:00Z through the command line, and get exactly the expected
bindings."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from rdflib import Literal, URIRef

from csparql.cli import main
from csparql.storage.terms import parse_ntriples_term
from support import SPEC_QUERIES

GOLDEN = SPEC_QUERIES / "golden"
QUERY = SPEC_QUERIES / "05-cars-per-street-worked-example.rq"


XSD = "http://www.w3.org/2001/XMLSchema#"


def tsv_cell(cell: str):
    """A SPARQL TSV cell: an N-Triples term, or an abbreviated integer, decimal, double or boolean."""
    for datatype, pattern in (("integer", r"[+-]?\d+"), ("decimal", r"[+-]?\d*\.\d+"), ("double", r"[+-]?[\d.]+[eE][+-]?\d+"), ("boolean", r"true|false")):
        if re.fullmatch(pattern, cell):
            return Literal(cell, datatype=URIRef(XSD + datatype), normalize=False)
    return parse_ntriples_term(cell)


def read_tsv(text: str) -> tuple[list[str], Counter]:
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0].split("\t")
    rows = Counter(tuple(tsv_cell(cell) for cell in line.split("\t")) for line in lines[1:])
    return header, rows


def test_the_worked_example_gives_exactly_the_expected_bindings(spark, tmp_path, capsys):
    warehouse = str(tmp_path / "warehouse")
    assert main(["ingest", "--warehouse", warehouse, "--stream", "http://streams.org/milantollgates.trdf", str(GOLDEN / "05-stream.tnq")]) == 0
    assert main(["load-static", "--warehouse", warehouse, str(GOLDEN / "05-static.ttl")]) == 0
    capsys.readouterr()
    assert main(["run", str(QUERY), "--at", "2010-03-22T10:10:00Z", "--format", "tsv", "--warehouse", warehouse]) == 0
    out = capsys.readouterr().out
    expected_header, expected = read_tsv((GOLDEN / "05-expected-2010-03-22T10-10-00Z.tsv").read_text(encoding="utf-8"))
    header, rows = read_tsv(out)
    assert header == expected_header
    assert rows == expected
    # and the stored results read back the same
    assert main(["results", "CarsPerStreet", "--warehouse", warehouse, "--format", "tsv"]) == 0
    stored = capsys.readouterr().out.splitlines()  # one table: the window's bounds, then the variables
    assert stored[0].split("\t") == ["window_start", "window_end", *(name[1:] for name in expected_header)]
    assert {line.split("\t")[1] for line in stored[1:]} == {"2010-03-22T10:10:00Z"}
    assert Counter(tuple(tsv_cell(cell) for cell in line.split("\t")[2:]) for line in stored[1:]) == expected


def test_the_worked_example_through_the_front_door_gives_the_expected_bindings_and_writes_only_when_asked(
        spark, tmp_path, capsys):
    """A notebook's way: ``csparql.compile_query`` and ``csparql.evaluate`` over the same warehouse, then
    ``csparql.StoredResults`` once the window was written."""
    import csparql
    from csparql.storage.formats import render

    warehouse = csparql.Warehouse(tmp_path / "warehouse")
    assert main(["ingest", "--warehouse", str(warehouse.root), "--stream", "http://streams.org/milantollgates.trdf",
                 str(GOLDEN / "05-stream.tnq")]) == 0
    assert main(["load-static", "--warehouse", str(warehouse.root), str(GOLDEN / "05-static.ttl")]) == 0
    expected_header, expected = read_tsv((GOLDEN / "05-expected-2010-03-22T10-10-00Z.tsv").read_text(encoding="utf-8"))

    plan = csparql.compile_query(QUERY.read_text(encoding="utf-8"))
    evaluation = csparql.evaluate(plan, "2010-03-22T10:10:00Z", warehouse, spark=spark)
    assert read_tsv(render(evaluation.result, "tsv")) == (expected_header, expected)
    with pytest.raises(LookupError):
        csparql.StoredResults(warehouse, "CarsPerStreet")  # nothing written

    written = csparql.evaluate(QUERY.read_text(encoding="utf-8"), csparql.parse_instant("2010-03-22T10:10:00Z"),
                               warehouse, write=True, spark=spark)
    assert written.rows_written == sum(expected.values())
    stored = csparql.StoredResults(warehouse, "CarsPerStreet")
    (_, window_end, result), = stored.windows()
    assert window_end == csparql.parse_instant("2010-03-22T10:10:00Z")
    assert read_tsv(render(result, "tsv")) == (expected_header, expected)
