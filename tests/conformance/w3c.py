"""The W3C SPARQL query evaluation tests (vendored under ``tests/fixtures/w3c``) as conformance cases.

Each manifest's ``mf:entries`` are read with rdflib; the query evaluation tests (``mf:QueryEvaluationTest``,
and ``mf:CSVResultFormatTest``, whose expected result is CSV) become ``W3CTest``s. Their data are read with
pyoxigraph (so literals keep their exact lexical forms) and given to the engine as static graphs: ``qt:data``
is the default static graph, each ``qt:graphData`` a named graph named by its file IRI. A query that names
its own dataset (``FROM``/``FROM NAMED``) gets exactly the files it names, as SPARQL says; the test's data is
then left out. The query text gets ``BASE <file IRI of the query>`` in front, which is the base SPARQL gives
a query read from a file, so relative IRIs (``FROM <data-g1.ttl>``) resolve to the files' IRIs.

The expected result file is the independent truth: ``.srx``/``.srj`` (SPARQL results in XML/JSON), ``.ttl``
and ``.rdf`` (a result set in the DAWG vocabulary, or the graph of a CONSTRUCT), ``.tsv`` and ``.csv``.
"""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pyoxigraph as ox
from rdflib import BNode, Graph, Literal, Namespace, URIRef
from rdflib.collection import Collection
from rdflib.namespace import RDF

from conformance.compare import Results
from conformance.reference import from_ox

W3C = Path(__file__).resolve().parent.parent / "fixtures" / "w3c"
MF = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
QT = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-query#")
DAWGT = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-dawg#")
RS = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/result-set#")
SRX = "{http://www.w3.org/2005/sparql-results#}"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
TEST_TYPES = {MF.QueryEvaluationTest: "evaluation", MF.CSVResultFormatTest: "csv"}


@dataclass
class W3CTest:
    """One query evaluation test of the W3C suites."""

    name: str  # suite/folder/local name, e.g. "sparql11/aggregates/agg01"
    iri: str
    kind: str  # "evaluation" or "csv"
    query: Path
    data: list[Path] = field(default_factory=list)
    graph_data: list[Path] = field(default_factory=list)
    result: Path | None = None
    approval: str | None = None
    requires: list[str] = field(default_factory=list)
    lax_cardinality: bool = False

    @property
    def query_text(self) -> str:
        return self.query.read_text(encoding="utf-8")


def manifests() -> list[Path]:
    return sorted(W3C.glob("sparql11/*/manifest.ttl")) + sorted(W3C.glob("data-r2/*/manifest.ttl"))


def _path(term) -> Path:
    return Path(re.sub(r"^file://", "", str(term)))


def load_tests() -> list[W3CTest]:
    """Every query evaluation test listed in the vendored manifests' ``mf:entries``, in manifest order."""
    tests: list[W3CTest] = []
    for manifest in manifests():
        graph = Graph()
        graph.parse(manifest, format="turtle", publicID=manifest.as_uri())
        suite = manifest.parent.relative_to(W3C).as_posix()
        for root in graph.subjects(RDF.type, MF.Manifest):
            for entries in graph.objects(root, MF.entries):
                for entry in Collection(graph, entries):
                    kind = next((TEST_TYPES[t] for t in graph.objects(entry, RDF.type) if t in TEST_TYPES), None)
                    if kind is None:
                        continue
                    action = graph.value(entry, MF.action)
                    query = graph.value(action, QT.query)
                    result = graph.value(entry, MF.result)
                    approval = graph.value(entry, DAWGT.approval)
                    local = str(entry).rsplit("#", 1)[-1]
                    tests.append(
                        W3CTest(
                            name=f"{suite}/{local}",
                            iri=str(entry),
                            kind=kind,
                            query=_path(query),
                            data=sorted(_path(d) for d in graph.objects(action, QT.data)),
                            graph_data=sorted(_path(d) for d in graph.objects(action, QT.graphData)),
                            result=_path(result) if result is not None else None,
                            approval=str(approval).rsplit("#", 1)[-1] if approval is not None else None,
                            requires=sorted(str(r).rsplit("#", 1)[-1] for r in graph.objects(entry, MF.requires)),
                            lax_cardinality=(entry, MF.resultCardinality, MF.LaxCardinality) in graph,
                        )
                    )
    return tests


# --- data ---------------------------------------------------------------------------------------------------

_FORMATS = {".ttl": ox.RdfFormat.TURTLE, ".rdf": ox.RdfFormat.RDF_XML, ".nt": ox.RdfFormat.N_TRIPLES, ".n3": ox.RdfFormat.N3}


def read_triples(path: Path, role: str = "") -> list[tuple]:
    """The triples of an RDF file as rdflib terms with exact lexical forms. Blank node labels are scoped to
    one reading of a document, so two files' ``_:x`` are two blank nodes, and so are the blank nodes of a
    file read as the default graph and again as a named graph (``role`` tells the readings apart)."""
    fmt = _FORMATS[path.suffix]
    scope = role + re.sub(r"[^A-Za-z0-9]", "_", path.relative_to(W3C).as_posix())

    def term(node):
        value = from_ox(node)
        return BNode(f"{scope}_{value}") if isinstance(value, BNode) else value

    return [(term(t.subject), term(t.predicate), term(t.object)) for t in ox.parse(path=str(path), format=fmt, base_iri=path.as_uri())]


def query_with_base(test: W3CTest) -> str:
    return f"BASE <{test.query.as_uri()}>\n" + test.query_text


# --- expected results ---------------------------------------------------------------------------------------


def _srx_term(node):
    if node.tag == SRX + "uri":
        return URIRef(node.text or "")
    if node.tag == SRX + "bnode":
        return BNode(node.text or "")
    if node.tag == SRX + "literal":
        text = node.text or ""
        language = node.get(XML_LANG)
        datatype = node.get("datatype")
        if language:
            return Literal(text, lang=language, normalize=False)
        if datatype:
            return Literal(text, datatype=URIRef(datatype), normalize=False)
        return Literal(text, normalize=False)
    raise ValueError(f"unknown SPARQL XML result term {node.tag}")


def read_srx(path: Path) -> Results:
    root = ET.parse(path).getroot()
    boolean = root.find(SRX + "boolean")
    if boolean is not None:
        return Results("ask", boolean=boolean.text.strip() == "true")
    names = tuple(v.get("name") for v in root.find(SRX + "head").findall(SRX + "variable"))
    rows = []
    for result in root.find(SRX + "results").findall(SRX + "result"):
        values = {}
        for binding in result.findall(SRX + "binding"):
            values[binding.get("name")] = _srx_term(list(binding)[0])
        rows.append(tuple(values.get(n) for n in names))
    return Results("select", names, rows)


def _srj_term(value: dict):
    kind = value["type"]
    if kind == "uri":
        return URIRef(value["value"])
    if kind == "bnode":
        return BNode(value["value"])
    if "xml:lang" in value:
        return Literal(value["value"], lang=value["xml:lang"], normalize=False)
    if "datatype" in value:
        return Literal(value["value"], datatype=URIRef(value["datatype"]), normalize=False)
    return Literal(value["value"], normalize=False)


def read_srj(path: Path) -> Results:
    data = json.loads(path.read_text(encoding="utf-8"))
    if "boolean" in data:
        return Results("ask", boolean=bool(data["boolean"]))
    names = tuple(data["head"]["vars"])
    rows = [tuple(_srj_term(b[n]) if n in b else None for n in names) for b in data["results"]["bindings"]]
    return Results("select", names, rows)


def read_rdf_results(path: Path, form: str) -> Results:
    """A DAWG result-set graph (SELECT/ASK), or the expected graph of a CONSTRUCT/DESCRIBE."""
    triples = read_triples(path)
    graph = Graph()
    for triple in triples:
        graph.add(triple)
    result_sets = list(graph.subjects(RDF.type, RS.ResultSet))
    if form in ("construct", "describe") or not result_sets:
        return Results(form, triples=triples)
    result_set = result_sets[0]
    boolean = graph.value(result_set, RS.boolean)
    if boolean is not None:
        return Results("ask", boolean=str(boolean) == "true")
    names = tuple(str(v) for v in graph.objects(result_set, RS.resultVariable))
    rows = []
    for solution in graph.objects(result_set, RS.solution):
        values = {}
        for binding in graph.objects(solution, RS.binding):
            values[str(graph.value(binding, RS.variable))] = graph.value(binding, RS.value)
        rows.append(tuple(values.get(n) for n in names))
    return Results("select", names, rows)


def _tsv_term(text: str):
    if text == "":
        return None
    if re.fullmatch(r"[+-]?[0-9]+", text):
        return Literal(text, datatype=URIRef("http://www.w3.org/2001/XMLSchema#integer"), normalize=False)
    if re.fullmatch(r"[+-]?[0-9]*\.[0-9]+", text):
        return Literal(text, datatype=URIRef("http://www.w3.org/2001/XMLSchema#decimal"), normalize=False)
    if re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+", text):
        return Literal(text, datatype=URIRef("http://www.w3.org/2001/XMLSchema#double"), normalize=False)
    if text in ("true", "false"):
        return Literal(text, datatype=URIRef("http://www.w3.org/2001/XMLSchema#boolean"), normalize=False)
    triples = list(ox.parse(f"<urn:s> <urn:p> {text} .", format=ox.RdfFormat.TURTLE))
    return from_ox(triples[0].object)


def read_tsv(path: Path) -> Results:
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    names = tuple(n[1:] for n in lines[0].rstrip("\r").split("\t"))
    rows = []
    for line in lines[1:]:
        rows.append(tuple(_tsv_term(cell) for cell in line.rstrip("\r").split("\t")))
    return Results("select", names, rows)


def read_csv(path: Path) -> Results:
    """CSV results keep only text: every value as a plain string (blank nodes as ``_:label`` blank nodes)."""
    reader = csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline=""))
    table = list(reader)
    names = tuple(table[0])
    rows = [tuple(csv_value(cell) for cell in row) for row in table[1:] if row]
    return Results("select", names, rows)


def csv_value(text: str):
    if text == "":
        return None
    if text.startswith("_:"):
        return BNode(text[2:])
    return Literal(text)


def as_csv(result: Results) -> Results:
    """A SELECT result as the CSV format keeps it (§2 of SPARQL 1.1 CSV/TSV): IRIs and literals as text."""

    def cell(term):
        if term is None:
            return None
        if isinstance(term, BNode):
            return term
        return Literal(str(term))

    return Results("select", result.vars, [tuple(cell(t) for t in row) for row in result.rows])


def expected_result(test: W3CTest, form: str) -> Results:
    path = test.result
    if path.suffix == ".srx":
        return read_srx(path)
    if path.suffix == ".srj":
        return read_srj(path)
    if path.suffix == ".tsv":
        return read_tsv(path)
    if path.suffix == ".csv":
        return read_csv(path)
    return read_rdf_results(path, form)


# --- cases --------------------------------------------------------------------------------------------------


def case_of(test: W3CTest):
    """The engine's inputs for a test: the query with its base, and the test's (or the query's) graphs."""
    from csparql.core.frontend import parse_query
    from csparql.core.language import syntax as sx

    from conformance.reference import Case

    text = query_with_base(test)
    graphs: dict = {}
    try:
        named_by_query = [c.iri for c in parse_query(text).datasets if isinstance(c, sx.FromGraph)]
    except Exception:
        named_by_query = []  # the engine reports the problem
    if named_by_query:
        for iri in dict.fromkeys(named_by_query):
            graphs[URIRef(iri)] = read_triples(_path(iri))
    else:
        default: list = []
        for path in test.data:
            default.extend(read_triples(path, "default_"))
        graphs[None] = list(dict.fromkeys(default))
        for path in test.graph_data:
            graphs[URIRef(path.as_uri())] = read_triples(path, "named_")
    return Case(test.name, text, {}, graphs, None)


def form_of(test: W3CTest) -> str:
    from csparql.core.frontend import parse_query
    from csparql.core.language import syntax as sx

    form = parse_query(query_with_base(test)).form
    return {sx.SelectForm: "select", sx.AskForm: "ask", sx.ConstructForm: "construct", sx.DescribeForm: "describe"}[type(form)]


def check(engine: Results, test: W3CTest) -> list[str]:
    """Compare the engine's result with the test's expected result file."""
    from csparql.core.frontend import parse_query

    from conformance.compare import compare
    from conformance.harness import ordering

    expected = expected_result(test, form_of(test))
    if test.kind == "csv":
        engine = as_csv(engine)
    if test.lax_cardinality and engine.form == "select":
        # REDUCED may drop any number of duplicates: compare the distinct solutions
        engine = Results("select", engine.vars, list(dict.fromkeys(engine.rows)))
        expected = Results("select", expected.vars, list(dict.fromkeys(expected.rows)))
    keys, _ = ordering(parse_query(query_with_base(test)))
    return compare(engine, expected, keys, any_var_order=True)


def included() -> list[W3CTest]:
    """The tests the harness runs: every loaded test that ``excluded.EXCLUDED`` does not list."""
    from conformance.excluded import EXCLUDED

    return [t for t in load_tests() if t.name not in EXCLUDED]
