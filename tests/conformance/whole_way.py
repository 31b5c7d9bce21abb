"""Conformance cases the whole way a user's results go: the case's streams and graphs written to files and
landed with ``csparql ingest`` and ``csparql load-static``, each window evaluated by ``Engine.evaluate`` (what
``csparql run``, ``replay`` and the Airflow task call) into the query's Delta result table, and read back with
``csparql results --format json`` — then compared with the independent evaluator, window by window.

The in-memory harness (``harness.engine_result``) checks the engine's evaluation; this checks everything
after it too: the result tables' schemas (a variable unbound in a whole window, a variable whose type
changes from one window to the next, the first write to a new table and later ones), the N-Triples terms
written and parsed back, and the result formats.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from rdflib import BNode, Graph, Literal, URIRef

from conformance.compare import Results
from conformance.generator import DATA_SETS, INSTANTS, MINUTE, T0, generated_cases, make_data
from conformance.reference import Case

from csparql.cli import main
from csparql.core.windows import format_instant

PER_CATEGORY = 8
"""Generated seeds per category taken the whole way (13 categories)."""

QUIET = T0 + 60 * MINUTE
"""An instant whose windows hold no stream triple (the data span 20 minutes from T0): every OPTIONAL over
the stream matches nothing, every stream variable is unbound."""

PREFIXES = "PREFIX ex: <http://example.org/>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"

UNBOUND_CASES = {
    # an OPTIONAL part that matches nothing in any window
    "optional-never": """SELECT ?e ?n ?v FROM STREAM <http://streams.example.org/s1> [RANGE 5m STEP 1m]
        WHERE { ?e ex:q ?n OPTIONAL { ?e ex:absent ?v } }""",
    # an OPTIONAL over the stream from a static part: unbound in quiet windows, bound in others
    "optional-quiet": """SELECT ?e ?x ?n FROM STREAM <http://streams.example.org/s1> [RANGE 5m STEP 1m] FROM <http://example.org/g1>
        WHERE { ?e ex:val ?x OPTIONAL { ?e ex:q ?n } }""",
    # a projected variable the pattern never binds
    "never-bound": """SELECT ?e ?nothing FROM STREAM <http://streams.example.org/s2> [RANGE 10m STEP 5m]
        WHERE { ?e ex:p ?o }""",
    # an expression over an unbound variable, both projected
    "coalesce-unbound": """SELECT ?e ?unbound ?c FROM STREAM <http://streams.example.org/s1> [RANGE 10m STEP 1m]
        WHERE { ?e ex:q ?n BIND(COALESCE(?unbound * 2, -1) AS ?c) }""",
    # an AGGREGATE whose SUM is an error in some groups (strings, a boolean) and a number in others
    "aggregate-some-errors": """SELECT ?e ?v ?agg FROM STREAM <http://streams.example.org/s1> [RANGE 10m STEP 1m]
        WHERE { { ?e ex:q ?v } UNION { ?e ex:r ?v } }
        AGGREGATE { (?agg, SUM(?v), {?e}) }""",
    # a variable whose type changes from one window to the next (integers, then strings, then unbound)
    "type-changes": """SELECT ?e ?t FROM STREAM <http://streams.example.org/s1> [RANGE 5m STEP 1m]
        WHERE { ?e ex:q ?n BIND(IF(NOW() < "2024-01-01T00:12:00Z"^^xsd:dateTime, ?n, CONCAT("n", STR(?n))) AS ?t) }""",
    # a typed column first written by a window in which it is unbound everywhere
    "unbound-then-typed": """SELECT ?e ?x FROM STREAM <http://streams.example.org/s1> [RANGE 5m STEP 1m]
        WHERE { ?e ex:q ?n OPTIONAL { ?e ex:q ?x FILTER(NOW() > "2024-01-01T00:12:00Z"^^xsd:dateTime) } }""",
    # ASK and CONSTRUCT over a window that may be empty
    "ask-quiet": """ASK FROM STREAM <http://streams.example.org/s3> [RANGE 5m STEP 1m] WHERE { ?e ex:q ?n }""",
    "construct-unbound": """CONSTRUCT { ?e ex:copy ?v . ?e ex:seen ?n } FROM STREAM <http://streams.example.org/s1> [RANGE 5m STEP 1m]
        WHERE { ?e ex:q ?n OPTIONAL { ?e ex:absent ?v } }""",
}


def whole_way_cases() -> list[Case]:
    """The generated cases taken the whole way (``PER_CATEGORY`` of each category), then the cases of
    ``UNBOUND_CASES`` over each data set."""
    cases = generated_cases(range(13 * PER_CATEGORY))
    for index, (name, body) in enumerate(UNBOUND_CASES.items()):
        data = make_data(index % DATA_SETS)
        cases.append(Case(f"unbound-{name}", PREFIXES + body, data.streams, data.graphs, INSTANTS[index % len(INSTANTS)]))
    return cases


def instants_of(case: Case) -> list[int]:
    """The instants a case is evaluated at, in this order: its own, a later one among the generator's
    instants (or an earlier one), and a quiet one."""
    others = [t for t in INSTANTS if t != case.at]
    later = [t for t in others if t > case.at]
    return [case.at, min(later) if later else max(others), QUIET]


def data_set_of(case: Case) -> int:
    """Which of the generator's data sets the case reads (cases of one data set share a warehouse)."""
    for index in range(DATA_SETS):
        if make_data(index).streams == case.streams:
            return index
    raise ValueError(f"{case.name} reads data of no generated data set")


# --- files and commands ------------------------------------------------------------------------------------


def _nt(term) -> str:
    return term.n3() if not isinstance(term, BNode) else f"_:{term}"


def land_data_set(index: int, warehouse: Path, folder: Path) -> None:
    """Write data set ``index`` to files and land it with ``csparql ingest`` and ``csparql load-static``."""
    data = make_data(index)
    folder.mkdir(parents=True, exist_ok=True)
    for number, (stream, items) in enumerate(data.streams.items()):
        path = folder / f"stream{number}.nq"
        lines = [f'{_nt(s)} {_nt(p)} {_nt(o)} "{format_instant(tau)}"^^<http://www.w3.org/2001/XMLSchema#dateTime> .'
                 for s, p, o, tau in items]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        _command(["ingest", "--warehouse", str(warehouse), "--stream", str(stream), str(path)])
    for number, (graph, triples) in enumerate(data.graphs.items()):
        path = folder / f"graph{number}.nt"
        path.write_text("".join(f"{_nt(s)} {_nt(p)} {_nt(o)} .\n" for s, p, o in triples), encoding="utf-8")
        _command(["load-static", "--warehouse", str(warehouse), *(["--graph", str(graph)] if graph else []), str(path)])


def land_data_sets(count: int, root: Path) -> dict[int, Path]:
    """Data sets 0 … ``count - 1``, each landed in its own warehouse under ``root``: index → warehouse."""
    landed = {}
    for index in range(count):
        landed[index] = root / f"warehouse{index}"
        land_data_set(index, landed[index], root / f"files{index}")
    return landed


def _command(argv: list[str]) -> None:
    code = main(argv)
    if code != 0:
        raise AssertionError(f"csparql {' '.join(argv)} exited with {code}")


def evaluate_windows(spark, case: Case, warehouse: Path, name: str, compact: bool = True) -> None:
    """Evaluate the case at each of its instants as ``csparql run`` does, writing each window's results;
    ``compact=False`` evaluates as the engine does windows too large for one partition. A window that can be
    combined from panes is (``panes=ALWAYS``), whatever its size and partials, so the oracle checks that path too."""
    from csparql.deploy.history import text_version
    from csparql.engine.runner import Engine
    from csparql.core.frontend import compile_query
    from csparql.core.panes import ALWAYS
    from csparql.storage.warehouse import Warehouse

    plan = compile_query(case.text)
    engine = Engine(Warehouse(warehouse), spark, **({} if compact else {"compact_triples": 0}))
    for at in instants_of(case):
        engine.evaluate(plan, at, name, version=text_version(case.text), panes=ALWAYS)


class Evaluations:
    """Evaluates cases in a few threads ahead of the tests that read their results back (as the in-memory
    harness's ``Prefetcher`` does: Spark runs several threads' jobs at once)."""

    def __init__(self, spark, warehouses: dict[int, Path], cases: list[Case], workers: int = 3):
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(workers)
        self.futures = {
            case.name: self.pool.submit(evaluate_windows, spark, case, warehouses[data_set_of(case)], table_name(case),
                                        compact=evaluated_compact(case))
            for case in cases
        }

    def wait(self, case: Case) -> None:
        """Returns once the case's windows are written; raises what their evaluation raised."""
        self.futures[case.name].result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def evaluated_compact(case: Case) -> bool:
    """Whether the case is evaluated compact (one partition: every window of these data is small enough) or
    as larger windows are (distributed: broadcasts and shuffles); every other generated case is each."""
    return not (case.name.startswith("gen") and int(case.name[3:6]) % 2)


def table_name(case: Case) -> str:
    return case.name.replace("-", "_")


def stored_windows(output: str) -> dict[int, dict]:
    """``csparql results --format json`` output: each window's results object by window end."""
    from csparql.core.windows import parse_instant

    windows = {}
    for line in output.splitlines():
        if line.strip():
            record = json.loads(line)
            windows[parse_instant(record["window_end"])] = record["results"]
    return windows


def results_of(record: dict | None, form: str, variables: tuple[str, ...]) -> Results:
    """A window's record read back as ``Results``; a window with no stored record had no results."""
    if form == "ask":
        return Results("ask", boolean=bool(record and record["boolean"]))
    if form in ("construct", "describe"):
        graph = Graph()
        if record:
            graph.parse(data=record["graph"], format="nt")
        return Results(form, triples=list(graph))
    if record is None:
        return Results("select", variables, [])
    names = tuple(record["head"]["vars"])
    rows = [tuple(_json_term(binding.get(name)) for name in names) for binding in record["results"]["bindings"]]
    return Results("select", names, rows)


def _json_term(value: dict | None):
    if value is None:
        return None
    if value["type"] == "uri":
        return URIRef(value["value"])
    if value["type"] == "bnode":
        return BNode(value["value"])
    if "xml:lang" in value:
        return Literal(value["value"], lang=value["xml:lang"], normalize=False)
    datatype = value.get("datatype")
    return Literal(value["value"], datatype=URIRef(datatype) if datatype else None, normalize=False)


def at_instant(case: Case, at: int) -> Case:
    return dataclasses.replace(case, at=at)
