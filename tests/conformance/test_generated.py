"""Seeded random C-SPARQL queries over generated streams and graphs (``generator.py``), on Spark and on the
independent evaluator. Each seed is one query, checked on its own."""

from __future__ import annotations

import pytest

from csparql.core.frontend import compile_query

from conformance import generator
from conformance.harness import Prefetcher, differential

SEEDS = range(260)  # 20 queries of each of the 13 categories
CASES = generator.generated_cases(SEEDS)


@pytest.fixture(scope="module")
def engine(conformance_spark):
    prefetch = Prefetcher(conformance_spark, CASES)
    yield prefetch
    prefetch.close()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_generated(case, engine):
    problems = differential(engine.result(case.name), case)
    assert not problems, f"{case.name}\n{case.text}\n" + "\n".join(problems)


def test_generated_queries_are_valid():
    """Every generated query is valid C-SPARQL: the front end accepts it."""
    for case in CASES:
        compile_query(case.text)


def test_generation_is_deterministic():
    again = generator.generated_cases(SEEDS)
    assert [c.text for c in again] == [c.text for c in CASES]
    assert [c.streams for c in again[:5]] == [c.streams for c in CASES[:5]]
