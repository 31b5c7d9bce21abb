"""A small window (a compact evaluation: its files hold at most ``COMPACT_TRIPLES`` triples) runs as one Spark
job — one partition from the scans to the collect, nothing shuffled or broadcast — whatever the shape of its
plan: patterns over a stream and a default graph with no table, chains of joins, FILTERs, OPTIONALs, UNIONs,
GROUP BY and DISTINCT. Its answers are those of the same window evaluated distributed. The joins of a basic
graph pattern, whose sides are bounded by the triples read, hash the pattern; the others sort both sides."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from rdflib import Literal, URIRef
from rdflib.namespace import XSD

from csparql.engine.runner import Engine
from csparql.core.frontend import compile_query
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import parse_instant
from storage.helpers import write_static, write_stream

OM = "http://example.org/om#"
WEATHER = "http://example.org/weather#"
STREAM = "http://example.org/observations"
PLACES = "http://example.org/places"
MINUTE = 60_000_000
T_END = parse_instant("2010-03-30T12:00:00Z")

PREFIXES = f"PREFIX om: <{OM}>\nPREFIX w: <{WEATHER}>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"

# The shapes of SRBench's Q1 (a chain of patterns, DISTINCT) and Q4 (a FILTER between two chains, GROUP BY
# with averages), over a stream alone: the default graph also names the default static graph, which has no
# table here.
CHAIN = "REGISTER QUERY Chain COMPUTED EVERY 10m AS\n" + PREFIXES + f"""
SELECT DISTINCT ?sensor ?value ?uom
FROM STREAM <{STREAM}> [RANGE 1h STEP 10m]
WHERE {{ ?observation om:procedure ?sensor ; a w:RainfallObservation ; om:result ?result .
         ?result om:floatValue ?value ; om:uom ?uom . }}
"""
AVERAGES = "REGISTER QUERY Averages COMPUTED EVERY 10m AS\n" + PREFIXES + f"""
SELECT ?sensor (AVG(?wind) AS ?averageWind) (AVG(?temperature) AS ?averageTemperature)
FROM STREAM <{STREAM}> [RANGE 1h STEP 10m]
WHERE {{ ?t om:procedure ?sensor ; a w:TemperatureObservation ; om:result ?tr .
         ?tr om:floatValue ?temperature ; om:uom ?uom .
         FILTER (?temperature > "20"^^xsd:float && REGEX(STR(?uom), "celsius", "i"))
         ?w om:procedure ?sensor ; a w:WindObservation ; om:result [ om:floatValue ?wind ] . }}
GROUP BY ?sensor
"""
# A stream joined with a static graph, an OPTIONAL with a FILTER, a UNION and an ORDER BY.
PLACES_QUERY = "REGISTER QUERY Places COMPUTED EVERY 10m AS\n" + PREFIXES + f"""
SELECT ?city (COUNT(?o) AS ?observations) (MAX(?value) AS ?highest)
FROM STREAM <{STREAM}> [RANGE 1h STEP 10m]
FROM <{PLACES}>
WHERE {{ ?o om:procedure ?sensor ; om:result [ om:floatValue ?value ] .
         ?sensor om:near ?place .
         {{ ?place om:city ?city }} UNION {{ ?place om:town ?city }}
         OPTIONAL {{ ?place om:population ?population FILTER (?population > 1000) }} }}
GROUP BY ?city
ORDER BY DESC(?highest)
"""


def _observations() -> list[tuple]:
    """Six sensors observing rainfall, temperature and wind every 5 minutes over two hours before T_END."""
    triples = []
    number = 0
    for minute in range(5, 121, 5):
        at = T_END - 120 * MINUTE + minute * MINUTE
        for sensor in range(6):
            for kind, unit in (("RainfallObservation", "inches"), ("TemperatureObservation", "celsius"),
                               ("WindObservation", "mph")):
                number += 1
                observation, result = URIRef(f"{OM}obs{number}"), URIRef(f"{OM}result{number}")
                value = Literal(str(float((number * 7) % 40)), datatype=XSD.float)
                triples += [
                    (observation, URIRef(OM + "procedure"), URIRef(f"{OM}sensor{sensor}"), at),
                    (observation, URIRef("http://www.w3.org/1999/02/22-rdf-syntax-ns#type"),
                     URIRef(WEATHER + kind), at),
                    (observation, URIRef(OM + "result"), result, at),
                    (result, URIRef(OM + "floatValue"), value, at),
                    (result, URIRef(OM + "uom"), URIRef(f"{WEATHER}{unit}"), at),
                ]
    return triples


def _places() -> list[tuple]:
    triples = []
    for sensor in range(6):
        place = URIRef(f"{OM}place{sensor % 4}")
        triples.append((URIRef(f"{OM}sensor{sensor}"), URIRef(OM + "near"), place))
    for index in range(4):
        place = URIRef(f"{OM}place{index}")
        triples.append((place, URIRef(OM + ("city" if index % 2 else "town")), Literal(f"city {index // 2}")))
        triples.append((place, URIRef(OM + "population"), Literal(index * 900)))
    return triples


@pytest.fixture(scope="module")
def observations_warehouse(tmp_path_factory) -> Warehouse:
    warehouse = Warehouse(tmp_path_factory.mktemp("compact-windows"))
    write_stream(warehouse, STREAM, _observations())
    write_static(warehouse, PLACES, _places())
    return warehouse


_JOB_GROUPS = itertools.count()


def _jobs_of(spark, action) -> tuple[object, int]:
    """What ``action()`` returns, and how many Spark jobs it ran."""
    context = spark.sparkContext
    group = f"compact-windows-{next(_JOB_GROUPS)}"  # never reused: a group named twice counts both jobs
    context.setJobGroup(group, group)
    try:
        outcome = action()
    finally:
        context.setJobGroup("", "")
    return outcome, len(context.statusTracker().getJobIdsForGroup(group))


def _physical_plans_of(spark, action) -> tuple[object, list[str]]:
    """What ``action()`` returns, and the physical plans of the SQL executions it ran (Spark's SQL status
    store, which keeps them without the UI)."""
    store = spark._jsparkSession.sharedState().statusStore()

    def executions() -> dict[int, str]:
        listed = store.executionsList()
        return {listed.apply(i).executionId(): listed.apply(i).physicalPlanDescription()
                for i in range(listed.size())}

    before = max(executions(), default=-1)
    outcome = action()
    return outcome, [plan for number, plan in sorted(executions().items()) if number > before]


@pytest.mark.parametrize("query, sorted_joins", [(CHAIN, False), (AVERAGES, False), (PLACES_QUERY, True)],
                         ids=["chain", "averages", "places"])
def test_a_small_window_is_one_spark_job_hashing_its_pattern_joins_with_the_answers_of_a_distributed_evaluation(
        spark, observations_warehouse, query, sorted_joins):
    """One job, whatever the plan's shape. Within a basic graph pattern each join's right side is one pattern,
    at most the triples read: a hash join, no sort. The join with a UNION and the OPTIONAL of the third query
    have sides of no known bound: sort-merge joins, whose sorts spill."""
    plan = compile_query(query)
    name = plan.registration.name.lower()
    compact = Engine(observations_warehouse, spark)
    distributed = Engine(observations_warehouse, spark, compact_triples=0)
    compact.evaluate(plan, T_END, f"{name}_warm", write=False)  # static parts cached, as a live query has them
    (evaluation, plans), jobs = _jobs_of(spark, lambda: _physical_plans_of(
        spark, lambda: compact.evaluate(plan, T_END, f"{name}_compact", write=False)))
    reference = distributed.evaluate(plan, T_END, f"{name}_distributed", write=False)
    assert len(evaluation.result) > 0
    assert Counter(evaluation.result.rows) == Counter(reference.result.rows)
    assert jobs == 1
    text = "\n".join(plans)
    assert "ShuffledHashJoin" in text, text
    assert ("SortMergeJoin" in text) is sorted_joins, text
