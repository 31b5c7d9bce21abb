"""Generated and unbound-heavy conformance cases taken the whole way — ingest, evaluation into Delta result
tables, ``csparql results`` — and compared with the independent evaluator window by window
(``whole_way.py`` says what is covered)."""

from __future__ import annotations

import pytest

from csparql.cli import main
from csparql.core.frontend import parse_query
from csparql.core.panes import ALWAYS, OFF
from csparql.core.language import syntax as sx

from conformance import reference
from conformance.compare import Results, compare, from_engine
from conformance.generator import DATA_SETS, INSTANTS, generated_cases
from conformance.harness import ordering
from conformance.whole_way import (
    at_instant,
    data_set_of,
    evaluated_compact,
    instants_of,
    QUIET,
    land_data_sets,
    Evaluations,
    results_of,
    stored_windows,
    table_name,
    whole_way_cases,
)

CASES = whole_way_cases()


@pytest.fixture(scope="module")
def warehouses(conformance_spark, tmp_path_factory):
    """One warehouse per data set, its streams and graphs landed through the command line."""
    return land_data_sets(DATA_SETS, tmp_path_factory.mktemp("whole-way"))


@pytest.fixture(scope="module")
def evaluations(conformance_spark, warehouses):
    running = Evaluations(conformance_spark, warehouses, CASES)
    yield running
    running.close()


def _form(case) -> str:
    form = parse_query(case.text).form
    if isinstance(form, sx.AskForm):
        return "ask"
    if isinstance(form, sx.ConstructForm):
        return "construct"
    if isinstance(form, sx.DescribeForm):
        return "describe"
    return "select"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_whole_way(case, warehouses, evaluations, capsys):
    warehouse = warehouses[data_set_of(case)]
    name = table_name(case)
    evaluations.wait(case)
    capsys.readouterr()
    assert main(["results", name, "--warehouse", str(warehouse), "--format", "json"]) == 0
    stored = stored_windows(capsys.readouterr().out)
    form = _form(case)
    problems = []
    for at in instants_of(case):
        expected = reference.evaluate(at_instant(case, at))
        window_end = _window_end(case, at)
        actual = results_of(stored.get(window_end), form, expected.vars)
        star = form == "select" and parse_query(case.text).form.items is None
        for problem in compare(actual, expected, any_var_order=star):
            problems.append(f"window ending {window_end}: {problem}")
    assert not problems, f"{case.name}\n{case.text}\n" + "\n".join(problems)


def test_the_share_taken_the_whole_way():
    """At least 100 cases, every category of the generator, and the unbound-heavy cases among them."""
    assert len(CASES) >= 100
    categories = {case.name.split("-", 1)[1] for case in CASES if case.name.startswith("gen")}
    assert len(categories) == 13
    assert sum(case.name.startswith("unbound-") for case in CASES) >= 8


def _window_end(case, at: int) -> int:
    """The end of the window the evaluation at ``at`` reads (docs/semantics.md, *When a query is evaluated*)."""
    from csparql.core.frontend import compile_query
    from csparql.core.schedule import evaluation_at

    return evaluation_at(compile_query(case.text), at).end


INSTANTS_FOR_OUTPUT = [INSTANTS[0], INSTANTS[2], QUIET]

OUTPUT_STREAM_CASE = """REGISTER STREAM UnboundOutput AS
PREFIX ex: <http://example.org/>
CONSTRUCT { ?e ex:copy ?v . ?e ex:seen ?n . ?e ex:named ?name }
FROM STREAM <http://streams.example.org/s1> [RANGE 5m STEP 1m]
WHERE { ?e ex:q ?n OPTIONAL { ?e ex:absent ?v } OPTIONAL { ?e ex:name ?name } }"""


def test_a_register_stream_output_the_whole_way(conformance_spark, warehouses):
    """A REGISTER STREAM query whose template variables are unbound in some solutions or all: each window's
    output, read back from its stream table, is the independent evaluator's graph."""
    from csparql.engine.runner import Engine
    from csparql.core.frontend import compile_query
    from csparql.storage.statistics import read_table
    from csparql.storage.terms import from_dict
    from csparql.storage.warehouse import Warehouse, output_stream_iri
    from csparql.core.windows import to_micros

    from conformance.generator import make_data
    from conformance.reference import Case

    data = make_data(0)
    case = Case("output-stream", OUTPUT_STREAM_CASE, data.streams, data.graphs, INSTANTS_FOR_OUTPUT[0])
    warehouse = Warehouse(warehouses[0])
    plan = compile_query(case.text)
    for at in INSTANTS_FOR_OUTPUT:
        Engine(warehouse, conformance_spark).evaluate(plan, at, "UnboundOutput", panes=ALWAYS)
    rows = read_table(warehouse.stream(str(output_stream_iri("UnboundOutput")))).to_pylist()
    problems = []
    for at in INSTANTS_FOR_OUTPUT:
        end = _window_end(case, at)
        triples = [tuple(from_dict(row[c]) for c in "spo") for row in rows if to_micros(row["ts"]) == end]
        expected = reference.evaluate(at_instant(case, at))
        problems += [f"window ending {end}: {p}" for p in compare(Results("construct", triples=triples), expected)]
    assert not problems, "\n".join(problems)
    assert any(to_micros(row["ts"]) == _window_end(case, INSTANTS_FOR_OUTPUT[0]) for row in rows)


GENERATED_SEEDS = range(260)
"""The seeds of ``test_generated.py``: its pane-decomposable queries are evaluated here over the same data sets,
landed in this module's warehouses (the in-memory harness does not go through the engine's pane path)."""


def test_pane_decomposable_cases_equal_recompute_and_the_oracle(conformance_spark, warehouses, evaluations):
    """Every whole-way case and every generated conformance query that is pane-decomposable, over the
    warehouse statistics: at each of its instants, its window by panes equals full recompute and the
    independent evaluator. The whole-way cases were evaluated through panes above (their stored panes make a
    second evaluation compute none); the other generated ones compute their panes here."""
    from concurrent.futures import ThreadPoolExecutor

    from csparql.engine.runner import Engine
    from csparql.core.frontend import compile_query
    from csparql.core.optimizer import optimize
    from csparql.core.panes import PanePlan, pane_plan
    from csparql.storage.warehouse import Warehouse

    whole_way = {case.name for case in CASES}
    candidates = CASES + [case for case in generated_cases(GENERATED_SEEDS) if case.name not in whole_way]
    engines = {index: Engine(Warehouse(path), conformance_spark) for index, path in warehouses.items()}
    distributed = {index: Engine(Warehouse(path), conformance_spark, compact_triples=0)
                   for index, path in warehouses.items()}

    def decomposable(case) -> bool:
        catalog = engines[data_set_of(case)].catalog
        return isinstance(pane_plan(optimize(compile_query(case.text), catalog.statistics())), PanePlan)

    chosen = [case for case in candidates if decomposable(case)]
    chosen_whole_way = [case for case in chosen if case.name in whole_way]
    print(f"pane-decomposable: {len(chosen_whole_way)} of {len(CASES)} whole-way cases, "
          f"{len(chosen) - len(chosen_whole_way)} more of the {len(GENERATED_SEEDS)} generated queries")
    assert len(chosen_whole_way) >= 10 and len(chosen) >= 18  # so the check cannot silently check nothing

    def check(case) -> list[str]:
        engine = (engines if evaluated_compact(case) else distributed)[data_set_of(case)]
        plan = compile_query(case.text)
        keys, star = ordering(parse_query(case.text))
        problems = []
        if case.name in whole_way:
            evaluations.wait(case)
        for at in instants_of(case):
            by_panes = engine.evaluate(plan, at, table_name(case), write=False, panes=ALWAYS)
            recomputed = engine.evaluate(plan, at, table_name(case), write=False, panes=OFF)
            if by_panes.panes is None:
                problems.append(f"at {at}: not evaluated from panes")
                continue
            if case.name in whole_way and by_panes.panes.computed:
                problems.append(f"at {at}: the whole-way evaluation stored no panes ({by_panes.panes})")
            expected = reference.evaluate(at_instant(case, at))
            actual = from_engine(by_panes.result)
            for label, other in (("recompute", from_engine(recomputed.result)), ("the oracle", expected)):
                problems += [f"at {at}: panes vs {label}: {p}" for p in compare(actual, other, keys, any_var_order=star)]
        return problems

    with ThreadPoolExecutor(3) as pool:
        found = dict(zip((case.name for case in chosen), pool.map(check, chosen)))
    failures = {name: problems for name, problems in found.items() if problems}
    assert not failures, "\n".join(f"{name}:\n  " + "\n  ".join(p) for name, p in failures.items())
