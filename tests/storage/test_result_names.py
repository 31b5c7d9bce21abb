"""Result names SQL can tell apart: ``csparql run`` and ``replay`` refuse a result name that SQL would confuse
with the warehouse's own tables or with another query's stored results, and ``csparql sql`` shows every table
of a warehouse written before those checks. Each refusal happens before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from csparql.cli import main
from csparql.storage.stored import sql_tables
from csparql.storage import delta, schema
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import from_micros, parse_instant

T0 = parse_instant("2010-03-22T10:00:00Z")
ASK = "ASK FROM STREAM <http://example.org/s> [RANGE 1m STEP 1m] WHERE { ?s ?p ?o }\n"


def store_answers(warehouse: Warehouse, name: str) -> Path:
    """Results of ``name``, as an evaluation writes them (one ASK answer)."""
    row = {"window_start": from_micros(T0), "window_end": from_micros(T0 + 60_000_000), "answer": True,
           "query_version": None}
    path = warehouse.results(name, "answers")
    delta.append(path, pa.Table.from_pylist([row], schema=schema.ANSWERS), schema.ANSWERS)
    return path


def run_cli(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, err


@pytest.mark.parametrize("command", ["run", "replay"])
def test_a_result_name_that_sql_would_confuse_is_refused_and_nothing_is_written(tmp_path, capsys, command):
    warehouse = Warehouse(tmp_path / "wh")
    store_answers(warehouse, "caseq")
    query = tmp_path / "q.rq"
    query.write_text(ASK)
    when = ["--at", "2010-03-22T10:01:00Z"] if command == "run" else ["--from", "2010-03-22T10:01:00Z",
                                                                       "--to", "2010-03-22T10:02:00Z"]
    base = [command, str(query), *when, "--warehouse", str(warehouse.root)]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))

    code, err = run_cli(capsys, *base, "--name", "CaseQ")
    assert code == 1
    assert err.strip() == (f"csparql: 'CaseQ' collides with the stored results of the query caseq "
                           f"({warehouse.root / 'results' / 'caseq'}): SQL knows tables by lower-case names only, "
                           "so both would have the result table caseq; choose another name")
    code, err = run_cli(capsys, *base, "--name", "caseq_answers")  # caseq's ASK results are caseq_answers
    assert code == 1 and "'caseq_answers' collides with the stored results of the query caseq" in err
    for reserved in ("runs", "Statistics", "stream_tollgates", "STATIC_city", "stale_windows", "panes",
                     "information_schema", "Public"):
        code, err = run_cli(capsys, *base, "--name", reserved)
        assert code == 1 and f"csparql: '{reserved}' cannot name a query:" in err
    named = tmp_path / "Runs.rq"  # no --name: the file's stem
    named.write_text(ASK)
    code, err = run_cli(capsys, command, str(named), *when, "--warehouse", str(warehouse.root))
    assert code == 1 and "'Runs' cannot name a query: its results would be the SQL table runs" in err
    named.unlink()
    code, err = run_cli(capsys, command, str(tmp_path / "q.rq"), *when, "--warehouse", str(warehouse.root),
                        "--name", "CASEQ")
    assert code == 1 and "'CASEQ' collides" in err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_sql_shows_every_table_of_a_warehouse_written_before_names_were_checked(tmp_path, capsys):
    warehouse = Warehouse(tmp_path / "wh")
    delta.ensure(warehouse.runs, schema.RUNS)
    upper, lower = store_answers(warehouse, "CaseQ"), store_answers(warehouse, "caseq")
    runs_query = warehouse.results("runs", "bindings")  # a SELECT query named `runs`
    delta.ensure(runs_query, pa.schema(list(schema.WINDOW_COLUMNS)))
    assert sql_tables(warehouse) == {
        "runs": warehouse.runs,  # the warehouse's own table keeps its name
        "statistics": warehouse.statistics,  # shown (empty) before their first row
        "stale_windows": warehouse.stale_windows,
        "runs_": runs_query,
        "caseq_answers": upper,
        "caseq_answers_": lower,
    }
    code, _ = run_cli(capsys, "sql", "--warehouse", str(warehouse.root), "--tables")
    assert code == 0
    code, _ = run_cli(capsys, "sql", "--warehouse", str(warehouse.root), "SELECT answer FROM caseq_answers_")
    assert code == 0


def test_sql_reads_and_lists_the_stale_windows_table(tmp_path, capsys):
    from csparql.storage import stale_windows as sw

    warehouse = Warehouse(tmp_path / "wh")
    sw.append_stale_windows(warehouse, [sw.StaleWindow(
        "passages", T0, T0 + 60_000_000, "http://example.org/s", 3, T0 + 90_000_000, sw.LATE_TRIPLES, 2, 30_000,
        40_000, T0 + 91_000_000, True, sw.PENDING)])
    assert sql_tables(warehouse) == {"runs": warehouse.runs, "statistics": warehouse.statistics,
                                     "stale_windows": warehouse.stale_windows}
    code = main(["sql", "--warehouse", str(warehouse.root), "--tables"])
    listed = capsys.readouterr().out
    assert code == 0 and f"stale_windows\t{warehouse.stale_windows}\n" in listed
    code = main(["sql", "--warehouse", str(warehouse.root), "--format", "csv",
                 "SELECT query, stream, late_triples, status FROM stale_windows"])
    assert code == 0 and capsys.readouterr().out == (
        "query,stream,late_triples,status\npassages,http://example.org/s,2,pending\n")
