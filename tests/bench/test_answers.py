"""A benchmark comparing systems that compute different answers is meaningless: on small windows of every
workload, each system's answer is the same multiset as pyoxigraph's (the independent SPARQL evaluator, over
the window exported from the stored files), and the answers are not trivial.

The data goes through the product's real paths (``ingest_stream``, ``load_static``) into real warehouses; the
cold system (one spark-submit per window) is checked by the quick run of ``test_quick_run.py``."""

from __future__ import annotations

import pytest

from benchmarks import data, workloads
from benchmarks.systems import CsparqlFilter, CsparqlWarm, DuckDB, Point, Pyoxigraph, Rdflib, SparkHand

SIZE = 600
# rdflib's own N-Quads parser uses its deprecated Dataset.default_context
pytestmark = pytest.mark.filterwarnings("ignore:Dataset.default_context is deprecated:DeprecationWarning")


@pytest.fixture(scope="module")
def datasets(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("bench-data")
    return {
        ("urban", 1): data.build(spark, "urban", root, SIZE, 1, seed=11),
        ("urban", 3): data.build(spark, "urban", root, SIZE, 3, seed=11),
        ("topics", 30): data.build(spark, "topics", root, SIZE, 30, seed=11),  # 90 minutes: two hour buckets
        ("two_streams", 1): data.build(spark, "two_streams", root, 3000, 1, seed=11),
    }


def _answers(spark, point: Point, systems) -> dict:
    answers = {}
    for system in systems:
        system.prepare(point)
        answers[system.name] = system.answer(point, system.run(point))
    return answers


CASES = {
    "district_count": (workloads.district_count, ("urban", 1)),
    "construct_stream": (workloads.construct_stream, ("urban", 1)),
    "topic_count": (workloads.topic_count, ("topics", 30)),
    "topic_set": (workloads.topic_set, ("topics", 30)),
    "physical_window": (lambda: workloads.physical_window(SIZE // 2), ("urban", 3)),
    "two_streams": (workloads.two_streams, ("two_streams", 1)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_system_gives_pyoxigraphs_answer(spark, datasets, tmp_path, name):
    make, key = CASES[name]
    workload = make()
    point = Point("test", workload, datasets[key], data.AT, tmp_path)
    answers = _answers(spark, point, [Pyoxigraph(), Rdflib(), DuckDB(), SparkHand(spark), CsparqlWarm(spark)])
    reference = answers.pop("pyoxigraph")
    assert sum(reference.values()) > 0
    for system, answer in answers.items():
        assert answer == reference, f"{system} differs from pyoxigraph on {name}: missing " \
            f"{list((reference - answer).items())[:3]}, extra {list((answer - reference).items())[:3]}"


def test_the_answers_are_not_trivial(spark, datasets, tmp_path):
    counts = _answers(spark, Point("test", workloads.district_count(), datasets[("urban", 1)], data.AT, tmp_path),
                      [Pyoxigraph()])["pyoxigraph"]
    assert len(counts) == data.DISTRICTS  # every district has passages …
    assert sum(int(n) for _, n in counts) <= SIZE  # … and no passage is counted twice
    streets = _answers(spark, Point("test", workloads.two_streams(), datasets[("two_streams", 1)], data.AT,
                                    tmp_path / "two"), [Pyoxigraph()])["pyoxigraph"]
    kept = {street for street, _ in streets}
    assert 0 < len(kept) < data.STREETS  # the FILTER on capacity keeps some streets and drops others


def test_a_physical_window_takes_only_the_latest_triples(spark, datasets, tmp_path):
    point = Point("test", workloads.physical_window(SIZE // 2), datasets[("urban", 3)], data.AT, tmp_path)
    counts = _answers(spark, point, [Pyoxigraph()])["pyoxigraph"]
    assert SIZE // 2 - 5 <= sum(int(n) for _, n in counts) <= SIZE // 2  # a few duplicate passages collapse
    from csparql.storage import delta

    stream = datasets[("urban", 3)].warehouse.stream(data.MILAN_TOLLGATES)
    stored = delta.live_files(delta.open_table(stream), stream)
    assert len(point.window.stream(data.MILAN_TOLLGATES).files) < len(stored)  # the old files are not opened


def test_the_filter_approach_gives_the_windows_answer_over_the_whole_stream(spark, datasets, tmp_path):
    point = Point("test", workloads.topic_count(), datasets[("topics", 30)], data.AT, tmp_path)
    answers = _answers(spark, point, [Pyoxigraph(), CsparqlFilter(spark)])
    assert answers["csparql_filter"] == answers["pyoxigraph"]
    filter_plan = CsparqlFilter(spark).plan_of(point)
    whole = workloads.window_files(filter_plan, datasets[("topics", 30)].warehouse, data.AT)
    window = point.window
    # the window prunes files by time; the FILTER approach reads every file of the stream
    assert len(whole.stream(data.INTERACTIONS).files) > len(window.stream(data.INTERACTIONS).files)
