"""The SRBench data generator: faithful to the schema of SRBench, §4, seeded, and at any size."""

from __future__ import annotations

from collections import Counter

import pytest
from rdflib import BNode, Graph, Literal

from csparql.cli import main
from csparql.srbench import Size, generate, write_files
from csparql.srbench.generator import STATION_0, Scenario
from csparql.srbench.vocabulary import (
    DBPEDIA_GRAPH,
    DBPPROP,
    DCTERMS,
    GEONAMES_GRAPH,
    GN,
    OM,
    ONTOLOGY,
    OWL_SAMEAS,
    OWL_TIME,
    RDF_TYPE,
    RDFS_SUBCLASSOF,
    SENSORS,
    SKOS,
    WEATHER,
    WGS84,
    XSD,
    YAGO,
)

SMALL = Size(stations=6, hours=15, rate=1, towns_per_county=1)


def test_the_same_seed_and_size_give_the_same_data_and_another_seed_other_values():
    a, b = generate(SMALL, seed=3), generate(SMALL, seed=3)
    assert a.stream == b.stream and a.graphs == b.graphs
    c = generate(SMALL, seed=4)
    assert [t[:2] for t in c.stream] == [t[:2] for t in a.stream]  # the same observations…
    assert [t[2] for t in c.stream] != [t[2] for t in a.stream]  # …with other values


def test_the_stream_is_in_time_order_and_grows_with_stations_hours_and_rate():
    base = generate(SMALL)
    assert [t[3] for t in base.stream] == sorted(t[3] for t in base.stream)
    doubled_stations = generate(Size(stations=12, hours=15, rate=1, towns_per_county=1))
    doubled_rate = generate(Size(stations=6, hours=15, rate=2, towns_per_county=1))
    # twice the stations: twice the observations, but for the one broken station (only the first rural one breaks)
    assert 2 * len(base.stream) < len(doubled_stations.stream) < 2.1 * len(base.stream)
    assert len(doubled_rate.stream) == 2 * len(base.stream)
    longer = generate(Size(stations=6, hours=30, rate=1, towns_per_county=1))
    assert len(longer.stream) > 1.9 * len(base.stream)
    towns = generate(Size(stations=6, hours=15, rate=1, towns_per_county=5))
    assert len(towns.graphs[GEONAMES_GRAPH]) > len(base.graphs[GEONAMES_GRAPH])


@pytest.mark.parametrize("size", [dict(stations=5), dict(hours=14), dict(rate=0), dict(towns_per_county=-1)])
def test_sizes_too_small_for_every_scenario_are_refused(size):
    with pytest.raises(ValueError):
        Size(**size)


def test_observations_have_the_schema_of_004_section_4():
    data = generate(SMALL)
    stream = {(s, p, o) for s, p, o, _ in data.stream}
    observations = {s for s, p, o in stream if p == OM.observedProperty}
    assert observations
    by_subject = {}
    for s, p, o in stream:
        by_subject.setdefault(s, {}).setdefault(p, set()).add(o)
    classes = Counter()
    for observation in observations:
        described = by_subject[observation]
        assert set(described) == {RDF_TYPE, OM.observedProperty, OM.procedure, OM.result, OM.samplingTime}
        classes.update(described[RDF_TYPE])
        (result,) = described[OM.result]
        result_types = by_subject[result][RDF_TYPE]
        if OM.MeasureData in result_types:
            (value,) = by_subject[result][OM.floatValue]
            assert value.datatype == XSD.float and by_subject[result][OM.uom]
        else:
            assert result_types == {OM.TruthData}
            assert by_subject[result][OM.booleanValue] == {Literal("true", datatype=XSD.boolean)}
        (instant,) = described[OM.samplingTime]
        assert by_subject[instant][RDF_TYPE] == {OWL_TIME.Instant}
        (system,) = described[OM.procedure]
        assert observation in by_subject[system][OM.generatedObservation]
    for klass in ("TemperatureObservation", "WindSpeedObservation", "RainfallObservation", "SnowfallObservation",
                  "PrecipitationObservation", "VisibilityObservation"):
        assert classes[WEATHER[klass]] > 0, klass


def test_stations_geonames_and_dbpedia_have_what_the_queries_join_on():
    data = generate(SMALL)
    sensors, geonames, dbpedia = (Graph() for _ in range(3))
    for graph, iri in ((sensors, SENSORS), (geonames, GEONAMES_GRAPH), (dbpedia, DBPEDIA_GRAPH)):
        for triple in data.graphs[iri]:
            graph.add(triple)
    systems = set(sensors.subjects(RDF_TYPE, OM.System))
    assert len(systems) == SMALL.stations
    for system in systems:
        rel = sensors.value(system, OM.hasLocatedNearRel)
        place = sensors.value(rel, OM.hasLocation)
        assert (place, RDF_TYPE, GN.Feature) in geonames
        # every place has a parentFeature chain up to the United States
        chain = [place]
        while geonames.value(chain[-1], GN.parentFeature) is not None:
            chain.append(geonames.value(chain[-1], GN.parentFeature))
        assert geonames.value(chain[-1], GN.name) == Literal("United States") and len(chain) >= 3
        point = sensors.value(system, OM.processLocation)
        assert {p for p, _ in sensors.predicate_objects(point)} >= {WGS84.lat, WGS84.long, WGS84.alt}
    station_0 = data.stations[0]
    point = sensors.value(station_0.system, OM.processLocation)
    assert sensors.value(point, WGS84.lat) == Literal(STATION_0["lat"], datatype=XSD.float)
    codes = {str(o).rsplit("#", 1)[1] for o in geonames.objects(None, GN.featureCode)}
    assert {"S.AIRP", "L.CST", "P.PPLX", "A.ADM1", "A.ADM2"} <= codes
    hurricanes = set(dbpedia.subjects(DBPPROP["1MinWinds"], None))
    assert hurricanes and all(dbpedia.value(h, DBPPROP.damages) is not None for h in hurricanes)
    assert (YAGO.AtlanticHurricanes, RDFS_SUBCLASSOF, YAGO.Hurricane111467018) in dbpedia
    assert set(dbpedia.subjects(DCTERMS.subject, None)) and set(dbpedia.subjects(SKOS.broader, None))
    links = list(dbpedia.subject_objects(OWL_SAMEAS)) + list(geonames.subject_objects(OWL_SAMEAS))
    assert links
    assert any(p == RDFS_SUBCLASSOF for _, p, _ in data.graphs[ONTOLOGY])


def test_the_scenario_scales_with_the_hours():
    short, default = Scenario.of(15), Scenario.of(30)
    assert default.hurricane.start == 4 and default.hurricane.end == 10 and default.breakdown == 20
    for scenario, hours in ((short, 15), (default, 30)):
        for interval in (scenario.windy_before, scenario.hurricane, scenario.blizzard, scenario.heavy_rain, *scenario.rain):
            assert 0 <= interval.start < interval.end <= hours
        assert scenario.breakdown < hours


def test_files_parse_and_hold_the_same_data(tmp_path):
    data = generate(SMALL)
    workload = write_files(data, tmp_path)
    lines = workload.stream_file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(data.stream)
    assert lines[0].endswith('"^^<http://www.w3.org/2001/XMLSchema#dateTime> .')
    for iri, path in workload.graph_files.items():
        graph = Graph().parse(path, format="turtle" if path.suffix == ".ttl" else "nt")
        generated = set(data.graphs[iri])
        assert len(graph) == len(generated)
        ground = {t for t in generated if not any(isinstance(term, BNode) for term in t)}
        assert ground <= set(graph)  # blank nodes get new labels when read back


def test_the_command_writes_the_files_and_refuses_a_bad_size(tmp_path, capsys):
    assert main(["srbench", "generate", "--out", str(tmp_path / "data"), "--stations", "6", "--hours", "15", "--seed", "2"]) == 0
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        "dbpedia.nt", "geonames.nt", "observations.nq", "ontology.ttl", "sensors.nt"]
    assert "6 stations, 15 hours, seed 2" in capsys.readouterr().out
    assert main(["srbench", "generate", "--out", str(tmp_path / "bad"), "--stations", "2"]) == 1
    assert "at least 6 stations" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
