"""``csparql sql`` over a warehouse of real Delta tables (written with delta-rs, no Spark needed): queries run,
and every statement that would write, read files outside the warehouse's tables or change the session is
refused with one line before anything runs, so the tables stay readable, here and with plain delta-rs.
DataFusion itself refuses them (its SQLOptions), so no spelling of a statement gets past a check of its text."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from storage.helpers import iri, write_static

from csparql.cli import main
from csparql.storage.stored import SqlError, SqlRefused, read_only_sql
from csparql.storage.warehouse import Warehouse

SECRET = "a line nobody should read through SQL"
# how every refusal ends, after what it refused
READ_ONLY = "; the SQL surface is read-only: only queries (SELECT, WITH, VALUES, EXPLAIN, SHOW, DESCRIBE) run"


@pytest.fixture
def warehouse(tmp_path):
    """The default static graph (two commits) and one query's result table."""
    root = tmp_path / "warehouse"
    triple = (iri("http://ex.org/a"), iri("http://ex.org/p"), iri("http://ex.org/b"))
    write_static(Warehouse.locate(root), None, [triple])
    write_deltalake(str(root / "results" / "CarsPerStreet" / "bindings"),
                    pa.table({"street": ["via Dante", "corso Como"], "passages": [3, 5]}))
    return root


@pytest.fixture
def outside(tmp_path):
    """A folder outside the warehouse holding a file with a secret in it."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.csv").write_text(f"line\n{SECRET}\n")
    return folder


def sql(warehouse, statement: str, *options: str) -> int:
    return main(["sql", "--warehouse", str(warehouse), *options, statement])


def snapshot(folder) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refusal(capsys) -> str:
    """What the one line a refused statement printed says was refused (and check nothing went to standard
    output)."""
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("csparql sql: refused: ") and lines[0].endswith(READ_ONLY), lines[0]
    return lines[0].removeprefix("csparql sql: refused: ").removesuffix(READ_ONLY)


def test_copy_into_a_delta_log_is_refused_and_the_table_stays_readable(warehouse, capsys):
    log = warehouse / "static" / "default" / "_delta_log"
    before = snapshot(warehouse)
    target = log / "00000000000000000001.json"
    assert sql(warehouse, f"COPY (SELECT 'garbage' AS a) TO '{target}' STORED AS CSV") == 1
    assert refusal(capsys) == "COPY writes files"
    assert snapshot(warehouse) == before
    assert sql(warehouse, "SELECT count(*) AS triples FROM static_default", "--format", "csv") == 0
    assert capsys.readouterr().out == "triples\n1\n"
    assert DeltaTable(str(warehouse / "static" / "default")).to_pyarrow_table().num_rows == 1


@pytest.mark.parametrize("target", ["copied.csv", "copied/"])
def test_copy_anywhere_else_is_refused_and_writes_nothing(warehouse, tmp_path, capsys, target):
    destination = tmp_path / "elsewhere"
    destination.mkdir()
    assert sql(warehouse, f"COPY carsperstreet TO '{destination / target}' STORED AS CSV") == 1
    assert refusal(capsys) == "COPY writes files"
    assert list(destination.iterdir()) == []


def test_explain_analyze_of_a_copy_is_refused_and_writes_nothing(warehouse, tmp_path, capsys):
    for explain in ("EXPLAIN ANALYZE", "EXPLAIN (ANALYZE)", "EXPLAIN ANALYZE EXPLAIN ANALYZE"):
        assert sql(warehouse, f"{explain} COPY (SELECT 1 AS a) TO '{tmp_path / 'analyzed.csv'}' STORED AS CSV") == 1
        assert refusal(capsys) == "COPY writes files"
        assert not (tmp_path / "analyzed.csv").exists()


def test_a_copy_hidden_from_a_text_match_is_refused(warehouse, tmp_path, capsys):
    """DataFusion nests block comments, so this is a COPY to it while a tokenizer that does not (sqlparse)
    sees a comment and then SELECT: the statement is refused by DataFusion, which reads it as it runs it."""
    hidden = f"/* /* */ SELECT 1 */ COPY (SELECT 1 AS a) TO '{tmp_path / 'hidden.csv'}' STORED AS CSV"
    assert sql(warehouse, hidden) == 1
    assert refusal(capsys) == "COPY writes files"
    assert not (tmp_path / "hidden.csv").exists()


def test_a_copy_inside_nested_comments_is_a_comment_and_the_query_after_it_runs(warehouse, tmp_path, capsys):
    """The other way round: to a tokenizer that does not nest comments this is a COPY; to DataFusion, a comment
    and then a SELECT, which runs and writes nothing."""
    commented = f"/* /* */ COPY (SELECT 1 AS a) TO '{tmp_path / 'commented.csv'}' STORED AS CSV */ SELECT 2 AS b"
    assert sql(warehouse, commented, "--format", "csv") == 0
    assert capsys.readouterr().out == "b\n2\n"
    assert not (tmp_path / "commented.csv").exists()


def test_create_external_table_is_refused(warehouse, outside, capsys):
    assert sql(warehouse, f"CREATE EXTERNAL TABLE stolen STORED AS CSV LOCATION '{outside / 'secret.csv'}'") == 1
    assert refusal(capsys) == "CREATE EXTERNAL TABLE reads files outside the warehouse's tables"
    assert sql(warehouse, "SELECT * FROM stolen") == 1
    assert SECRET not in "".join(capsys.readouterr())


@pytest.mark.parametrize("statement, what", [
    ("DROP TABLE carsperstreet", "DROP TABLE changes the catalog"),
    ("INSERT INTO carsperstreet VALUES ('via Manzoni', 1)", "INSERT INTO changes a table"),
    ("INSERT OVERWRITE carsperstreet VALUES ('via Manzoni', 1)", "INSERT OVERWRITE changes a table"),
    ("DELETE FROM carsperstreet", "DELETE changes a table"),
    ("UPDATE carsperstreet SET passages = 0", "UPDATE changes a table"),
    ("TRUNCATE carsperstreet", "TRUNCATE changes a table"),
    ("MERGE INTO carsperstreet USING carsperstreet AS s ON carsperstreet.street = s.street WHEN MATCHED THEN DELETE",
     "MERGE INTO changes a table"),
    ("CREATE VIEW busy AS SELECT * FROM carsperstreet", "CREATE VIEW changes the catalog"),
    ("CREATE TABLE copied AS SELECT * FROM carsperstreet", "CREATE TABLE changes the catalog"),
    ("SELECT * INTO copied FROM carsperstreet", "CREATE TABLE changes the catalog"),
    ("CREATE SCHEMA elsewhere", "CREATE SCHEMA changes the catalog"),
    ("CREATE FUNCTION twice(DOUBLE) RETURNS DOUBLE RETURN $1 * 2", "CREATE FUNCTION changes the catalog"),
    ("DROP VIEW busy", "DROP VIEW changes the catalog"),
    ("SET datafusion.catalog.information_schema = false", "SET changes the session"),
    ("RESET datafusion.catalog.information_schema", "RESET changes the session"),
    ("PREPARE busy AS SELECT * FROM carsperstreet", "PREPARE changes the session"),
    ("EXECUTE busy", "EXECUTE runs a prepared statement"),
    ("START TRANSACTION", "a transaction is not a query"),
    ("COMMIT", "COMMIT and ROLLBACK are not queries"),
])
def test_ddl_dml_and_session_statements_are_refused_and_change_nothing(warehouse, capsys, statement, what):
    before = snapshot(warehouse)
    assert sql(warehouse, statement) == 1
    assert refusal(capsys) == what
    assert snapshot(warehouse) == before
    assert sql(warehouse, "SELECT street, passages FROM carsperstreet ORDER BY passages", "--format", "csv") == 0
    assert capsys.readouterr().out == "street,passages\nvia Dante,3\ncorso Como,5\n"


@pytest.mark.parametrize("statements", [
    "SELECT 1; COPY (SELECT 1 AS a) TO '{target}' STORED AS CSV",
    "COPY (SELECT 1 AS a) TO '{target}' STORED AS CSV; SELECT 1",
    "SELECT 1; /* a comment; */ SET datafusion.execution.target_partitions = 1; COPY carsperstreet TO '{target}'",
    "SELECT 1; SELECT 2",
])
def test_more_than_one_statement_is_refused(warehouse, tmp_path, capsys, statements):
    assert sql(warehouse, statements.format(target=tmp_path / "second.csv")) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("csparql sql: ") and "single SQL statement" in err and "\n" not in err
    assert not (tmp_path / "second.csv").exists()


@pytest.mark.parametrize("statement", [
    "ALTER TABLE carsperstreet ADD COLUMN district VARCHAR",
    "ANALYZE TABLE carsperstreet COMPUTE STATISTICS",
    "ATTACH '{elsewhere}' AS elsewhere",
    "INSTALL httpfs",
    "USE elsewhere",
    "BEGIN",
    "GRANT SELECT ON carsperstreet TO everyone",
    "WITH more AS (SELECT 'via Manzoni' AS street, 1 AS passages) INSERT INTO carsperstreet SELECT * FROM more",
])
def test_statements_datafusion_cannot_run_are_one_line_errors_and_change_nothing(warehouse, tmp_path, capsys,
                                                                                 statement):
    before = snapshot(warehouse)
    assert sql(warehouse, statement.format(elsewhere=tmp_path / "elsewhere.db")) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("csparql sql: ") and err.count("\n") == 1
    assert "not implemented" in err or "Unsupported SQL statement" in err, err
    assert snapshot(warehouse) == before and not (tmp_path / "elsewhere.db").exists()


@pytest.mark.parametrize("reading", [
    "SELECT * FROM '{path}'",
    "SELECT * FROM 'file://{path}'",
    "SELECT * FROM read_csv('{path}')",
    "SELECT * FROM read_parquet('{path}')",
    "SELECT * FROM read_json('{path}')",
    "SELECT * FROM parquet_metadata('{path}')",
    'SELECT * FROM "{path}"',
    "DESCRIBE '{path}'",
    "SHOW COLUMNS FROM '{path}'",
    "WITH t AS (SELECT * FROM '{path}') SELECT * FROM t",
])
def test_selects_cannot_read_files_outside_the_warehouse(warehouse, outside, capsys, reading):
    assert sql(warehouse, reading.format(path=outside / "secret.csv")) == 1
    out, err = capsys.readouterr()
    assert err.startswith("csparql sql: ") and "not found" in err and err.count("\n") == 1
    assert SECRET not in out + err


@pytest.mark.parametrize("statement, expected", [
    ("SELECT street FROM carsperstreet WHERE passages > 4", "street\ncorso Como\n"),
    ("WITH busy AS (SELECT * FROM carsperstreet WHERE passages > 4) SELECT count(*) AS n FROM busy", "n\n1\n"),
    ("VALUES (1, 'a')", "column1,column2\n1,a\n"),
    ("SELECT count(*) AS n FROM static_default", "n\n1\n"),
    ("SELECT sum(value) AS total FROM generate_series(1, 3)", "total\n6\n"),
    ("SELECT street FROM carsperstreet WHERE passages < 4; -- one statement, and a comment", "street\nvia Dante\n"),
])
def test_queries_run(warehouse, capsys, statement, expected):
    assert sql(warehouse, statement, "--format", "csv") == 0
    assert capsys.readouterr().out == expected


def test_explain_show_and_describe_run(warehouse, capsys):
    assert sql(warehouse, "EXPLAIN SELECT street FROM carsperstreet", "--format", "json") == 0
    assert "TableScan: carsperstreet" in capsys.readouterr().out
    assert sql(warehouse, "EXPLAIN ANALYZE SELECT street FROM carsperstreet", "--format", "json") == 0
    assert "metrics" in capsys.readouterr().out
    assert sql(warehouse, "SHOW TABLES", "--format", "csv") == 0
    assert {"carsperstreet", "static_default", "statistics"} <= set(capsys.readouterr().out.replace(",", "\n").split())
    assert sql(warehouse, "DESCRIBE carsperstreet", "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["street,Utf8View,YES", "passages,Int64,YES"]
    assert sql(warehouse, "SHOW COLUMNS FROM carsperstreet", "--format", "csv") == 0
    assert "passages" in capsys.readouterr().out


@pytest.mark.parametrize("explain, what", [
    ("EXPLAIN COPY carsperstreet TO '{path}' STORED AS CSV", "COPY writes files"),
    ("EXPLAIN VERBOSE COPY carsperstreet TO '{path}' STORED AS CSV", "COPY writes files"),
    ("EXPLAIN FORMAT tree COPY carsperstreet TO '{path}' STORED AS CSV", "COPY writes files"),
    ("EXPLAIN CREATE EXTERNAL TABLE stolen STORED AS CSV LOCATION '{path}'",
     "CREATE EXTERNAL TABLE reads files outside the warehouse's tables"),
    ("EXPLAIN DROP TABLE carsperstreet", "DROP TABLE changes the catalog"),
])
def test_explain_of_a_write_is_refused_and_runs_nothing(warehouse, tmp_path, capsys, explain, what):
    """DataFusion checks the statement an EXPLAIN explains as if it ran it: only queries are explained."""
    before = snapshot(warehouse)
    assert sql(warehouse, explain.format(path=tmp_path / "planned.csv")) == 1
    assert refusal(capsys) == what
    assert not (tmp_path / "planned.csv").exists() and snapshot(warehouse) == before


def test_errors_are_one_line_pointing_at_the_statement_as_written(warehouse, capsys):
    assert sql(warehouse, "SELECT street\nFROM carsperstreet WHERE passages === 1") == 1
    err = capsys.readouterr().err
    assert err.startswith("csparql sql: ") and "found: = at Line: 2, Column: 37" in err and err.count("\n") == 1
    assert sql(warehouse, "SELECT street FROM carsperstreet WHERE street >> 1") == 1
    err = capsys.readouterr().err
    assert err.startswith("csparql sql: Error during planning: Cannot infer common type") and err.count("\n") == 1


def test_a_query_opens_only_the_tables_it_names_and_an_unreadable_one_is_one_line(warehouse, capsys):
    """A result table whose Delta log has no commit (a write that never committed): queries over the other
    tables run, and the one naming it says which table cannot be read, and where."""
    broken = warehouse / "results" / "Broken" / "bindings"
    (broken / "_delta_log").mkdir(parents=True)
    assert sql(warehouse, "SELECT street FROM carsperstreet WHERE passages > 4", "--format", "csv") == 0
    assert capsys.readouterr().out == "street\ncorso Como\n"
    for statement in ("SELECT * FROM broken", "SELECT * FROM carsperstreet JOIN broken USING (street)"):
        assert sql(warehouse, statement) == 1
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"csparql sql: cannot read the table broken ({broken}): "), err
        assert err.count("\n") == 1


def test_the_reusable_check_refuses_before_running(warehouse, tmp_path):
    """:func:`read_only_sql` is what any caller (the CLI, a page) runs SQL through."""
    rows = read_only_sql(Warehouse.locate(warehouse), "SELECT passages FROM carsperstreet ORDER BY passages")
    assert rows.column("passages").to_pylist() == [3, 5]
    with pytest.raises(SqlRefused) as refused:
        read_only_sql(Warehouse.locate(warehouse), f"COPY carsperstreet TO '{tmp_path / 'x.csv'}' STORED AS CSV")
    assert str(refused.value) == f"refused: COPY writes files{READ_ONLY}"
    with pytest.raises(SqlError) as error:
        read_only_sql(Warehouse.locate(warehouse), "SELECT * FROM nosuch")
    assert not isinstance(error.value, SqlRefused) and "nosuch" in str(error.value)
    assert not (tmp_path / "x.csv").exists()
