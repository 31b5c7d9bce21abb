"""The W3C SPARQL 1.1 and DAWG query evaluation tests: the engine's result against the test's expected result
file (see ``w3c.py``); the tests left out are listed with their reasons in ``excluded.py``."""

from __future__ import annotations

import pytest

from conformance import w3c
from conformance.harness import Prefetcher

TESTS = w3c.included()


@pytest.fixture(scope="module")
def engine(conformance_spark):
    prefetch = Prefetcher(conformance_spark, [w3c.case_of(test) for test in TESTS])
    yield prefetch
    prefetch.close()


@pytest.mark.parametrize("test", TESTS, ids=[test.name for test in TESTS])
def test_w3c(test, engine):
    problems = w3c.check(engine.result(test.name), test)
    assert not problems, f"{test.name} ({test.query.name})\n" + "\n".join(problems)
