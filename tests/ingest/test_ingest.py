"""Ingest of RDF streams and static graphs: parallel parsing with exact line numbers, rejects, one atomic
commit, set semantics for static graphs, and the command line."""

from __future__ import annotations

import random
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import rdflib
from rdflib import URIRef

from csparql.cli import main
from csparql.engine.catalog import Catalog
from csparql.ingest import ingest as ingest_module
from csparql.ingest import spark_job
from csparql.ingest.inputs import BATCH_SHIFT
from csparql.ingest.parsers import lines as nt
from csparql.ingest.ingest import InputError, ingest_stream, load_static
from csparql.runtime.session import spark_session
from csparql.storage import delta, schema
from csparql.storage.instants import bucket_of
from csparql.storage.terms import term_dict
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import parse_instant, to_micros

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "examples" / "queries" / "golden"
STREAM = "http://streams.org/milantollgates.trdf"
XSD = "http://www.w3.org/2001/XMLSchema#"
DT = f"^^<{XSD}dateTime>"
LOW_BITS = (1 << BATCH_SHIFT) - 1


@pytest.fixture(scope="session")
def spark():
    return spark_session("local[2]")


@pytest.fixture
def warehouse(tmp_path) -> Warehouse:
    return Warehouse(tmp_path / "warehouse")


def rows_of(path) -> list[dict]:
    """Every row of a table's current version, with the partition value, ts in microseconds."""
    rows = []
    for file in delta.live_files(delta.open_table(path), path):
        for row in pq.read_table(file.uri).to_pylist():
            if "ts" in row:
                row["ts"] = to_micros(row["ts"])
            row.update(file.partition)
            rows.append(row)
    return rows


def triples_of(path) -> list[tuple]:
    return sorted((tuple(r["s"].values()), tuple(r["p"].values()), tuple(r["o"].values())) for r in rows_of(path))


def folders(path) -> set[str]:
    return {p.name for p in Path(path).iterdir()}


# ---------------------------------------------------------------------------------------------------------
# The line parser (no Spark)
# ---------------------------------------------------------------------------------------------------------

BAD_LINES = {
    '<http://a/s> <http://a/p> "x" "2010-03-22T10:00:00Z"' + DT: "expected '.' at the end of the statement",
    '<http://a/s> <http://a/p> "x" "yesterday" .': "the timestamp 'yesterday' is neither an xsd:dateTime nor epoch milliseconds",
    '<http://a/s> <http://a/p> "x" <http://a/graph> .': "the fourth term must be the triple's timestamp",
    '<http://a/s> <http://a/p> "x" _:g .': "the fourth term must be the triple's timestamp",
    '<http://a/s> <http://a/p> "x" .': "the triple has no timestamp",
    '<http://a/s <http://a/p> "x" 1 .': "contains the character ' '",
    '"x" <http://a/p> "x" 1 .': "a literal cannot be the subject",
    '<http://a/s> "p" "x" 1 .': "the predicate must be an IRI",
    '<http://a/s> <http://a/p> "a\\qb" 1 .': "invalid escape '\\q' in a string",
    '<http://a/s> <http://a/p> "unterminated 1 .': "a string literal is not closed",
    '<s> <http://a/p> "x" 1 .': "the IRI <s> is relative",
    '<http://a/s> <http://a/p> "x" "2010-02-30T00:00:00Z"' + DT + " .": "is not a valid xsd:dateTime",
    '<http://a/s> <http://a/p> "x" "12"^^<http://www.w3.org/2001/XMLSchema#double> .': "has the datatype",
    '<http://a/s> <http://a/p> "x" 1 . extra': "unexpected text after the final '.'",
    '<http://a/s> <http://a/p> "x"@ 1 .': "invalid language tag",
    '<http://a/s> <http://a/p> "\\uD800" 1 .': "is not a Unicode character",
    '<http://a/s> <http://a/p>': "the statement ends before its object",
}


@pytest.mark.parametrize("line", list(BAD_LINES))
def test_a_malformed_line_is_rejected_with_its_reason(line):
    parser = nt.LineParser("x_")
    parser.add_lines(7, [line])
    assert len(parser) == 0
    [(number, reason, text)] = parser.rejects
    assert number == 7 and text == line
    assert BAD_LINES[line] in reason


def test_terms_need_no_spaces_between_them():
    parser = nt.LineParser("x_")
    parser.add_lines(1, ['<http://a/s><http://a/p>"o"@en"2010-03-22T10:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>.'])
    assert parser.rejects == [] and parser.o_value == ["o"] and parser.o_language == ["en"]


def test_comments_and_blank_lines_are_skipped():
    parser = nt.LineParser("x_")
    parser.add_lines(1, ["# a comment", "", "   ", "\t# indented comment", '<http://a/s> <http://a/p> <http://a/o> 5 . # ok'])
    assert parser.rejects == [] and parser.lines == [5]


@pytest.mark.parametrize(
    "term, micros",
    [
        ('"2010-03-22T10:00:00Z"' + DT, parse_instant("2010-03-22T10:00:00Z")),
        ('"2010-03-22T10:00:00"' + DT, parse_instant("2010-03-22T10:00:00Z")),  # no zone: UTC
        ('"2010-03-22T12:30:00+02:30"' + DT, parse_instant("2010-03-22T10:00:00Z")),
        ('"2010-03-22T05:00:00.25-05:00"' + DT, parse_instant("2010-03-22T10:00:00.25Z")),
        ('"2010-03-22T10:00:00.1234567Z"' + DT, parse_instant("2010-03-22T10:00:00.123456Z")),  # truncated to µs
        ('"2010-03-21T24:00:00Z"' + DT, parse_instant("2010-03-22T00:00:00Z")),
        ('"1269252000000"^^<http://www.w3.org/2001/XMLSchema#integer>', 1269252000000000),
        ('"1269252000000"^^<http://www.w3.org/2001/XMLSchema#long>', 1269252000000000),
        ("1269252000000", 1269252000000000),
        ('"1269252000000"', 1269252000000000),
        ('"2010-03-22T10:00:00Z"', parse_instant("2010-03-22T10:00:00Z")),
        ("-1000", -1_000_000),
    ],
)
def test_timestamps(term, micros):
    for _ in range(2):  # the second time through the cached hour
        parser = nt.LineParser("x_")
        parser.add_lines(1, [f"<http://a/s> <http://a/p> <http://a/o> {term} ."])
        assert parser.rejects == [] and parser.ts == [micros]


def test_the_fast_path_and_the_tokenizer_agree(tmp_path, monkeypatch):
    source = tmp_path / "lines.tnq"
    _generate(source, 3000, seed=5)
    lines = [line.rstrip("\r") for line in source.read_text(encoding="utf-8").split("\n")[:-1]]
    fast = nt.LineParser("x_")
    fast.add_lines(1, lines)
    monkeypatch.setattr(nt, "_FAST", __import__("re").compile(r"(?!)"))  # every line through the tokenizer
    slow = nt.LineParser("x_")
    slow.add_lines(1, lines)
    assert fast.batch(5).equals(slow.batch(5))
    assert fast.rejects == slow.rejects and len(fast.rejects) > 10


def test_hour_buckets_match_the_catalog():
    micros = [0, 1, 3_599_999_999, 3_600_000_000, -1, -3_600_000_001, parse_instant("2010-03-22T10:59:59.999999Z"),
              parse_instant("1000-01-01T00:00:00Z"), nt.MAX_MICROS]
    assert nt.hour_buckets(pa.array(micros, pa.int64())).to_pylist() == [bucket_of(m) for m in micros]
    # years before 1000 keep four digits, so that buckets sort as instants do
    assert nt.hour_buckets(pa.array([nt.MIN_MICROS], pa.int64())).to_pylist() == ["00010101T00"]


FUTURE_LINES = [
    f'<http://a/s> <http://a/p> "1" "2010-03-22T10:00:00Z"{DT} .',
    f'<http://a/s> <http://a/p> "2" "9999-12-31T23:59:59Z"{DT} .',
    '<http://a/s> <http://a/p> "3" 1269255600000 .',  # 11:00:00 exactly: not later than the limit
    '<http://a/s> <http://a/p> "4" 1269255600001 .',
    f'<http://a/s> <http://a/p> "5" "2010-03-22T11:00:00.000001Z"{DT} .',
    '<http://a/s> <http://a/p> "6\\u0041" "2010-03-22T12:00:00+02:00" .',  # an escape: the general path
    '<http://a/s> <http://a/p> "7" "1269259200000"^^<http://www.w3.org/2001/XMLSchema#long> .',
]


def test_a_timestamp_after_the_future_limit_rejects_its_line_on_every_path(monkeypatch):
    limit = nt.FutureLimit(parse_instant("2010-03-22T11:00:00Z"), "2010-03-22T11:00:00Z (the limit)")
    expected = [(n, f"the timestamp '{t}' is too far in the future: later than 2010-03-22T11:00:00Z (the limit)")
                for n, t in ((2, "9999-12-31T23:59:59Z"), (4, "1269255600001"), (5, "2010-03-22T11:00:00.000001Z"),
                             (7, "1269259200000"))]
    for path in ("fast", "tokenizer"):
        if path == "tokenizer":
            monkeypatch.setattr(nt, "_FAST", __import__("re").compile(r"(?!)"))
        for _ in range(2):  # the second time through the cached hours
            parser = nt.LineParser("x_", future=limit)
            parser.add_lines(1, FUTURE_LINES)
            assert parser.lines == [1, 3, 6], path
            assert [(n, reason) for n, reason, _ in parser.rejects] == expected, path
    unlimited = nt.LineParser("x_")
    unlimited.add_lines(1, FUTURE_LINES)
    assert unlimited.rejects == []


# ---------------------------------------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------------------------------------


def test_golden_stream_lands_five_triples(spark, warehouse):
    report = ingest_stream(spark, warehouse, STREAM, [GOLDEN / "05-stream.tnq"])
    assert (report.landed, report.rejected, report.files, report.version) == (5, 0, 1, 1)
    assert report.rejects_paths == () and not (GOLDEN / "05-stream.tnq.rejects.tsv").exists()
    rows = sorted(rows_of(report.table), key=lambda r: r["arrival"])
    city, registers = "http://linkedurbandata.org/city#", URIRef("http://linkedurbandata.org/traffic#registers")
    expected = [("T-130", "ZZ000ZZ"), ("T-130", "AB123CD"), ("T-142", "CD234EF"), ("T-142", "EF567GH"), ("T-142", "YY999YY")]
    assert [(r["s"], r["p"], r["o"]) for r in rows] == [
        (term_dict(URIRef(city + s)), term_dict(registers), term_dict(URIRef(city + o))) for s, o in expected
    ]
    instants = ["10:00:00", "10:01:00", "10:05:00", "10:10:00", "10:10:30"]
    assert [r["ts"] for r in rows] == [parse_instant(f"2010-03-22T{i}Z") for i in instants]
    assert all(r["bucket"] == bucket_of(r["ts"]) == "20100322T10" for r in rows)
    # arrival: batch (version 0 + 1) << 40 | line number (the data starts on line 4)
    assert [r["arrival"] for r in rows] == [(1 << 40) | line for line in range(4, 9)]
    assert (report.min_ts, report.max_ts) == (rows[0]["ts"], rows[-1]["ts"])
    assert report.watermark == parse_instant("2010-03-22T10:10:30Z")
    # the table: its properties, the Parquet files match the Delta schema, nothing left over
    properties = delta.properties(report.table)
    assert properties["csparql.iri"] == STREAM and properties["csparql.kind"] == "stream"
    [file] = delta.live_files(delta.open_table(report.table), report.table)
    written = pq.read_schema(file.uri)
    assert {f.name: f.type for f in written} == {f.name: f.type for f in schema.STREAM if f.name != "bucket"}
    stage = Path(file.uri).parents[1].name
    assert stage.startswith("ingest-") and folders(report.table) == {"_delta_log", stage}
    statistics = Catalog(warehouse).statistics()
    assert statistics.predicate_counts[URIRef(STREAM)] == {URIRef("http://linkedurbandata.org/traffic#registers"): 5}


def test_stream_files_hold_their_triples_in_event_time_order(spark, warehouse, tmp_path):
    """Triples arriving out of order still land sorted by (ts, arrival) inside each file, which is what lets a
    window's time filter skip the Parquet pages it does not overlap."""
    rnd = random.Random(7)
    start = 1269252000000  # 2010-03-22T10:00:00Z, in ms
    stamps = [start + rnd.randrange(3 * 3_600_000) for _ in range(3000)]
    path = tmp_path / "shuffled.nq"
    path.write_text("".join(f'<http://e/s{i}> <http://e/p> "{i}" "{ms}"^^<{XSD}integer> .\n'
                            for i, ms in enumerate(stamps)), encoding="utf-8")
    report = ingest_stream(spark, warehouse, STREAM, [path])
    assert report.landed == 3000
    files = delta.live_files(delta.open_table(report.table), report.table)
    assert {f.partition["bucket"] for f in files} == {"20100322T10", "20100322T11", "20100322T12"}
    for file in files:
        table = pq.read_table(file.uri, columns=["ts", "arrival"]).to_pylist()
        keys = [(row["ts"], row["arrival"]) for row in table]
        assert keys == sorted(keys), f"{file.uri} is not in event-time order"


def _generate(path: Path, lines: int, seed: int) -> tuple[set[int], set[int], dict[int, str]]:
    """A timestamped N-Quads file with ~1% malformed lines, comments and blank lines. Returns the good and
    the bad line numbers, and the reason expected for each bad one."""
    rnd = random.Random(seed)
    bad_lines = list(BAD_LINES.items())
    good, bad, reasons = set(), set(), {}
    out = []
    for number in range(1, lines + 1):
        roll = rnd.random()
        if roll < 0.01:
            text, reason = rnd.choice(bad_lines)
            bad.add(number)
            reasons[number] = reason
        elif roll < 0.02:
            text = rnd.choice(["", "# a comment", "   "])
        else:
            ms = 1269252000000 + number * 1000
            subject = rnd.choice([f"<http://example.org/sensor/{rnd.randrange(50)}>", f"_:b{rnd.randrange(9)}"])
            obj = rnd.choice([f"<http://example.org/car/{number}>", f'"reading \\"{number}\\""@EN',
                              f'"{number}"^^<{XSD}integer>', f'"caf\\u00E9 {number}"', "_:x"])
            stamp = rnd.choice([f'"{ms}"^^<{XSD}integer>', str(ms),
                                '"' + datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") + '"' + DT])
            text = f"<http://example.org/sensor/{number}> <http://example.org/p{rnd.randrange(5)}> {obj} {stamp} ."
            if roll < 0.5:
                text = f"{subject} <http://example.org/p{rnd.randrange(5)}> {obj} {stamp} ."
            good.add(number)
        out.append(text + ("\r\n" if roll > 0.99 else "\n"))
    path.write_text("".join(out), encoding="utf-8")
    return good, bad, reasons


def test_malformed_lines_are_rejected_and_the_good_ones_land(spark, warehouse, tmp_path, monkeypatch):
    # small byte ranges, so that many ranges (and their boundaries) are exercised
    monkeypatch.setattr(spark_job, "MIN_RANGE_BYTES", 2048)
    monkeypatch.setattr(spark_job, "MAX_RANGE_BYTES", 24 * 1024)
    source = tmp_path / "readings.tnq"
    good, bad, reasons = _generate(source, 2000, seed=17)
    assert 10 <= len(bad) <= 40
    report = ingest_stream(spark, warehouse, "http://example.org/readings", [source])
    assert report.landed == len(good) and report.rejected == len(bad)
    assert report.rejects_paths == (tmp_path / "readings.tnq.rejects.tsv",)
    rejects = [line.split("\t") for line in report.rejects_path.read_text(encoding="utf-8").splitlines()]
    assert {int(r[1]) for r in rejects} == bad
    assert [int(r[1]) for r in rejects] == sorted(bad)
    lines = source.read_text(encoding="utf-8").split("\n")
    for file, number, reason, text in rejects:
        assert file == str(source)
        assert reasons[int(number)] in reason.replace("\\\\", "\\")
        assert text.replace("\\\\", "\\") == lines[int(number) - 1].rstrip("\r")
    rows = rows_of(report.table)
    assert {r["arrival"] & LOW_BITS for r in rows} == good  # every good line, once
    assert len(rows) == len(good)
    assert all(r["ts"] == 1269252000000000 + (r["arrival"] & LOW_BITS) * 1_000_000 for r in rows)
    assert report.first_rejects[0].line == min(bad)


def test_escapes_language_tags_and_datatypes_match_rdflib(spark, warehouse, tmp_path):
    data = (
        '<http://ex/s> <http://ex/p> "tab\\tback\\bnl\\ncr\\rff\\fq\\"a\\\'b\\\\e\\u00E9\\U0001F600" .\n'
        '<http://ex/s\\u00E9> <http://ex/p> "Hello"@EN-gb .\n'
        "<http://ex/s> <http://ex/p> \"01\"^^<http://www.w3.org/2001/XMLSchema#integer> .\n"
        '<http://ex/s> <http://ex/p> "plain" .\n'
        '<http://ex/s> <http://ex/p> "typed string"^^<http://www.w3.org/2001/XMLSchema#string> .\n'
        "<http://ex/s>\t<http://ex/p>\t<http://ex/o>\t.\n"
        '<http://ex/s> <http://ex/p> "x"@de-CH-1996 .\n'
    )
    source = tmp_path / "escapes.nt"
    source.write_text(data, encoding="utf-8")
    report = ingest_stream(spark, warehouse, "http://example.org/escapes", [source], timestamp="2020-01-01T00:00:00Z")
    assert (report.landed, report.rejected) == (7, 0)
    previous, rdflib.NORMALIZE_LITERALS = rdflib.NORMALIZE_LITERALS, False
    try:
        expected = sorted(tuple(tuple(term_dict(t).values()) for t in triple) for triple in rdflib.Graph().parse(data=data, format="nt"))
    finally:
        rdflib.NORMALIZE_LITERALS = previous
    assert triples_of(report.table) == expected
    assert {r["ts"] for r in rows_of(report.table)} == {parse_instant("2020-01-01T00:00:00Z")}


def test_blank_nodes_do_not_collide_across_files_and_ingests(spark, warehouse, tmp_path):
    first, second = tmp_path / "a.tnq", tmp_path / "b.tnq"
    for path in (first, second):
        path.write_text("_:b1 <http://ex/p> _:b2 1269252000000 .\n_:b1 <http://ex/q> <http://ex/o> 1269252000000 .\n")
    one = ingest_stream(spark, warehouse, "http://example.org/bnodes", [first, second])
    two = ingest_stream(spark, warehouse, "http://example.org/bnodes", [first])
    rows = sorted(rows_of(one.table), key=lambda r: r["arrival"])
    subjects = [r["s"]["value"] for r in rows]
    assert all(r["s"]["kind"] == 2 for r in rows)
    # within a file the label is one node; across files and ingests, different nodes
    assert subjects[0] == subjects[1] and len({subjects[0], subjects[2], subjects[4]}) == 3
    assert rows[0]["o"]["value"] != rows[2]["o"]["value"]
    # arrival: file order within an ingest, later ingests later
    assert [r["arrival"] >> 40 for r in rows] == [1, 1, 1, 1, 2, 2]
    assert rows[2]["arrival"] > rows[1]["arrival"]
    assert (one.version, two.version) == (1, 2)


def test_a_failed_commit_leaves_the_table_as_it_was(spark, warehouse, monkeypatch):
    report = ingest_stream(spark, warehouse, STREAM, [GOLDEN / "05-stream.tnq"])
    before = folders(report.table)

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(ingest_module.delta, "commit_files", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        ingest_stream(spark, warehouse, STREAM, [GOLDEN / "05-stream.tnq"], again=True)
    assert delta.open_table(report.table).version() == 1
    assert folders(report.table) == before  # the stage folder is gone
    assert len(rows_of(report.table)) == 5


def test_plain_rdf_with_a_timestamp(spark, warehouse):
    report = ingest_stream(spark, warehouse, "http://example.org/places",
                           [GOLDEN / "05-static.ttl", GOLDEN / "05-stream.tnq"], timestamp="1269252000000")
    assert (report.landed, report.rejected) == (7, 0)
    rows = sorted(rows_of(report.table), key=lambda r: r["arrival"])
    # the Turtle file's triples (ordinals 1, 2) come before the N-Quads lines (line n -> ordinal 2 + n)
    assert [r["arrival"] & LOW_BITS for r in rows] == [1, 2, 6, 7, 8, 9, 10]
    assert [r["ts"] for r in rows[:2]] == [1269252000000000] * 2  # the N-Quads lines keep their own
    assert rows[-1]["ts"] == parse_instant("2010-03-22T10:10:30Z")
    with pytest.raises(InputError, match="pass --timestamp"):
        ingest_stream(spark, warehouse, "http://example.org/places", [GOLDEN / "05-static.ttl"])


# ---------------------------------------------------------------------------------------------------------
# Static graphs
# ---------------------------------------------------------------------------------------------------------


def test_static_graphs_stay_sets_with_append_and_replace(spark, warehouse, tmp_path):
    first, second = tmp_path / "first.nt", tmp_path / "second.nt"
    first.write_text("<http://ex/a> <http://ex/p> \"1\" .\n<http://ex/a> <http://ex/p> \"1\" .\n<http://ex/b> <http://ex/p> <http://ex/c> .\n")
    second.write_text("<http://ex/b> <http://ex/p> <http://ex/c> .\n<http://ex/d> <http://ex/q> \"2\"@EN .\n")
    graph = "http://example.org/graph"
    loaded = load_static(spark, warehouse, graph, [first])
    assert (loaded.landed, loaded.rejected) == (2, 0)
    appended = load_static(spark, warehouse, graph, [second, first])
    assert appended.landed == 1  # only the new triple
    triples = triples_of(warehouse.static(graph))
    assert len(triples) == len(set(triples)) == 3
    replaced = load_static(spark, warehouse, graph, [second], replace=True)
    assert replaced.landed == 2 and replaced.version == 3
    assert triples_of(warehouse.static(graph)) == sorted(
        tuple(tuple(term_dict(t).values()) for t in triple)
        for triple in [(URIRef("http://ex/b"), URIRef("http://ex/p"), URIRef("http://ex/c")),
                       (URIRef("http://ex/d"), URIRef("http://ex/q"), rdflib.Literal("2", lang="en"))]
    )
    assert delta.properties(warehouse.static(graph))["csparql.iri"] == graph
    counts = Catalog(warehouse).statistics().predicate_counts[URIRef(graph)]
    assert counts == {URIRef("http://ex/p"): 1, URIRef("http://ex/q"): 1}  # the replace hides the earlier loads


def test_turtle_static_load_and_a_broken_file(spark, warehouse, tmp_path):
    report = load_static(spark, warehouse, None, [GOLDEN / "05-static.ttl"])
    assert (report.landed, report.rejected, report.target) == (2, 0, "")
    objects = {r["o"]["value"] for r in rows_of(warehouse.static(None))}
    assert objects == {"Pine Park", "Oak avenue"}
    broken = tmp_path / "broken.ttl"
    broken.write_text("@prefix c: <http://ex/> .\nc:a c:b c:c .\nc:a c:b .\n")
    report = load_static(spark, warehouse, None, [broken, GOLDEN / "05-static.ttl"])
    assert (report.landed, report.rejected) == (0, 1)  # the good file's triples are there already
    [reject] = report.first_rejects
    assert reject.file == str(broken) and reject.line == 3 and "could not be parsed" in reject.reason
    assert reject.text == "c:a c:b ."
    # a --replace whose every input is rejected leaves the graph alone
    report = load_static(spark, warehouse, None, [broken], replace=True)
    assert (report.rejected, report.version) == (1, None) and report.warnings
    assert len(rows_of(warehouse.static(None))) == 2


def test_blank_nodes_of_a_static_load_are_scoped(spark, warehouse, tmp_path):
    source = tmp_path / "bnodes.ttl"
    source.write_text("@prefix e: <http://ex/> .\ne:a e:p [ e:q 1 ] .\n")
    load_static(spark, warehouse, None, [source])
    load_static(spark, warehouse, None, [source], again=True)
    rows = rows_of(warehouse.static(None))
    assert len(rows) == 4 and len({r["o"]["value"] for r in rows if r["o"]["kind"] == 2}) == 2
    assert {r["o"]["value"] for r in rows if r["p"]["value"] == "http://ex/q"} == {"1"}


# ---------------------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------------------


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_cli_ingest_good_partly_bad_and_missing(spark, tmp_path, capsys):
    base = ["--warehouse", str(tmp_path / "wh"), "--master", "local[2]"]
    code, out, _ = run_cli(capsys, "ingest", *base, "--stream", STREAM, str(GOLDEN / "05-stream.tnq"))
    assert code == 0
    assert out.strip() == f"5 triples landed in <{STREAM}> (1 file), 0 rejected"

    bad = tmp_path / "bad.tnq"
    bad.write_text('<http://a/s> <http://a/p> "x" 1269252000000 .\n<http://a/s> <http://a/p> "y" "yesterday" .\n')
    rejects = tmp_path / "all-rejects.tsv"
    code, out, err = run_cli(capsys, "ingest", *base, "--stream", STREAM, "--rejects", str(rejects), str(bad))
    assert code == 1
    assert out.strip() == f"1 triple landed in <{STREAM}> (1 file), 1 rejected — see {rejects}"
    assert f"{bad}:2: the timestamp 'yesterday' is neither an xsd:dateTime nor epoch milliseconds" in err
    assert rejects.read_text().startswith(f"{bad}\t2\tthe timestamp 'yesterday'")

    code, out, err = run_cli(capsys, "ingest", *base, "--stream", STREAM, str(tmp_path / "missing.tnq"))
    assert code == 2 and out == ""
    assert "missing.tnq: no such file" in err

    code, _, err = run_cli(capsys, "ingest", *base, "--stream", STREAM, "--format", "klingon", str(bad))
    assert code == 2 and "unknown format 'klingon'" in err
    code, _, err = run_cli(capsys, "ingest", *base, "--stream", "not an iri", str(bad))
    assert code == 2 and "is not an IRI" in err
    code, _, err = run_cli(capsys, "ingest", *base, "--stream", STREAM, "--timestamp", "yesterday", str(bad))
    assert code == 2 and "--timestamp" in err
    assert delta.open_table(Warehouse(tmp_path / "wh").stream(STREAM)).version() == 2


def test_cli_load_static(spark, tmp_path, capsys):
    base = ["--warehouse", str(tmp_path / "wh"), "--master", "local[2]"]
    graph = "http://example.org/city"
    code, out, _ = run_cli(capsys, "load-static", *base, "--graph", graph, str(GOLDEN / "05-static.ttl"))
    assert code == 0 and out.strip() == f"2 triples landed in the graph <{graph}> (1 file), 0 rejected"
    code, out, _ = run_cli(capsys, "load-static", *base, "--graph", graph, "--replace", str(GOLDEN / "05-static.ttl"))
    assert code == 0 and out.startswith("2 triples landed")
    code, out, _ = run_cli(capsys, "load-static", *base, str(GOLDEN / "05-static.ttl"))
    assert code == 0 and "the default graph" in out
    code, _, err = run_cli(capsys, "load-static", *base, str(tmp_path))
    assert code == 2 and "is a directory" in err
    assert len(triples_of(Warehouse(tmp_path / "wh").static(graph))) == 2


# ---------------------------------------------------------------------------------------------------------
# Timestamps in the future
# ---------------------------------------------------------------------------------------------------------

HOUR = 3_600_000_000


def future_file(path: Path, now: int) -> Path:
    """Five lines: two 2010 readings, one dated 9999-12-31, one 30 minutes ahead of ``now`` and one two hours
    ahead (epoch milliseconds, the fast path)."""
    path.write_text(
        f'<http://a/s> <http://a/p> "1" "2010-03-22T10:00:00Z"{DT} .\n'
        f'<http://a/s> <http://a/p> "2" "9999-12-31T00:00:00Z"{DT} .\n'
        f'<http://a/s> <http://a/p> "3" {(now + HOUR // 2) // 1000} .\n'
        f'<http://a/s> <http://a/p> "4" {(now + 2 * HOUR) // 1000} .\n'
        f'<http://a/s> <http://a/p> "5" "2010-03-22T10:05:00Z"{DT} .\n',
        encoding="utf-8",
    )
    return path


def bound_in(reason: str) -> int:
    """The instant a too-far-in-the-future reason names as the bound."""
    return parse_instant(reason.split("later than ", 1)[1].split(",", 1)[0])


def test_a_triple_dated_9999_is_rejected_and_the_watermark_stays_within_the_skew(spark, warehouse, tmp_path):
    from csparql.storage.watermarks import watermark

    before = time.time_ns() // 1000
    source = future_file(tmp_path / "future.tnq", before)
    report = ingest_stream(spark, warehouse, STREAM, [source])
    after = time.time_ns() // 1000

    assert (report.landed, report.rejected) == (3, 2)
    rejects = [line.split("\t") for line in report.rejects_path.read_text(encoding="utf-8").splitlines()]
    assert [(file, int(line)) for file, line, _, _ in rejects] == [(str(source), 2), (str(source), 4)]
    lines = source.read_text(encoding="utf-8").splitlines()
    assert [text for *_, text in rejects] == [lines[1], lines[3]]
    reason = rejects[0][2]
    assert reason.startswith("the timestamp '9999-12-31T00:00:00Z' is too far in the future: later than ")
    assert "the ingest's clock plus the maximum future skew of 1h" in reason
    assert before + HOUR <= bound_in(reason) <= after + HOUR
    assert rejects[1][2].startswith(f"the timestamp '{(before + 2 * HOUR) // 1000}' is too far in the future")
    landed = sorted(r["ts"] for r in rows_of(report.table))
    assert landed == [parse_instant("2010-03-22T10:00:00Z"), parse_instant("2010-03-22T10:05:00Z"),
                      (before + HOUR // 2) // 1000 * 1000]
    assert watermark(warehouse, STREAM) == landed[-1] <= after + HOUR


def test_the_maximum_future_skew_sets_the_bound(spark, warehouse, tmp_path):
    now = time.time_ns() // 1000
    source = future_file(tmp_path / "future.tnq", now)
    wider = ingest_stream(spark, warehouse, "http://example.org/wider", [source], rejects=tmp_path / "wider.tsv",
                          max_future_skew=3 * HOUR)
    assert (wider.landed, wider.rejected) == (4, 1)  # two hours ahead is within three
    assert "maximum future skew of 3h" in wider.first_rejects[0].reason
    none = ingest_stream(spark, warehouse, "http://example.org/none", [source], rejects=tmp_path / "none.tsv",
                         max_future_skew=0)
    assert (none.landed, none.rejected) == (2, 3)  # only the past lands
    assert [r.line for r in none.first_rejects] == [2, 3, 4]


def test_cli_ingest_takes_the_skew_from_its_option_or_the_environment(spark, tmp_path, capsys, monkeypatch):
    from csparql.storage.watermarks import watermark

    base = ["ingest", "--warehouse", str(tmp_path / "wh"), "--master", "local[2]"]
    now = time.time_ns() // 1000
    source = future_file(tmp_path / "future.tnq", now)

    code, out, err = run_cli(capsys, *base, "--stream", "http://example.org/default", str(source))
    assert code == 1 and out.startswith("3 triples landed") and "2 rejected" in out
    assert f"{source}:2: the timestamp '9999-12-31T00:00:00Z' is too far in the future" in err
    code, out, _ = run_cli(capsys, *base, "--stream", "http://example.org/option", "--max-future-skew", "3h",
                           str(source))
    assert code == 1 and out.startswith("4 triples landed") and "1 rejected" in out
    monkeypatch.setenv("CSPARQL_MAX_FUTURE_SKEW", "0s")
    code, out, _ = run_cli(capsys, *base, "--stream", "http://example.org/environment", str(source))
    assert code == 1 and out.startswith("2 triples landed") and "3 rejected" in out
    assert watermark(Warehouse(tmp_path / "wh"), "http://example.org/environment") == parse_instant(
        "2010-03-22T10:05:00Z")

    for option, message in ((["--max-future-skew", "soon"], "--max-future-skew: "),
                            (["--max-future-skew=-1h"], "--max-future-skew: -1h must not be negative"),
                            (["--timestamp", "9999-12-31T00:00:00Z"],
                             "--timestamp: 9999-12-31T00:00:00Z is too far in the future: later than ")):
        code, out, err = run_cli(capsys, *base, "--stream", "http://example.org/refused", *option, str(source))
        assert code == 2 and out == "" and message in err, (option, err)
    monkeypatch.setenv("CSPARQL_MAX_FUTURE_SKEW", "soon")
    code, _, err = run_cli(capsys, *base, "--stream", "http://example.org/refused", str(source))
    assert code == 2 and "CSPARQL_MAX_FUTURE_SKEW='soon'" in err
    assert not Warehouse(tmp_path / "wh").stream("http://example.org/refused").exists()


def test_cli_watermark_refuses_an_instant_beyond_the_skew_unless_told(tmp_path, capsys, monkeypatch):
    from csparql.storage.watermarks import watermark

    warehouse = Warehouse(tmp_path / "wh")
    base = ["watermark", "--warehouse", str(warehouse.root), STREAM]
    code, _, err = run_cli(capsys, *base, "2100-01-01T00:00:00Z")
    assert code == 1 and err.startswith("csparql watermark: refused: 2100-01-01T00:00:00Z is later than ")
    assert "maximum future skew of 1h (CSPARQL_MAX_FUTURE_SKEW)" in err and "--allow-future" in err
    assert watermark(warehouse, STREAM) is None
    soon = time.time_ns() // 1000 + HOUR // 2
    code, out, _ = run_cli(capsys, *base, str(soon // 1000), "--create")  # nothing was ingested into it yet
    assert code == 0 and watermark(warehouse, STREAM) == soon // 1000 * 1000
    monkeypatch.setenv("CSPARQL_MAX_FUTURE_SKEW", "36525d")
    code, _, _ = run_cli(capsys, *base, "2100-01-01T00:00:00Z")
    assert code == 0 and watermark(warehouse, STREAM) == parse_instant("2100-01-01T00:00:00Z")
    monkeypatch.delenv("CSPARQL_MAX_FUTURE_SKEW")
    code, _, _ = run_cli(capsys, *base, "2200-01-01T00:00:00Z", "--allow-future")
    assert code == 0 and watermark(warehouse, STREAM) == parse_instant("2200-01-01T00:00:00Z")


def test_a_skew_longer_than_100_years_is_refused_and_no_watermark_leaves_the_instants_csparql_evaluates(
        spark, tmp_path, capsys, monkeypatch):
    """Before the fix, ``--max-future-skew 3000000d`` accepted a triple dated 9999-12-31, and the stream's
    watermark stayed there for good, outside 1500..9500."""
    from csparql.ingest.ingest import future_limit
    from csparql.ingest.landing import land_waiting_files
    from csparql.storage.watermarks import advance_watermark, watermark
    from csparql.core.windows import LATEST_INSTANT, MAX_DURATION

    warehouse = Warehouse(tmp_path / "wh")
    base = ["ingest", "--warehouse", str(warehouse.root), "--master", "local[2]", "--stream", STREAM]
    source = future_file(tmp_path / "future.tnq", time.time_ns() // 1000)

    code, out, err = run_cli(capsys, *base, "--max-future-skew", "3000000d", str(source))
    assert (code, out) == (2, "")
    assert err.strip() == ("csparql ingest: error: --max-future-skew: 3000000d is longer than 36525d (100 years), "
                           "the longest duration csparql accepts")
    monkeypatch.setenv("CSPARQL_MAX_FUTURE_SKEW", "3000000d")
    code, out, err = run_cli(capsys, *base, str(source))
    assert code == 2 and "CSPARQL_MAX_FUTURE_SKEW='3000000d': 3000000d is longer than 36525d (100 years)" in err
    code, _, err = run_cli(capsys, "watermark", "--warehouse", str(warehouse.root), STREAM, "2100-01-01T00:00:00Z")
    assert code == 1 and "CSPARQL_MAX_FUTURE_SKEW='3000000d': 3000000d is longer than 36525d" in err
    monkeypatch.delenv("CSPARQL_MAX_FUTURE_SKEW")
    with pytest.raises(InputError, match="the maximum future skew 3000000d is longer than 36525d"):
        ingest_stream(spark, warehouse, STREAM, [source], max_future_skew=3_000_000 * 86_400_000_000)
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "future.tnq").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(ValueError, match="longer than 36525d"):
        land_waiting_files(lambda: spark, warehouse, STREAM, landing, max_future_skew=3_000_000 * 86_400_000_000)
    assert (landing / "future.tnq").exists()  # a bad setting is not the file's fault: it waits
    assert not warehouse.stream(STREAM).exists() and watermark(warehouse, STREAM) is None

    # the longest skew accepted still keeps the limit within the instants csparql evaluates
    assert future_limit(MAX_DURATION, now=LATEST_INSTANT - HOUR).latest == LATEST_INSTANT
    for instant in ("9999-12-31T00:00:00Z", "1400-01-01T00:00:00Z"):
        with pytest.raises(ValueError, match=f"cannot be {instant}: it must lie within 1500-01-01T00:00:00Z to "
                                             "9500-01-01T00:00:00Z"):
            advance_watermark(warehouse, STREAM, parse_instant(instant), "a test")
    assert watermark(warehouse, STREAM) is None


# ---------------------------------------------------------------------------------------------------------
# The same content lands once
# ---------------------------------------------------------------------------------------------------------


class Killed(BaseException):
    """The process dying at this point: nothing catches it, no cleanup after it runs."""


def readings(path: Path, count: int, first_ms: int = 1269252000000) -> Path:
    """``count`` timestamped triples, one a second from ``first_ms``."""
    path.write_text("".join(f'<http://e/car{i}> <http://e/passes> <http://e/gate{i % 3}> {first_ms + i * 1000} .\n'
                            for i in range(count)), encoding="utf-8")
    return path


def test_cli_ingest_of_content_that_landed_lands_nothing_and_says_where_unless_told_again(
        spark, tmp_path, capsys):
    """Before the fix, ingesting the same file twice stored every triple twice."""
    warehouse = Warehouse(tmp_path / "wh")
    base = ["ingest", "--warehouse", str(warehouse.root), "--master", "local[2]", "--stream", STREAM]
    source = readings(tmp_path / "readings.nq", 20)

    code, out, err = run_cli(capsys, *base, str(source))
    assert (code, out.strip()) == (0, f"20 triples landed in <{STREAM}> (1 file), 0 rejected")
    committed = delta.open_table(warehouse.stream(STREAM)).history(1)[0]
    at = datetime.fromtimestamp(committed["timestamp"] / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")

    code, out, err = run_cli(capsys, *base, str(source))
    assert (code, out) == (0, "")
    assert err.startswith(f"csparql ingest: nothing landed: the same content already landed in <{STREAM}> in "
                          f"version 1 at {at}")
    assert err.rstrip().endswith("; use --again to land it again") and len(err.splitlines()) == 1
    copy = tmp_path / "copy.nq"  # the same bytes under another name are the same content
    copy.write_bytes(source.read_bytes())
    code, out, err = run_cli(capsys, *base[:-1], f"<{STREAM}>", str(copy))  # and <IRI> is the same stream
    assert (code, out) == (0, "") and "already landed" in err
    assert delta.open_table(warehouse.stream(STREAM)).version() == 1 and len(rows_of(warehouse.stream(STREAM))) == 20

    code, out, _ = run_cli(capsys, *base, "--again", str(source))
    assert (code, out.strip()) == (0, f"20 triples landed in <{STREAM}> (1 file), 0 rejected")
    assert len(rows_of(warehouse.stream(STREAM))) == 40
    # other content lands: another stream, another --timestamp, other bytes
    code, out, _ = run_cli(capsys, *base[:-1], "http://example.org/other", str(source))
    assert code == 0 and out.startswith("20 triples landed")
    plain = tmp_path / "plain.nt"
    plain.write_text("<http://e/s> <http://e/p> <http://e/o> .\n", encoding="utf-8")
    for timestamp in ("1269252000000", "1269252001000"):
        code, out, _ = run_cli(capsys, *base, "--timestamp", timestamp, str(plain))
        assert code == 0 and out.startswith("1 triple landed")
    assert len(rows_of(warehouse.stream(STREAM))) == 42


def test_an_ingest_killed_between_its_commit_and_its_watermark_completes_it_when_run_again(
        spark, tmp_path, capsys, monkeypatch):
    """Before the fix, killed after its data commit and before its watermark commit, then run again, an ingest
    stored every triple twice."""
    from csparql.storage.watermarks import watermark

    warehouse = Warehouse(tmp_path / "wh")
    base = ["ingest", "--warehouse", str(warehouse.root), "--master", "local[2]", "--stream", STREAM]
    source = readings(tmp_path / "readings.nq", 30)

    def killed(*args, **kwargs):
        raise Killed()

    with monkeypatch.context() as patch:
        patch.setattr(ingest_module, "advance_watermark", killed)
        with pytest.raises(Killed):
            main([*base, str(source)])
    capsys.readouterr()
    assert len(rows_of(warehouse.stream(STREAM))) == 30 and watermark(warehouse, STREAM) is None

    code, out, err = run_cli(capsys, *base, str(source))

    assert (code, out) == (0, "")
    assert "nothing landed: the same content already landed" in err and "in version 1 at " in err
    assert delta.open_table(warehouse.stream(STREAM)).version() == 1
    assert len(rows_of(warehouse.stream(STREAM))) == 30  # once
    assert watermark(warehouse, STREAM) == (1269252000000 + 29 * 1000) * 1000  # what the killed ingest owed


def test_load_static_of_content_the_graph_holds_lands_nothing_unless_told_again(spark, tmp_path, capsys):
    """Static graphs, before the fix: loading the same file twice stored its blank-node triples twice."""
    warehouse = Warehouse(tmp_path / "wh")
    graph = "http://example.org/city"
    base = ["load-static", "--warehouse", str(warehouse.root), "--master", "local[2]", "--graph", graph]
    source = tmp_path / "bnodes.ttl"
    source.write_text("@prefix e: <http://ex/> .\ne:a e:p [ e:q 1 ] .\n", encoding="utf-8")
    other = tmp_path / "other.ttl"
    other.write_text("@prefix e: <http://ex/> .\ne:b e:p e:c .\n", encoding="utf-8")

    assert run_cli(capsys, *base, str(source))[0] == 0
    code, out, err = run_cli(capsys, *base, str(source))
    assert (code, out) == (0, "")
    assert err.startswith(f"csparql load-static: nothing landed: the same content already landed in the graph "
                          f"<{graph}> in version 1 at ") and "use --again" in err
    assert len(rows_of(warehouse.static(graph))) == 2
    assert run_cli(capsys, *base, "--again", str(source))[0] == 0
    assert len(rows_of(warehouse.static(graph))) == 4
    # a replace removes what the earlier loads landed: the content may land again after it
    assert run_cli(capsys, *base, "--replace", str(other))[0] == 0
    code, out, _ = run_cli(capsys, *base, str(source))
    assert code == 0 and out.startswith("2 triples landed")
    assert len(rows_of(warehouse.static(graph))) == 3


def test_cli_watermark_refuses_a_non_iri_and_an_unknown_stream_and_says_when_it_changes_nothing(tmp_path, capsys):
    from csparql.storage.tables import IRI_PROPERTY, KIND_PROPERTY
    from csparql.storage.watermarks import read_watermarks
    from csparql.core.windows import format_instant

    warehouse = Warehouse(tmp_path / "wh")
    base = ["watermark", "--warehouse", str(warehouse.root)]
    code, out, err = run_cli(capsys, *base, "not an iri", "2010-03-22T10:00:00Z")
    assert (code, out, err) == (1, "", "csparql watermark: refused: the stream 'not an iri' is not an IRI: it must "
                                       "not be empty or contain spaces or any of <>\"{}|^`\\ "
                                       "(e.g. http://example.org/stream)\n")
    code, out, err = run_cli(capsys, *base, STREAM, "2010-03-22T10:00:00Z")  # nothing ingested into it
    assert (code, out, err) == (1, "", f"csparql watermark: refused: no stream <{STREAM}> in the warehouse "
                                       f"{warehouse.root}: nothing was ingested into it and it has no watermark; "
                                       "check the IRI, or pass --create to give a stream that has not landed yet "
                                       "its first watermark\n")
    assert read_watermarks(warehouse) == {} and not warehouse.watermarks.exists()

    delta.ensure(warehouse.stream(STREAM), schema.STREAM, schema.STREAM_PARTITIONS,
                 {IRI_PROPERTY: STREAM, KIND_PROPERTY: "stream"})  # the table an ingest creates
    code, out, err = run_cli(capsys, *base, STREAM, "2010-03-22T10:00:00Z")
    assert (code, out, err) == (0, f"2010-03-22T10:00:00Z\t<{STREAM}>\n", "")
    code, out, err = run_cli(capsys, *base, f"<{STREAM}>", "-5")  # epoch milliseconds, before the mark
    assert (code, out, err) == (0, f"2010-03-22T10:00:00Z\t<{STREAM}>\n", (
        f"csparql watermark: unchanged: the watermark of <{STREAM}> stays at 2010-03-22T10:00:00Z: "
        f"{format_instant(-5000)} is earlier, and a watermark never goes back\n"))
    code, out, err = run_cli(capsys, *base, STREAM, "2010-03-22T10:00:00Z")
    assert code == 0 and err == (f"csparql watermark: unchanged: the watermark of <{STREAM}> is already "
                                 "2010-03-22T10:00:00Z\n")
    assert read_watermarks(warehouse) == {STREAM: parse_instant("2010-03-22T10:00:00Z")}
    assert delta.open_table(warehouse.watermarks).version() == 1  # the created table and the one mark

    quiet = "http://example.org/quiet"
    code, out, err = run_cli(capsys, *base, quiet, "2010-03-22T09:00:00Z", "--create")
    assert code == 0 and err == "" and read_watermarks(warehouse)[quiet] == parse_instant("2010-03-22T09:00:00Z")


def test_the_content_digest_of_files_whose_digests_the_caller_has_equals_the_digest_of_reading_them(tmp_path):
    from csparql.ingest.ingest import content_digest, sha256_of

    first, second = tmp_path / "a.nq", tmp_path / "b.nq"
    first.write_bytes(b'<http://e/a> <http://e/p> "1" "2010-03-22T08:00:00Z" .\n')
    second.write_bytes(b'<http://e/b> <http://e/p> "2" "2010-03-22T08:01:00Z" .\n')
    read = content_digest("http://e/s", [first, second], None)
    given = content_digest("<http://e/s>", [first, second], None, file_digests=[sha256_of(first), sha256_of(second)])
    assert given == read != content_digest("http://e/s", [second, first], None)
    with pytest.raises(ValueError, match="1 digest"):
        content_digest("http://e/s", [first, second], None, file_digests=[sha256_of(first)])
