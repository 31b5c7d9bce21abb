"""The RSP-QL fixture queries (``tests/fixtures/rspql/queries.rq``) the whole way, beside their C-SPARQL equivalents:
the generated data landed with ``csparql ingest`` and ``load-static``, each query evaluated window by window by
``Engine.evaluate`` into its own Delta result table, read back with ``csparql results``, and compared with the
C-SPARQL equivalent's stored results and with the independent evaluator."""

from __future__ import annotations

from collections import Counter

import pytest

from conformance import reference
from conformance.compare import Results, compare
from conformance.generator import INSTANTS, make_data
from conformance.reference import Case
from conformance.whole_way import QUIET, at_instant, land_data_sets, results_of, stored_windows
from csparql.cli import main
from csparql.core.frontend import compile_query, parse_query
from csparql.core.language import syntax as sx
from csparql.core.schedule import evaluation_at
from support import FIXTURES, read_blocks

BLOCKS = {block.name: block.text for block in read_blocks(FIXTURES / "rspql" / "queries.rq")}
DATA_SETS_USED = 2
PAIRS = []
for _index, (_name, _text) in enumerate((n, t) for n, t in BLOCKS.items() if not n.endswith(".csparql")):
    _data = make_data(_index % DATA_SETS_USED)
    _at = INSTANTS[_index % len(INSTANTS)]
    PAIRS.append((Case(f"rspql-{_name}", _text, _data.streams, _data.graphs, _at),
                  Case(f"csparql-{_name}", BLOCKS[f"{_name}.csparql"], _data.streams, _data.graphs, _at),
                  _index % DATA_SETS_USED))


def instants_of(case: Case) -> list[int]:
    """The instants a case is evaluated at: its own, a later one and a quiet one (no stream triple in its
    windows); every instant of the generator for ISTREAM and DSTREAM, whose differences are often empty."""
    if getattr(parse_query(case.text).form, "stream_operator", None) is not None:
        return [*INSTANTS, QUIET]
    later = [t for t in INSTANTS if t > case.at]
    return [case.at, min(later) if later else min(INSTANTS), QUIET]


def evaluate_windows(spark, case: Case, warehouse, name: str) -> None:
    """Evaluate the case at each of its instants as ``csparql run`` does, writing each window's results."""
    from csparql.deploy.history import text_version
    from csparql.engine.runner import Engine
    from csparql.storage.warehouse import Warehouse

    plan = compile_query(case.text)
    engine = Engine(Warehouse(warehouse), spark)
    for at in instants_of(case):
        engine.evaluate(plan, at, name, version=text_version(case.text))


def output_stream_windows(warehouse, name: str) -> dict[int, Results]:
    """What a REGISTER STREAM query wrote to its output stream, by window end (the triples' timestamp)."""
    from csparql.storage.statistics import read_table
    from csparql.storage.terms import from_dict
    from csparql.storage.warehouse import Warehouse, output_stream_iri
    from csparql.core.windows import to_micros

    windows: dict[int, list] = {}
    for row in read_table(Warehouse(warehouse).stream(str(output_stream_iri(name)))).to_pylist():
        windows.setdefault(to_micros(row["ts"]), []).append(tuple(from_dict(row[c]) for c in "spo"))
    return {end: Results("construct", triples=triples) for end, triples in windows.items()}


def table_name(case: Case) -> str:
    return case.name.replace("-", "_")


def form_of(case: Case) -> str:
    form = parse_query(case.text).form
    return {sx.AskForm: "ask", sx.ConstructForm: "construct", sx.DescribeForm: "describe"}.get(type(form), "select")


def reference_result(case: Case) -> Results:
    """The independent evaluator's result; ISTREAM and DSTREAM as multiset differences with the evaluation one
    STEP earlier (the previous evaluation of a query without COMPUTED EVERY over one window)."""
    query = parse_query(case.text)
    result = reference.evaluate(case)
    operator = getattr(query.form, "stream_operator", None)
    if operator in ("ISTREAM", "DSTREAM"):
        step = query.streams[0].window.step.micros
        end = evaluation_at(compile_query(case.text), case.at).end
        before = reference.evaluate(at_instant(case, end - step))
        now, then = Counter(result.rows), Counter(before.rows)
        rows = now - then if operator == "ISTREAM" else then - now
        result = Results("select", result.vars, list(rows.elements()))
    return result


@pytest.fixture(scope="module")
def warehouses(conformance_spark, tmp_path_factory):
    return land_data_sets(DATA_SETS_USED, tmp_path_factory.mktemp("rspql"))


def stored(case: Case, warehouse, capsys) -> dict[int, dict]:
    capsys.readouterr()
    assert main(["results", table_name(case), "--warehouse", str(warehouse), "--format", "json"]) == 0
    return stored_windows(capsys.readouterr().out)


@pytest.mark.parametrize("rspql, csparql, data_set", PAIRS, ids=[rspql.name for rspql, _, _ in PAIRS])
def test_an_rspql_query_evaluates_as_its_csparql_equivalent(rspql, csparql, data_set, conformance_spark, warehouses,
                                                             capsys):
    warehouse = warehouses[data_set]
    form = form_of(rspql)
    registration = compile_query(rspql.text).registration
    streamed = registration is not None and registration.kind == "STREAM"
    written = {}
    for case in (rspql, csparql):
        evaluate_windows(conformance_spark, case, warehouse, table_name(case))
        # a REGISTER STREAM query writes its output stream, named after the query (the same for both), and
        # no result table: read it after each query's evaluations (the second replaces the first's windows)
        written[case.name] = (output_stream_windows(warehouse, compile_query(case.text).registration.name) if streamed
                              else stored(case, warehouse, capsys))
    star = form == "select" and parse_query(rspql.text).form.items is None
    problems, answered = [], 0
    for at in instants_of(rspql):
        end = evaluation_at(compile_query(rspql.text), at).end
        expected = reference_result(at_instant(rspql, at))
        if streamed:
            empty = Results("construct", triples=[])
            actual, equivalent = (written[c.name].get(end, empty) for c in (rspql, csparql))
        else:
            actual, equivalent = (results_of(written[c.name].get(end), form, expected.vars) for c in (rspql, csparql))
        answered += bool(actual.rows or actual.triples or actual.boolean)
        problems += [f"window ending {end}: {p}" for p in compare(actual, expected, any_var_order=star)]
        problems += [f"window ending {end}, against C-SPARQL: {p}" for p in compare(actual, equivalent, any_var_order=star)]
    assert not problems, f"{rspql.name}\n{rspql.text}\n" + "\n".join(problems)
    assert answered, f"{rspql.name} has no results in any window: the comparison would say little"


def test_csparql_run_reads_rspql(conformance_spark, warehouses, tmp_path, capsys):
    """``csparql run --dialect rspql`` evaluates an RSP-QL file and writes the window's results under its name."""
    rspql, _, data_set = PAIRS[0]
    path = tmp_path / "counts.rq"
    path.write_text(rspql.text, encoding="utf-8")
    from csparql.core.windows import format_instant

    capsys.readouterr()
    assert main(["run", str(path), "--at", format_instant(rspql.at), "--warehouse", str(warehouses[data_set]),
                 "--dialect", "rspql"]) == 0
    capsys.readouterr()
    assert main(["results", "counts", "--warehouse", str(warehouses[data_set]), "--format", "json"]) == 0
    windows = stored_windows(capsys.readouterr().out)
    end = evaluation_at(compile_query(rspql.text), rspql.at).end
    expected = reference_result(rspql)
    assert not compare(results_of(windows.get(end), "select", expected.vars), expected)
    assert expected.rows


SEVERAL_WINDOWS = [
    Case(f"several-{block.name}", block.text, make_data(index % DATA_SETS_USED).streams,
         make_data(index % DATA_SETS_USED).graphs, INSTANTS[index % len(INSTANTS)])
    for index, block in enumerate(read_blocks(FIXTURES / "rspql" / "several_windows.rq"))
]


@pytest.mark.parametrize("case", SEVERAL_WINDOWS, ids=[case.name for case in SEVERAL_WINDOWS])
def test_several_windows_over_one_stream_evaluate_as_the_independent_evaluator(case, conformance_spark, warehouses,
                                                                                capsys):
    """Each window over the shared stream is its own named graph: the Delta reader reads each window's files and
    bounds, and the stored results equal the independent evaluator's, which loads each window's triples as a
    named graph of its own. The runs' reads of the stream are the sum of its windows' reads, under its IRI."""
    from csparql.deploy.history import text_version
    from csparql.engine.runner import Engine
    from csparql.storage.warehouse import Warehouse

    data_set = SEVERAL_WINDOWS.index(case) % DATA_SETS_USED
    warehouse = warehouses[data_set]
    plan = compile_query(case.text)
    engine = Engine(Warehouse(warehouse), conformance_spark)
    streams = {str(source.iri) for source in plan.streams}
    for at in instants_of(case):
        evaluation = engine.evaluate(plan, at, table_name(case), version=text_version(case.text))
        assert {str(iri) for iri in evaluation.scans} == streams
    written = stored(case, warehouse, capsys)
    problems, answered = [], 0
    for at in instants_of(case):
        end = evaluation_at(plan, at).end
        expected = reference_result(at_instant(case, at))
        actual = results_of(written.get(end), "select", expected.vars)
        answered += bool(actual.rows)
        problems += [f"window ending {end}: {p}" for p in compare(actual, expected)]
    assert not problems, f"{case.name}\n{case.text}\n" + "\n".join(problems)
    assert answered, f"{case.name} has no results in any window: the comparison would say little"
