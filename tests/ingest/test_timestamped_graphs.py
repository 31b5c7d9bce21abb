"""Timestamped named graphs (RSP-QL's data model) in TriG, TriX, N-Quads and JSON-LD land the rows the project's line
format lands for the same events, a query over them answers as pyoxigraph does over the events, and a graph
that cannot be timestamped is rejected with its name, the line where it is written and the reason, while the
other graphs land."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
import rdflib
from rdflib import URIRef

from csparql.cli import main
from csparql.engine.runner import Engine
from csparql.storage.stored import StoredResults
from csparql.core.frontend import compile_query
from csparql.ingest.parsers.graphs import PROV_GENERATED_AT_TIME
from csparql.ingest.ingest import InputError, ingest_stream
from csparql.storage.schema import BLANK
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import format_instant

from conformance import reference
from ingest.test_ingest import rows_of

pytestmark = pytest.mark.spark

STREAM = "http://streams.org/milantollgates.trdf"
EX = "http://ex.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
START = 1_269_252_000_000_000  # 2010-03-22T10:00:00Z
SECOND = 1_000_000
QUERY = f"""REGISTER QUERY passages AS
PREFIX ex: <{EX}>
SELECT ?gate (COUNT(?car) AS ?cars)
FROM STREAM <{STREAM}> [RANGE 1m STEP 1m]
WHERE {{ ?gate ex:registers ?car . ?car ex:colour ?colour . FILTER (?colour != "red") }}
GROUP BY ?gate
"""


def events(seed: int = 7, count: int = 60) -> list[tuple[str, int, list[tuple[str, str, object]]]]:
    """(event name, instant µs, triples): each event a car passing a gate and the car's colour, over 3 minutes;
    several events share an instant."""
    chosen = random.Random(seed)
    made = []
    for number in range(count):
        at = START + chosen.randrange(0, 180) * SECOND
        car, gate = f"{EX}car{number}", f"{EX}gate{chosen.randrange(4)}"
        made.append((f"{EX}event{number}", at, [(gate, f"{EX}registers", car),
                                                 (car, f"{EX}colour", chosen.choice(["red", "blue", "grey"]))]))
    return made


def _term(value) -> str:
    return f"<{value}>" if value.startswith("http://") else json.dumps(value)


def as_lines(made) -> str:
    """The project's line format: the timestamp as each triple's fourth term."""
    return "".join(f'{_term(s)} {_term(p)} {_term(o)} "{format_instant(at)}"^^<{XSD}dateTime> .\n'
                   for _, at, triples in made for s, p, o in triples)


def as_trig(made, inside: bool = False) -> str:
    """TriG: each event a named graph, its timestamp in the default graph (or, ``inside``, in the graph)."""
    out = [f"@prefix prov: <http://www.w3.org/ns/prov#> .\n@prefix xsd: <{XSD}> .\n"]
    for name, at, triples in made:
        stamp = f'<{name}> prov:generatedAtTime "{format_instant(at)}"^^xsd:dateTime .'
        body = " ".join(f"{_term(s)} {_term(p)} {_term(o)} ." for s, p, o in triples)
        out.append(f"<{name}> {{ {body} {stamp if inside else ''} }}\n{'' if inside else stamp}\n")
    return "".join(out)


def as_nquads(made) -> str:
    """Standard N-Quads: each event's triples with its name as the fourth term, its timestamp in the default
    graph (the first line is a timestamp, a triple: the file is told from the line format by a later line)."""
    out = []
    for name, at, triples in made:
        out.append(f'<{name}> <{PROV_GENERATED_AT_TIME}> "{format_instant(at)}"^^<{XSD}dateTime> .\n')
        out.extend(f"{_term(s)} {_term(p)} {_term(o)} <{name}> .\n" for s, p, o in triples)
    return "".join(out)


def as_jsonld(made) -> str:
    """JSON-LD: the default graph holds each event's timestamp and the event's @graph its triples; the
    timestamps are epoch milliseconds as xsd:long."""
    nodes = []
    for name, at, triples in made:
        graph = [{"@id": s, p: ({"@id": o} if o.startswith("http://") else o)} for s, p, o in triples]
        nodes.append({"@id": name, PROV_GENERATED_AT_TIME: {"@value": str(at // 1000), "@type": f"{XSD}long"},
                      "@graph": graph})
    return json.dumps({"@graph": nodes}, indent=1)


def landed(path) -> Counter:
    return Counter((r["s"]["value"], r["p"]["value"], r["o"]["value"], r["ts"]) for r in rows_of(path))


def test_the_same_events_as_trig_trix_n_quads_json_ld_and_the_line_format_land_the_same_rows(spark, tmp_path):
    made = events()
    files = {"events.nq": as_lines(made), "events.trig": as_trig(made), "inside.trig": as_trig(made, inside=True),
             "events.jsonld": as_jsonld(made), "standard.nq": as_nquads(made)}
    dataset = rdflib.Dataset()
    dataset.parse(data=as_trig(made), format="trig")
    files["events.trix"] = dataset.serialize(format="trix")
    expected = Counter((s, p, o, at) for _, at, triples in made for s, p, o in triples)
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        warehouse = Warehouse(tmp_path / f"warehouse-{name}")
        report = ingest_stream(spark, warehouse, STREAM, [tmp_path / name])
        assert report.rejected == 0 and report.landed == 2 * len(made), (name, report.first_rejects)
        assert landed(warehouse.stream(STREAM)) == expected, name  # the timestamp triples do not land


def test_a_query_over_landed_trig_gives_pyoxigraphs_answer(spark, tmp_path):
    made = events(seed=11, count=80)
    (tmp_path / "events.trig").write_text(as_trig(made), encoding="utf-8")
    warehouse = Warehouse(tmp_path / "warehouse")
    assert ingest_stream(spark, warehouse, STREAM, [tmp_path / "events.trig"]).rejected == 0
    plan = compile_query(QUERY)
    stream = [(URIRef(s), URIRef(p), URIRef(o) if o.startswith("http://") else rdflib.Literal(o), at)
              for _, at, triples in made for s, p, o in triples]
    for minute in (1, 2, 3):
        at = START + minute * 60 * SECOND
        ours = Engine(warehouse, spark).evaluate(plan, at, "passages", write=False).result
        truth = reference.evaluate(reference.Case("passages", QUERY, {URIRef(STREAM): stream}, {}, at))
        assert truth.rows, minute
        assert Counter(tuple(map(str, row)) for row in ours.rows) == Counter(
            tuple(map(str, row)) for row in truth.rows), minute


BROKEN = f"""@prefix prov: <http://www.w3.org/ns/prov#> .
@prefix xsd: <{XSD}> .
@prefix ex: <{EX}> .
ex:good {{ ex:gate1 ex:registers ex:car1 . }}
ex:good prov:generatedAtTime "2010-03-22T10:00:10Z"^^xsd:dateTime .
ex:untimed {{ ex:gate1 ex:registers ex:car2 . }}
ex:twice {{ ex:gate1 ex:registers ex:car3 . }}
ex:twice prov:generatedAtTime "2010-03-22T10:00:10Z"^^xsd:dateTime, "2010-03-22T10:00:20Z"^^xsd:dateTime .
<{EX}notatime> {{ ex:gate1 ex:registers ex:car4 . }}
ex:notatime prov:generatedAtTime "yesterday" .
ex:future {{ ex:gate1 ex:registers ex:car5 . }}
ex:future prov:generatedAtTime "9999-01-01T00:00:00Z"^^xsd:dateTime .
ex:gate1 ex:label "gate one" .
"""


def test_graphs_that_cannot_be_timestamped_are_rejected_with_line_and_reason_and_the_others_land(spark, tmp_path):
    path = tmp_path / "events.trig"
    path.write_text(BROKEN, encoding="utf-8")
    warehouse = Warehouse(tmp_path / "warehouse")
    report = ingest_stream(spark, warehouse, STREAM, [path])
    assert landed(warehouse.stream(STREAM)) == Counter({
        (f"{EX}gate1", f"{EX}registers", f"{EX}car1", START + 10 * SECOND): 1})
    assert report.landed == 1 and report.rejected == 5
    reasons = {reject.line: reject.reason for reject in report.first_rejects}
    assert reasons[0].startswith("the default graph has 1 triple without a timestamp")
    assert reasons[6].startswith(f"graph <{EX}untimed>: it has no timestamp: no triple <{EX}untimed> "
                                 f"<{PROV_GENERATED_AT_TIME}>")
    assert reasons[7] == (f"graph <{EX}twice>: it has 2 different timestamps ('2010-03-22T10:00:10Z', "
                          "'2010-03-22T10:00:20Z'); its 1 triple did not land")
    assert reasons[9] == (f"graph <{EX}notatime>: the timestamp 'yesterday' is neither an xsd:dateTime nor epoch "
                          "milliseconds; its 1 triple did not land")
    assert reasons[11].startswith(f"graph <{EX}future>: the timestamp '9999-01-01T00:00:00Z' is too far in the "
                                  "future")
    rejects = (tmp_path / "events.trig.rejects.tsv").read_text(encoding="utf-8").splitlines()
    assert [row.split("\t")[1] for row in rejects] == ["0", "6", "7", "9", "11"]
    assert rejects[1].split("\t")[3] == f"<{EX}untimed>"

    # with --timestamp, what had none takes it; the graphs with a wrong timestamp are still rejected
    again = ingest_stream(spark, warehouse, STREAM, [path], timestamp="2010-03-22T10:00:30Z", again=True)
    assert again.rejected == 3 and again.landed == 3
    assert landed(warehouse.stream(STREAM))[(f"{EX}gate1", f"{EX}registers", f"{EX}car2", START + 30 * SECOND)] == 1


def test_the_timestamp_predicate_can_be_named_and_a_malformed_file_is_rejected_whole(spark, tmp_path, capsys):
    made = events(count=5)
    sosa = "http://www.w3.org/ns/sosa/resultTime"
    path = tmp_path / "sosa.trig"
    path.write_text(as_trig(made).replace("prov:generatedAtTime", f"<{sosa}>"), encoding="utf-8")
    warehouse = tmp_path / "warehouse"
    code = main(["ingest", str(path), "--stream", STREAM, "--warehouse", str(warehouse)])
    out, err = capsys.readouterr()
    assert code == 1 and "it has no timestamp" in out + err and "Traceback" not in out + err
    code = main(["ingest", str(path), "--stream", STREAM, "--warehouse", str(warehouse), "--timestamp-predicate",
                 sosa, "--timestamp-predicate", PROV_GENERATED_AT_TIME])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert landed(Warehouse(warehouse).stream(STREAM)) == Counter(
        (s, p, o, at) for _, at, triples in made for s, p, o in triples)
    with pytest.raises(InputError, match="timestamp predicate"):
        ingest_stream(spark, Warehouse(warehouse), STREAM, [path], timestamp_predicates=["not an iri"])

    broken = tmp_path / "broken.trig"
    broken.write_text(f"<{EX}e1> {{ <{EX}a> <{EX}b> \n", encoding="utf-8")
    report = ingest_stream(spark, Warehouse(warehouse), STREAM, [broken])
    assert report.landed == 0 and report.rejected == 1
    assert report.first_rejects[0].reason.startswith("the file could not be parsed")


def test_a_line_format_file_is_told_from_standard_n_quads_by_its_first_fourth_term(tmp_path):
    from csparql.ingest.parsers.graphs import names_graphs

    made = events(count=3)
    cases = {
        "standard.nq": (as_nquads(made), True),
        "lines.nq": (as_lines(made), False),
        # a stray graph name after a timestamp is one malformed line of the line format, not another format
        "stray.nq": (as_lines(made) + f"<{EX}a> <{EX}b> <{EX}c> <{EX}graph> .\n", False),
        "triples-only.nq": (f"<{EX}a> <{EX}b> <{EX}c> .\n", False),
    }
    for name, (text, standard) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert names_graphs(tmp_path / name) is standard, name


GRAPH_QUERY = f"""REGISTER QUERY GatePassages COMPUTED EVERY 1m AS
PREFIX ex: <{EX}>
CONSTRUCT {{ ?gate ex:passedBy ?car . _:seen ex:car ?car }}
FROM STREAM <{STREAM}> [RANGE 1m STEP 1m]
WHERE {{ ?gate ex:registers ?car }}
"""


def test_graph_results_read_out_as_trig_land_as_a_stream_of_the_same_triples_at_the_windows_ends(
        spark, tmp_path, capsys):
    """``csparql results --format trig`` of a CONSTRUCT query writes each window as a graph timestamped with
    the window's end; ingested, it is a stream of each window's triples at its end (blank nodes relabelled, one
    per window and label), as a REGISTER STREAM of the query would produce."""
    made = events(seed=3, count=40)
    (tmp_path / "events.trig").write_text(as_trig(made), encoding="utf-8")
    warehouse = Warehouse(tmp_path / "warehouse")
    ingest_stream(spark, warehouse, STREAM, [tmp_path / "events.trig"])
    plan = compile_query(GRAPH_QUERY)
    for minute in (1, 2, 3):
        Engine(warehouse, spark).evaluate(plan, START + minute * 60 * SECOND, "GatePassages")
    stored = list(StoredResults(warehouse, "GatePassages").windows())
    assert len(stored) == 3
    assert main(["results", "GatePassages", "--format", "trig", "--warehouse", str(warehouse.root)]) == 0
    text = capsys.readouterr().out
    assert text.count(f"<{PROV_GENERATED_AT_TIME}>") == 3
    (tmp_path / "out.trig").write_text(text, encoding="utf-8")
    again = Warehouse(tmp_path / "again")
    assert ingest_stream(spark, again, "http://ex.org/passages", [tmp_path / "out.trig"]).rejected == 0

    def shape(term) -> str:
        return "_" if isinstance(term, rdflib.BNode) else str(term)

    expected = Counter((shape(s), str(p), str(o), end) for _, end, result in stored for s, p, o in result.triples)
    rows = rows_of(again.stream("http://ex.org/passages"))
    assert expected and Counter(("_" if r["s"]["kind"] == BLANK else r["s"]["value"], r["p"]["value"],
                                 r["o"]["value"], r["ts"]) for r in rows) == expected
    blank_subjects = {r["s"]["value"] for r in rows if r["s"]["kind"] == BLANK}
    assert len(blank_subjects) == sum(1 for _, p, _, _ in expected.elements() if p == f"{EX}car")

    # bindings are not graphs: said so, nothing printed
    Engine(warehouse, spark).evaluate(compile_query(QUERY), START + 60 * SECOND, "passages")
    assert main(["results", "passages", "--format", "trig", "--warehouse", str(warehouse.root)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "TriG writes the graphs of CONSTRUCT and DESCRIBE queries" in err
    assert "Traceback" not in err
