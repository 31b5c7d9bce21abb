"""Closures of static graphs (``_csparql/closures``): computed once per version of the graphs, reused by later
windows and by other engines (processes), recomputed when a graph changes, never used for a path that reads a
stream; and the results stay those of pyoxigraph over the same data.

What was computed is read from the stored table itself: its Delta version (one commit per stored closure) and the
closures it holds per family.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from rdflib import URIRef

from conformance import reference
from conformance.compare import compare, from_engine
from csparql.engine.closures import DeltaClosureStore
from csparql.ingest.ingest import ingest_stream, load_static
from csparql.engine.runner import Engine
from csparql.core.frontend import compile_query
from csparql.storage.warehouse import Warehouse

EX = "http://example.org/"
GN = "http://www.geonames.org/ontology#"
STREAM, PLACES, ONTOLOGY = EX + "sightings", EX + "places", EX + "ontology"
MINUTE = 60_000_000
T0 = 1_600_000_200_000_000 - 1_600_000_200_000_000 % (10 * MINUTE)  # a 10-minute boundary


def u(name: str) -> URIRef:
    return URIRef(EX + name)


PLACE_CHAIN = [("a", "b"), ("b", "c"), ("c", "d"), ("e", "c"), ("f", "e")]
SIGHTINGS = [("s1", "a", 2), ("s2", "e", 4), ("s3", "f", 12), ("s4", "b", 15), ("s5", "a", 22), ("s6", "d", 27)]

PATHS = f"""REGISTER QUERY Ancestors COMPUTED EVERY 10m AS
PREFIX gn: <{GN}>
PREFIX ex: <{EX}>
SELECT ?s ?place ?ancestor
FROM STREAM <{STREAM}> [RANGE 10m STEP 10m]
FROM <{PLACES}>
WHERE {{ ?s ex:near ?place . ?place gn:parentFeature+ ?ancestor }}
"""
FROM_CONSTANT = f"""REGISTER QUERY BelowC COMPUTED EVERY 10m AS
PREFIX gn: <{GN}>
PREFIX ex: <{EX}>
SELECT ?s ?place
FROM STREAM <{STREAM}> [RANGE 10m STEP 10m]
FROM <{PLACES}>
WHERE {{ ?s ex:near ?place . ?place gn:parentFeature* ex:c }}
"""
ENTAILED = f"""REGISTER QUERY Kinds COMPUTED EVERY 10m ENTAILMENT RDFS AS
PREFIX ex: <{EX}>
SELECT ?s ?kind
FROM STREAM <{STREAM}> [RANGE 10m STEP 10m]
FROM <{PLACES}>
FROM <{ONTOLOGY}>
WHERE {{ ?s ex:near ?place . ?place a ?kind }}
"""


def write_static(path, triples) -> None:
    path.write_text("".join(f"<{EX}{s}> <{p}> <{EX}{o}> .\n" for s, p, o in triples), encoding="utf-8")


def write_stream(path, sightings, predicate=EX + "near") -> None:
    lines = [
        f'<{EX}{s}> <{predicate}> <{EX}{o}> "{(T0 + minute * MINUTE) // 1000}"^^<http://www.w3.org/2001/XMLSchema#long> .\n'
        for s, o, minute in sightings
    ]
    path.write_text("".join(lines), encoding="utf-8")


@pytest.fixture()
def warehouse(spark, tmp_path):
    warehouse = Warehouse(tmp_path / "warehouse")
    write_static(tmp_path / "places.nt", [(s, GN + "parentFeature", o) for s, o in PLACE_CHAIN]
                 + [("a", "http://www.w3.org/1999/02/22-rdf-syntax-ns#type", "Beach")])
    write_static(tmp_path / "ontology.nt", [("Beach", "http://www.w3.org/2000/01/rdf-schema#subClassOf", "Shore"),
                                           ("Shore", "http://www.w3.org/2000/01/rdf-schema#subClassOf", "Place")])
    write_stream(tmp_path / "sightings.nq", SIGHTINGS)
    load_static(spark, warehouse, PLACES, [tmp_path / "places.nt"])
    load_static(spark, warehouse, ONTOLOGY, [tmp_path / "ontology.nt"])
    ingest_stream(spark, warehouse, STREAM, [tmp_path / "sightings.nq"])
    return warehouse


def state(warehouse: Warehouse) -> tuple[int, dict]:
    """The closures table's version and the closures it holds, by family."""
    store = DeltaClosureStore(None, warehouse)
    version = DeltaTable(str(warehouse.closures)).version() if (warehouse.closures / "_delta_log").exists() else -1
    return version, store.stored_keys()


def check(engine: Engine, text: str, at: int, graphs: dict, streams: dict) -> None:
    plan = compile_query(text)
    found = from_engine(engine.evaluate(plan, at, plan.registration.name).result)
    truth = reference.evaluate(reference.Case("closures", text, streams, graphs, at))
    problems = compare(found, truth)
    assert not problems, "\n".join(problems)
    assert found.rows, "the window has answers"


def graph_data(chain, extra=()):
    return [(u(s), URIRef(GN + "parentFeature"), u(o)) for s, o in chain] + list(extra)


TYPE_A = (u("a"), URIRef("http://www.w3.org/1999/02/22-rdf-syntax-ns#type"), u("Beach"))


def stream_data(sightings, predicate=EX + "near"):
    return {URIRef(STREAM): [(u(s), URIRef(predicate), u(o), T0 + m * MINUTE) for s, o, m in sightings]}


def test_a_static_closure_is_computed_once_and_reused_by_later_windows_and_other_engines(spark, warehouse):
    graphs = {URIRef(PLACES): graph_data(PLACE_CHAIN, [TYPE_A])}
    streams = stream_data(SIGHTINGS)
    check(Engine(warehouse, spark), PATHS, T0 + 10 * MINUTE, graphs, streams)
    version, families = state(warehouse)
    assert len(families) == 1 and all(len(ids) == 1 for ids in families.values())
    engine = Engine(warehouse, spark)
    check(engine, PATHS, T0 + 20 * MINUTE, graphs, streams)
    assert state(warehouse) == (version, families)  # the second window read the stored closure
    check(Engine(warehouse, spark), PATHS, T0 + 30 * MINUTE, graphs, streams)
    assert state(warehouse) == (version, families)  # and so did a new engine, as a new process would


def test_a_change_to_the_static_graph_makes_a_new_closure_that_replaces_the_old(spark, warehouse, tmp_path):
    engine = Engine(warehouse, spark)
    check(engine, PATHS, T0 + 10 * MINUTE, {URIRef(PLACES): graph_data(PLACE_CHAIN, [TYPE_A])}, stream_data(SIGHTINGS))
    version, families = state(warehouse)
    write_static(tmp_path / "more.nt", [("d", GN + "parentFeature", "g")])
    load_static(spark, warehouse, PLACES, [tmp_path / "more.nt"])
    graphs = {URIRef(PLACES): graph_data(PLACE_CHAIN + [("d", "g")], [TYPE_A])}
    check(engine, PATHS, T0 + 20 * MINUTE, graphs, stream_data(SIGHTINGS))
    new_version, new_families = state(warehouse)
    assert new_version > version
    assert new_families.keys() == families.keys()  # the same closure…
    (family,) = families
    assert len(new_families[family]) == 1 and new_families[family] != families[family]  # …at the new version only
    check(Engine(warehouse, spark), PATHS, T0 + 30 * MINUTE, graphs, stream_data(SIGHTINGS))
    assert state(warehouse) == (new_version, new_families)


def test_closures_from_a_constant_and_of_entailment_hierarchies_are_kept_too(spark, warehouse):
    graphs = {URIRef(PLACES): graph_data(PLACE_CHAIN, [TYPE_A])}
    engine = Engine(warehouse, spark)
    check(engine, FROM_CONSTANT, T0 + 10 * MINUTE, graphs, stream_data(SIGHTINGS))
    _, families = state(warehouse)
    assert len(families) == 1
    plan = compile_query(ENTAILED)
    result = engine.evaluate(plan, T0 + 10 * MINUTE, "Kinds").result
    kinds = sorted((str(s), str(k)) for s, k in result.rows)
    assert kinds == [(EX + "s1", EX + k) for k in ("Beach", "Place", "Shore")]
    version, families = state(warehouse)
    # the closure from ex:c and the sub-class hierarchy; no graph holds rdfs:subPropertyOf (the statistics say
    # so), so the sub-property hierarchy reads nothing and there is nothing to keep
    assert len(families) == 2
    engine.evaluate(plan, T0 + 30 * MINUTE, "Kinds")
    assert state(warehouse) == (version, families)


def test_a_path_whose_links_a_stream_holds_is_evaluated_on_each_window_and_not_stored(spark, warehouse, tmp_path):
    links = [("s1", "a", 3), ("a", "z", 5)]
    write_stream(tmp_path / "links.nq", links, predicate=GN + "parentFeature")
    ingest_stream(spark, warehouse, STREAM, [tmp_path / "links.nq"])
    streams = {URIRef(STREAM): stream_data(SIGHTINGS)[URIRef(STREAM)]
               + [(u(s), URIRef(GN + "parentFeature"), u(o), T0 + m * MINUTE) for s, o, m in links]}
    check(Engine(warehouse, spark), PATHS, T0 + 10 * MINUTE, {URIRef(PLACES): graph_data(PLACE_CHAIN, [TYPE_A])}, streams)
    assert state(warehouse) == (-1, {})
