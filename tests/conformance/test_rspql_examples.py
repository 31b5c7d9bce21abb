"""The RSP-QL forms of the example queries (``examples/rspql/queries``), over the urban data of ``urban.py``: each is
evaluated on Spark and compared with the independent evaluator on its own text and on the C-SPARQL example it
comes from, so that the RSP-QL form gives the results of the original."""

from __future__ import annotations

import re

import pytest

from conformance import reference, urban
from conformance.compare import compare
from conformance.harness import Prefetcher, differential, ordering
from conformance.reference import Case
from csparql.core.frontend import parse_query
from csparql.core.language.dialect import detect_dialect
from csparql.core.language.rspql_printer import format_rspql
from support import ROOT

RSPQL_EXAMPLES = ROOT / "examples" / "rspql"


def _source(text: str) -> str:
    return re.search(r"^# source: (examples/queries/\S+\.rq)", text, flags=re.M).group(1)


def _cases() -> list[tuple[Case, Case]]:
    streams, graphs = urban.urban_data()
    cases = []
    for path in sorted((RSPQL_EXAMPLES / "queries").glob("*.rq")):
        text = path.read_text(encoding="utf-8")
        original = ROOT / _source(text)
        cases.append((Case(f"rspql-{path.stem}", text, streams, graphs, urban.AT),
                      Case(original.stem, original.read_text(encoding="utf-8"), streams, graphs, urban.AT)))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def engine(conformance_spark):
    prefetch = Prefetcher(conformance_spark, [rspql for rspql, _ in CASES])
    yield prefetch
    prefetch.close()


def test_every_example_has_an_rspql_form_or_a_reason():
    """Each C-SPARQL example that runs has its RSP-QL form here, or the README says why RSP-QL cannot express it."""
    readme = (RSPQL_EXAMPLES / "README.md").read_text(encoding="utf-8")
    covered = {original.name for _, original in CASES}
    for path in urban.example_files():
        assert path.stem in covered or f"`{path.name}`" in readme, path.name
    assert len(CASES) >= 10


@pytest.mark.parametrize("rspql, original", CASES, ids=[rspql.name for rspql, _ in CASES])
def test_the_rspql_form_is_rspql_and_round_trips(rspql, original):
    assert detect_dialect(rspql.text) == "rspql"
    query = parse_query(rspql.text, rspql.name)
    assert parse_query(format_rspql(query)) == query


@pytest.mark.parametrize("rspql, original", CASES, ids=[rspql.name for rspql, _ in CASES])
def test_the_rspql_form_gives_the_results_of_the_example(rspql, original, engine):
    result = engine.result(rspql.name)
    problems = differential(result, rspql)
    keys, star = ordering(parse_query(rspql.text))
    problems += [f"against {original.name}: {p}" for p in compare(result, reference.evaluate(original), keys, any_var_order=star)]
    assert not problems, f"{rspql.name}\n{rspql.text}\n" + "\n".join(problems)
