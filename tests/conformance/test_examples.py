"""Every example query with ``expect: ok``, over the urban data of ``urban.py``, on Spark and on the
independent evaluator."""

from __future__ import annotations

import pytest

from conformance import reference, urban
from conformance.compare import Results
from conformance.harness import Prefetcher, differential

CASES = urban.example_cases()


@pytest.fixture(scope="module")
def engine(conformance_spark):
    prefetch = Prefetcher(conformance_spark, CASES)
    yield prefetch
    prefetch.close()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_example(case, engine):
    problems = differential(engine.result(case.name), case)
    assert not problems, f"{case.name}\n{case.text}\n" + "\n".join(problems)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_example_data_gives_results(case):
    """The urban data is shaped so that no example is checked on an empty result."""
    result: Results = reference.evaluate(case)
    size = {"select": len(result.rows), "ask": int(bool(result.boolean))}.get(result.form, len(result.triples))
    assert size > 0, f"{case.name} has no results over the urban data"
