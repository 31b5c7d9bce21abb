"""The line a graph's reject points to (``graphs.first_line_naming``): where the file first writes the graph's
name — in full, as a prefixed name, as a blank node's label, or quoted in JSON-LD — and 0 where it never does;
and a file whose every graph is rejected, each reject at its own graph's line, in one pass over the file."""

from __future__ import annotations

import json

from csparql.ingest.parsers.graphs import first_line_naming
from csparql.ingest.ingest import ingest_stream
from csparql.storage.schema import BLANK, IRI
from csparql.storage.warehouse import Warehouse

EX = "http://ex.org/"
STREAM = "http://streams.org/rejected"

TRIG = f"""@prefix ex: <{EX}> .
@prefix prov: <http://www.w3.org/ns/prov#> .
<{EX}full> {{ ex:car1 ex:passes ex:gate1 . }}
ex:prefixed {{ ex:car2 ex:passes ex:gate1 . }}
_:b1 {{ ex:car3 ex:passes ex:gate1 . }}
ex:later.x ex:note "ex:later.x is another name" .
ex:later {{ ex:car4 ex:passes ex:gate1 . }}
<{EX}full> prov:generatedAtTime "yesterday" .
"""


def test_each_name_is_found_where_the_file_first_writes_it_and_0_where_it_never_does(tmp_path):
    path = tmp_path / "events.trig"
    path.write_text(TRIG, encoding="utf-8")
    names = [(IRI, f"{EX}full"), (IRI, f"{EX}prefixed"), (BLANK, "b1"), (IRI, f"{EX}later"), (IRI, f"{EX}absent"),
             (BLANK, "b2"), (IRI, f"{EX}full")]
    assert first_line_naming(path, names) == {
        (IRI, f"{EX}full"): 3, (IRI, f"{EX}prefixed"): 4, (BLANK, "b1"): 5,
        (IRI, f"{EX}later"): 7,  # line 6 writes ex:later.x, a name of its own
        (IRI, f"{EX}absent"): 0, (BLANK, "b2"): 0}
    assert first_line_naming(path, []) == {}
    assert first_line_naming(tmp_path / "gone.trig", [(IRI, f"{EX}full")]) == {(IRI, f"{EX}full"): 0}


def test_json_ld_names_are_found_between_quotes_in_full_or_compacted(tmp_path):
    document = {"@context": {"ex": EX}, "@graph": [
        {"@id": f"{EX}e1", "@graph": [{"@id": "ex:car1", "ex:passes": {"@id": "ex:gate1"}}]},
        {"@id": "ex:e2", "@graph": [{"@id": "ex:car2", "ex:passes": {"@id": "ex:gate1"}}]}]}
    path = tmp_path / "events.jsonld"
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    lines = path.read_text(encoding="utf-8").splitlines()
    found = first_line_naming(path, [(IRI, f"{EX}e1"), (IRI, f"{EX}e2")])
    assert found == {(IRI, f"{EX}e1"): 1 + next(i for i, line in enumerate(lines) if f'"{EX}e1"' in line),
                     (IRI, f"{EX}e2"): 1 + next(i for i, line in enumerate(lines) if '"ex:e2"' in line)}


def test_a_file_whose_every_graph_has_no_timestamp_is_rejected_graph_by_graph_each_at_its_line(tmp_path):
    """3,000 graphs without a timestamp (written with another predicate): nothing lands, and each reject names
    its graph's own line. (Looking every rejected name up on every line took minutes for files like this.)"""
    count = 3000
    path = tmp_path / "events.trig"
    path.write_text("".join(f'<{EX}event{i}> {{ <{EX}car{i}> <{EX}passes> <{EX}gate{i % 7}> . }}\n'
                            f'<{EX}event{i}> <http://purl.org/dc/terms/created> "2010-03-22T10:00:00Z" .\n'
                            for i in range(count)), encoding="utf-8")

    report = ingest_stream(None, Warehouse(tmp_path / "warehouse"), STREAM, [path], in_process=True)

    # every graph, and the default graph's triples (the dcterms:created ones, which have no timestamp either)
    assert (report.landed, report.rejected) == (0, count + 1)
    rejects = [row.split("\t") for row in
               (tmp_path / "events.trig.rejects.tsv").read_text(encoding="utf-8").splitlines()]
    [default] = [fields for fields in rejects if fields[2].startswith("the default graph")]
    assert default[1] == "0"
    lines = {fields[3]: int(fields[1]) for fields in rejects if fields is not default}
    assert lines == {f"<{EX}event{i}>": 2 * i + 1 for i in range(count)}
